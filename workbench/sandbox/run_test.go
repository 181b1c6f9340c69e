package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentpen/agentpen/internal/testenv"
)

const python = "/usr/bin/python3"

func runPy(t *testing.T, uid int, dir, code string, lim Limits, timeout time.Duration) Result {
	t.Helper()
	res, err := Run(context.Background(), Command{
		Argv: []string{python, "-E", "-s", "-c", code}, Dir: dir, UID: uid,
		Env: []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}, Limits: lim, Timeout: timeout,
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

// TestRunIdentityAndLimits: the program runs as the uid, without groups
// or capabilities, in its own session, with exactly the limits.
func TestRunIdentityAndLimits(t *testing.T) {
	uid := claimUID(t)
	ws := uidDir(t, uid)
	code := `import os, resource
print(os.getuid(), os.geteuid(), os.getgid(), os.getegid(), os.getgroups())
print(os.getsid(0) == os.getpid(), os.getcwd())
for r in ("NPROC", "FSIZE", "NOFILE", "CPU", "AS"):
    print(r, *resource.getrlimit(getattr(resource, "RLIMIT_" + r)))
st = open("/proc/self/status").read()
print([l for l in st.splitlines() if l.startswith(("CapEff", "NoNewPrivs"))])
print(oct(os.umask(0)), sorted(os.environ))
`
	lim := Limits{Processes: 32, FileSize: 1 << 20, OpenFiles: 64, CPUSeconds: 5, AddressSpace: 512 << 20}
	res := runPy(t, uid, ws, code, lim, 10*time.Second)
	out := string(res.Stdout)
	for _, want := range []string{
		strings.Repeat(strconv.Itoa(uid)+" ", 4) + "[]",
		"True " + ws,
		"NPROC 32 32", "FSIZE 1048576 1048576", "NOFILE 64 64", "CPU 5 5", "AS 536870912 536870912",
		"CapEff:\\t0000000000000000", "NoNewPrivs:\\t1",
		"0o77 ['LANG', 'PATH']",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in:\n%s%s", want, out, res.Stderr)
		}
	}
}

// TestRunKillsEverything: a fork bomb and a setsid daemon leave no process
// once Run returns; a timeout is reported and kills too.
func TestRunKillsEverything(t *testing.T) {
	uid := claimUID(t)
	ws := uidDir(t, uid)
	bomb := `import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(1000)
for _ in range(200):
    try:
        if os.fork() == 0:
            while True:
                try: os.fork()
                except OSError: time.sleep(0.01)
    except OSError:
        break
print("done")
`
	res := runPy(t, uid, ws, bomb, Limits{Processes: 32}, 10*time.Second)
	if !strings.Contains(string(res.Stdout), "done") {
		t.Fatalf("stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	if pids, _ := Processes(uid); len(pids) > 0 {
		t.Fatalf("processes left: %v", pids)
	}
	// A program that never ends by itself: that Run returned at all is the
	// timeout's kill.
	res = runPy(t, uid, ws, "import time\nwhile True: time.sleep(1)", Limits{}, 500*time.Millisecond)
	if !res.TimedOut {
		t.Fatalf("a run without end returned, not timed out: %+v", res)
	}
	if pids, _ := Processes(uid); len(pids) > 0 {
		t.Fatalf("processes left after a timeout: %v", pids)
	}
}

// TestRunLaunchFailure: a uid that cannot enter the directory gets
// ErrLaunch (the child's chdir, after the credential switch, fails with
// EACCES), and the program never runs.
func TestRunLaunchFailure(t *testing.T) {
	uid := claimUID(t)
	res, err := Run(context.Background(), Command{Argv: []string{python, "-c", "print('ran')"}, Dir: "/root", UID: uid})
	if err == nil || !errors.Is(err, ErrLaunch) || !errors.Is(err, syscall.EACCES) || !strings.Contains(err.Error(), "/root") || len(res.Stdout) > 0 {
		t.Fatalf("err %v, want a chdir failure", err)
	}
}

func TestRunOutputCap(t *testing.T) {
	dir := t.TempDir()
	res, err := Run(context.Background(), Command{
		Argv: []string{python, "-c", "import sys; sys.stdout.write('x' * 3000000)"}, Dir: dir, UID: -1,
		OutputBytes: 1000, Timeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Stdout) != 1000 || res.StdoutDropped != 3000000-1000 {
		t.Fatalf("kept %d, dropped %d", len(res.Stdout), res.StdoutDropped)
	}
	_ = os.Remove(filepath.Join(dir, "x"))
}

// TestRunLeavesNoGoroutines: runs (with stdin, output, a timeout) leave
// no goroutine behind once they returned; the spawner's, started by the
// first run, is the only one that stays.
func TestRunLeavesNoGoroutines(t *testing.T) {
	dir := t.TempDir()
	run := func(code string, stdin []byte, timeout time.Duration) {
		t.Helper()
		if _, err := Run(context.Background(), Command{Argv: []string{python, "-c", code}, Dir: dir, UID: -1, Stdin: stdin, Timeout: timeout}); err != nil {
			t.Fatal(err)
		}
	}
	run("pass", nil, 10*time.Second) // starts the spawner
	before := runtime.NumGoroutine()
	for range 5 {
		run("import sys; print(sys.stdin.read())", []byte("in"), 10*time.Second)
		run("import time; time.sleep(5)", nil, 50*time.Millisecond)
	}
	testenv.WaitFor(t, "the runs' goroutines to end", func() bool {
		if runtime.NumGoroutine() <= before {
			return true
		}
		if d, ok := testenv.Deadline(t); ok && time.Until(d) < 50*time.Millisecond {
			buf := make([]byte, 1<<20)
			t.Logf("%d goroutines after the runs, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		return false
	})
}
