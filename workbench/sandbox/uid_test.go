package sandbox

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

// claimer is a helper process of the test binary holding uids.
type claimer struct {
	cmd  *exec.Cmd
	uids []int
	err  error
}

func startClaimer(t *testing.T, dir string, n int) *claimer {
	t.Helper()
	cmd := exec.CommandContext(testenv.Context(t), os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=claim", "SANDBOX_TEST_LOCKDIR="+dir, "SANDBOX_TEST_CLAIMS="+strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	c := &claimer{cmd: cmd}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if sc.Text() == "ready" {
			return c
		}
		uid, err := strconv.Atoi(sc.Text())
		if err != nil {
			c.err = fmt.Errorf("helper said %q", sc.Text())
			return c
		}
		c.uids = append(c.uids, uid)
	}
	c.err = fmt.Errorf("helper ended before ready: %v", sc.Err())
	return c
}

// TestPoolTwoProcesses: two workbench processes claim uids from one lock
// directory at the same time; no uid is handed out twice, and the uids of
// a process that dies are free again.
func TestPoolTwoProcesses(t *testing.T) {
	dir := t.TempDir() + "/uids"
	const each = 400
	var wg sync.WaitGroup
	cs := make([]*claimer, 2)
	for i := range cs {
		wg.Add(1)
		go func() { defer wg.Done(); cs[i] = startClaimer(t, dir, each) }()
	}
	wg.Wait()
	seen := map[int]int{}
	for i, c := range cs {
		if c.err != nil {
			t.Fatalf("claimer %d: %v", i, c.err)
		}
		if len(c.uids) != each {
			t.Fatalf("claimer %d got %d uids, want %d", i, len(c.uids), each)
		}
		for _, uid := range c.uids {
			if !IsSandboxUID(uid) {
				t.Fatalf("claimer %d got uid %d outside the range", i, uid)
			}
			if j, dup := seen[uid]; dup {
				t.Fatalf("uid %d handed out to claimer %d and claimer %d", uid, j, i)
			}
			seen[uid] = i
		}
	}
	// This process sees them all taken but the rest.
	p := NewPool(dir, testRange)
	var mine []int
	for range DefaultRange.Slots() - 2*each {
		uid, err := p.Claim()
		if err != nil {
			t.Fatalf("claim %d: %v", len(mine), err)
		}
		if _, dup := seen[uid]; dup {
			t.Fatalf("uid %d held by claimer %d was handed out again", uid, seen[uid])
		}
		mine = append(mine, uid)
	}
	if _, err := p.Claim(); err == nil || !strings.Contains(err.Error(), "no free sandbox uid") {
		t.Fatalf("claim with every uid held: err %v, want ErrNoFreeUID", err)
	}
	// A claimer that dies frees its uids.
	if err := cs[0].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cs[0].cmd.Wait()
	uid, err := p.Claim()
	if err != nil {
		t.Fatalf("claim after a holder died: %v", err)
	}
	if seen[uid] != 0 {
		t.Fatalf("got uid %d, not one of the dead claimer's", uid)
	}
	for _, u := range append(mine, uid) {
		p.Release(u)
	}
}

// TestPoolRotation: a released uid is the last to come back.
func TestPoolRotation(t *testing.T) {
	p := NewPool(t.TempDir(), testRange)
	a, err := p.Claim()
	if err != nil {
		t.Fatal(err)
	}
	p.Release(a)
	b, err := p.Claim()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release(b)
	if b == a {
		t.Fatalf("uid %d came back at once", a)
	}
	if !p.Holds(b) || p.Holds(a) {
		t.Fatalf("Holds: %d=%v %d=%v", a, p.Holds(a), b, p.Holds(b))
	}
}

func TestPrivateDirRefused(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := NewPool(dir, testRange).Claim(); err == nil {
		t.Fatal("claimed from a world-writable lock directory")
	}
}
