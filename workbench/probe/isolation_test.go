package probe

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/workbench/sandbox"
)

func TestInterfaces(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"lo", "eth0"} {
		os.Mkdir(filepath.Join(dir, n), 0o755)
	}
	got, err := Interfaces(dir)
	if err != nil || !slices.Equal(got, []string{"eth0", "lo"}) {
		t.Fatalf("Interfaces = %v, %v", got, err)
	}
	if _, err := Interfaces(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("a missing directory listed nothing without an error")
	}
}

// TestFindUIDBlock reads the block of the listening process from a fake
// /proc (its environment: the two variables and nothing else) and checks
// it against the range the server recorded and the uids it handed out.
func TestFindUIDBlock(t *testing.T) {
	proc := t.TempDir()
	pid := "42"
	os.MkdirAll(filepath.Join(proc, pid, "fd"), 0o755)
	os.MkdirAll(filepath.Join(proc, "net"), 0o755)
	os.WriteFile(filepath.Join(proc, "net", "unix"), []byte("Num RefCount Protocol Flags Type St Inode Path\n0000: 00000002 00000000 00010000 0001 01 777 /run/workbench/wb.sock\n"), 0o644)
	os.Symlink("socket:[777]", filepath.Join(proc, pid, "fd", "3"))
	os.WriteFile(filepath.Join(proc, pid, "cmdline"), []byte("workbench\x00serve\x00"), 0o644)
	os.WriteFile(filepath.Join(proc, pid, "status"), []byte("Uid:\t0\t0\t0\t0\nCapEff:\t0\nCapBnd:\t0\nNoNewPrivs:\t1\nSeccomp:\t2\n"), 0o644)
	locks := filepath.Join(proc, pid, "root", sandbox.DefaultLockDir)
	os.MkdirAll(locks, 0o700)
	write := func(env string) {
		os.WriteFile(filepath.Join(proc, pid, "environ"), []byte(env), 0o644)
	}
	record := func(r string) { os.WriteFile(filepath.Join(locks, sandbox.RangeFileName), []byte(r), 0o600) }
	const good = "AGENTPEN_API_KEY=secret\x00WORKBENCH_UID_BASE=20064\x00WORKBENCH_UID_COUNT=64\x00"
	write(good)
	record("20064-20127\n")
	os.WriteFile(filepath.Join(locks, "20064"), nil, 0o600)
	os.WriteFile(filepath.Join(locks, "20126"), nil, 0o600)
	base, count, err := findUIDBlock(proc, "unix:/run/workbench/wb.sock", 1)
	if err != nil || base != 20064 || count != 64 {
		t.Fatalf("findUIDBlock = %d %d %v", base, count, err)
	}
	for _, env := range []string{"WORKBENCH_UID_BASE=20064\x00", "WORKBENCH_UID_BASE=x\x00WORKBENCH_UID_COUNT=64\x00"} {
		write(env)
		if _, _, err := findUIDBlock(proc, "unix:/run/workbench/wb.sock", 1); err == nil {
			t.Fatalf("environment %q accepted", env)
		}
	}
	write(good)
	// A server that ignored its environment: it recorded the default
	// range, or nothing, or handed out a uid outside the block.
	for _, c := range []struct {
		name, recorded, lock, want string
	}{
		{"default_range", "20000-21024", "", "runs episodes under uids 20000-21024"},
		{"none", "", "", "recorded no uid range"},
		{"garbage", "20064", "", "want base-last"},
		{"uid_outside", "20064-20127", "20000", "handed out uid 20000"},
		{"killer_handed_out", "20064-20127", "20127", "handed out uid 20127"},
	} {
		t.Run(c.name, func(t *testing.T) {
			os.Remove(filepath.Join(locks, sandbox.RangeFileName))
			if c.recorded != "" {
				record(c.recorded)
			}
			if c.lock != "" {
				os.WriteFile(filepath.Join(locks, c.lock), nil, 0o600)
				defer os.Remove(filepath.Join(locks, c.lock))
			}
			_, _, err := findUIDBlock(proc, "unix:/run/workbench/wb.sock", 1)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("findUIDBlock: %v, want an error with %q", err, c.want)
			}
		})
	}
}

