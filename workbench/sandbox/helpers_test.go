package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"golang.org/x/sys/unix"
)

// helperEnv selects a helper process mode of the test binary (see
// runHelperIfRequested).
const helperEnv = "SANDBOX_TEST_HELPER"

// runHelperIfRequested turns the test binary into a helper process when
// helperEnv says so:
//
//	claim: claim SANDBOX_TEST_CLAIMS uids from SANDBOX_TEST_LOCKDIR, print
//	each, print "ready", and hold them until stdin closes.
//	hopkill: see hopKill.
func runHelperIfRequested() {
	switch os.Getenv(helperEnv) {
	case "":
		return
	case "claim":
		n, _ := strconv.Atoi(os.Getenv("SANDBOX_TEST_CLAIMS"))
		p := NewPool(os.Getenv("SANDBOX_TEST_LOCKDIR"), testRange)
		w := bufio.NewWriter(os.Stdout)
		for range n {
			uid, err := p.Claim()
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			fmt.Fprintln(w, uid)
		}
		fmt.Fprintln(w, "ready")
		w.Flush()
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	case "hopkill":
		hopKill()
	}
	fmt.Fprintln(os.Stderr, "unknown helper", os.Getenv(helperEnv))
	os.Exit(2)
}

// testRange is the range the tests' uids come from.
var testRange = DefaultRange

// testPool is the tests' pool of the machine's shared lock directory: the
// tests of other packages running beside these claim from it too.
var testPool = sync.OnceValue(func() *Pool { return NewPool(DefaultLockDir, testRange) })

// testSandbox returns a sandbox of mode for the test, with the default
// directories (shared, through the locks, with every other test).
func testSandbox(t testing.TB, mode Mode) *Sandbox {
	t.Helper()
	if mode != Unsandboxed {
		testenv.RequireRoot(t)
	}
	sb, err := New(Config{Mode: mode})
	if err != nil {
		t.Fatalf("sandbox: %v", err)
	}
	return sb
}

// testEpisode starts an episode of sb, closed when the test ends.
func testEpisode(t testing.TB, sb *Sandbox) *Episode {
	t.Helper()
	ep, err := sb.NewEpisode()
	if err != nil {
		t.Fatalf("episode: %v", err)
	}
	t.Cleanup(func() {
		if err := ep.Close(); err != nil {
			t.Errorf("close episode: %v", err)
		}
	})
	return ep
}

// claimUID claims a uid from the machine's shared pool for the test and
// releases it, with every process of it killed, when the test ends.
func claimUID(t *testing.T) int {
	t.Helper()
	testenv.RequireRoot(t)
	p := testPool()
	uid, err := p.Claim()
	if err != nil {
		t.Fatalf("claim uid: %v", err)
	}
	t.Cleanup(func() {
		if err := KillAllOfUID(testRange, uid); err != nil {
			t.Errorf("kill uid %d: %v", uid, err)
		}
		p.Release(uid)
	})
	if err := KillAllOfUID(testRange, uid); err != nil {
		t.Fatal(err)
	}
	return uid
}

// uidDir makes a 0700 directory owned by uid inside a root-owned 0711
// directory, as an episode's workspace, and removes both at the end.
func uidDir(t *testing.T, uid int) string {
	t.Helper()
	home, err := os.MkdirTemp("", "sbx-home-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// As the episode does: emptied as the uid, then rmdir in
		// directories root owns (root may lack DAC_OVERRIDE, as in a
		// workspace container, and cannot look inside the uid's 0700 dir).
		ws := filepath.Join(home, "ws")
		if err := AsUID(uid, func() error { return EmptyDir(ws) }); err != nil {
			t.Errorf("empty %s: %v", ws, err)
		}
		if err := unix.Rmdir(ws); err != nil && !errors.Is(err, unix.ENOENT) {
			t.Errorf("remove %s: %v", ws, err)
		}
		if err := unix.Rmdir(home); err != nil {
			t.Errorf("remove %s: %v", home, err)
		}
	})
	if err := os.Chmod(home, 0o711); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(home, "ws")
	if err := unix.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(ws, uid, uid); err != nil {
		t.Fatal(err)
	}
	return ws
}

// productionCaps returns the command prefix that runs a helper with only
// the four production capabilities (CapEff e1): setpriv shrinking the
// bounding set, or nothing when this process already has exactly those
// (a workspace container, where setpriv could not shrink it without
// CAP_SETPCAP).
func productionCaps(t *testing.T) []string {
	t.Helper()
	status, _ := os.ReadFile("/proc/self/status")
	if capEffLine(string(status)) == "CapEff:\t00000000000000e1" {
		return nil
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatalf("setpriv (util-linux) is needed to drop capabilities: %v", err)
	}
	return []string{setpriv, "--bounding-set=-all,+setuid,+setgid,+chown,+kill", "--"}
}

// capEffLine returns the CapEff line of a /proc status.
func capEffLine(status string) string {
	for _, l := range strings.Split(status, "\n") {
		if strings.HasPrefix(l, "CapEff:") {
			return l
		}
	}
	return ""
}