// TestFindUIDBlockInOwnContainer: a cluster's probe (SelfNS) reads the
// block from its own environment (the container's, which pods/exec
// gives it) and the range from its own file system, and judges them as
// the serving process's: the same block passes, a recorded range that
// is not the environment's fails, as does a missing variable.
func TestFindUIDBlockInOwnContainer(t *testing.T) {
	root := t.TempDir()
	locks := filepath.Join(root, sandbox.DefaultLockDir)
	os.MkdirAll(locks, 0o700)
	const env = "WORKBENCH_UID_BASE=20064\x00WORKBENCH_UID_COUNT=64"
	os.WriteFile(filepath.Join(locks, sandbox.RangeFileName), []byte("20064-20127\n"), 0o600)
	if base, count, err := findUIDBlockIn(root, "self", []byte(env)); err != nil || base != 20064 || count != 64 {
		t.Fatalf("findUIDBlockIn = %d %d %v", base, count, err)
	}
	if _, _, err := findUIDBlockIn(root, "self", []byte("WORKBENCH_UID_BASE=20064")); err == nil || !strings.Contains(err.Error(), "self has no WORKBENCH_UID_COUNT") {
		t.Fatalf("without the count: %v", err)
	}
	os.WriteFile(filepath.Join(locks, sandbox.RangeFileName), []byte("20000-21023\n"), 0o600)
	if _, _, err := findUIDBlockIn(root, "self", []byte(env)); err == nil || !strings.Contains(err.Error(), "runs episodes under uids 20000-21023") {
		t.Fatalf("another recorded range: %v", err)
	}
}

// TestDialAsUID: a unix socket in a root-only directory is reachable by
// root and denied to another uid, even to a caller with every capability.
func TestDialAsUID(t *testing.T) {
	testenv.RequireRoot(t)
	dir := filepath.Join(t.TempDir(), "grader")
	os.Mkdir(dir, 0o700)
	sock := filepath.Join(dir, "grader.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	// MaxTimeout on every dial: each is meant to connect or be denied,
	// and load must not turn one into a timeout.
	if o, e := dialAs(t.Context(), "unix", sock, MaxTimeout, 0); o != OutcomeConnected {
		t.Fatalf("root: %s %s", o, e)
	}
	// A uid of the shared pool, held for the test: a fixed one (20063)
	// was an episode's uid in another test package, whose hostile test
	// then found this process among its uid's.
	pool := sandbox.NewPool(sandbox.DefaultLockDir, sandbox.DefaultRange)
	uid, err := pool.Claim()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Release(uid) })
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			if o, e := dialAs(t.Context(), "unix", sock, MaxTimeout, uid); o != OutcomeDenied {
				t.Errorf("uid %d: %s %s, want denied", uid, o, e)
			}
		})
	}
	wg.Wait()
	// The switched threads served only their dials and end with them:
	// root still connects, and soon no thread of this process has the
	// uid's ids. Soon: a dial's goroutine has returned before its locked
	// thread is torn down, and on a loaded machine that takes a while; a
	// thread that kept the ids and lives on fails at the test's deadline.
	if o, _ := dialAs(t.Context(), "unix", sock, MaxTimeout, 0); o != OutcomeConnected {
		t.Fatalf("root after a switched dial: %s", o)
	}
	var kept []string
	testenv.Until(t, func() bool {
		kept = threadsWithIDs(t, uid)
		return len(kept) == 0
	})
	for _, k := range kept {
		t.Errorf("a thread kept the sandbox uid's ids after its dial: %s", k)
	}
}

// threadsWithIDs lists the threads of this process whose uids or gids
// include id, as "thread TID: Uid: ..." lines.
func threadsWithIDs(t *testing.T, id int) []string {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc/self/task", task.Name(), "status"))
		if err != nil {
			continue // ended meanwhile
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) == 5 && (f[0] == "Uid:" || f[0] == "Gid:") && slices.Contains(f[1:], strconv.Itoa(id)) {
				out = append(out, "thread "+task.Name()+": "+line)
			}
		}
	}
	return out
}

// TestSuffixDigest: the digest of a process's last n arguments is
// ArgvDigest of those, and nothing when it has fewer; a batch asking for
// a negative or huge count is refused before anything runs.
func TestSuffixDigest(t *testing.T) {
	n := min(2, len(os.Args))
	if got, want := SuffixDigest(os.Getpid(), n), ArgvDigest(os.Args[len(os.Args)-n:]); got != want {
		t.Fatalf("SuffixDigest(self, %d) = %s, want %s", n, got, want)
	}
	if got := SuffixDigest(os.Getpid(), len(os.Args)+1); got != "" {
		t.Fatalf("more arguments than the process has: %q", got)
	}
	for _, bad := range []int{-1, maxArgvSuffix + 1} {
		b := Batch{Probes: []Request{{ID: "p", Kind: KindProcess, ArgvSuffix: bad}}}
		if err := Validate(b); !errors.Is(err, ErrInvalid) {
			t.Errorf("argv_suffix %d: %v, want ErrInvalid", bad, err)
		}
	}
	if err := Validate(Batch{Probes: []Request{{ID: "t", Kind: KindTCP, Addr: "127.0.0.1:1", ArgvSuffix: 1}}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("argv_suffix on a tcp probe: %v, want ErrInvalid", err)
	}
}
