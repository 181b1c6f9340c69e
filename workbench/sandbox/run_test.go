package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

const python = "/usr/bin/python3"

func runPy(t *testing.T, ep *Episode, code string, lim Limits, timeout time.Duration) Result {
	t.Helper()
	res, err := ep.Run(context.Background(), Command{
		Argv: []string{python, "-E", "-s", "-c", code},
		Env:  []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}, Limits: lim, Timeout: timeout,
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

// sandboxedModes are the modes with a uid.
var sandboxedModes = []Mode{Namespaces, UIDOnly}

// TestRunIdentityAndLimits: the program runs as the uid, without groups
// or capabilities, in its own session and workspace, with exactly the
// limits.
func TestRunIdentityAndLimits(t *testing.T) {
	for _, mode := range sandboxedModes {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			ep := testEpisode(t, testSandbox(t, mode))
			uid := ep.UID()
			code := `import os, resource
print(os.getuid(), os.geteuid(), os.getgid(), os.getegid(), os.getgroups())
print(os.getsid(0) == os.getpid(), os.getcwd())
for r in ("NPROC", "FSIZE", "NOFILE", "CPU", "AS"):
    print(r, *resource.getrlimit(getattr(resource, "RLIMIT_" + r)))
st = open("/proc/self/status").read()
print([l for l in st.splitlines() if l.startswith(("CapEff", "CapPrm", "CapAmb", "NoNewPrivs"))])
print(oct(os.umask(0)), sorted(os.environ))
`
			lim := Limits{Processes: 32, FileSize: 1 << 20, OpenFiles: 64, CPUSeconds: 5, AddressSpace: 512 << 20}
			res := runPy(t, ep, code, lim, 10*time.Second)
			out := string(res.Stdout)
			for _, want := range []string{
				strings.Repeat(strconv.Itoa(uid)+" ", 4) + "[]",
				"True " + ep.CodeDir(),
				"NPROC 32 32", "FSIZE 1048576 1048576", "NOFILE 64 64", "CPU 5 5", "AS 536870912 536870912",
				"CapEff:\\t0000000000000000", "CapPrm:\\t0000000000000000", "CapAmb:\\t0000000000000000", "NoNewPrivs:\\t1",
				"0o77 ['LANG', 'PATH']",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("want %q in:\n%s%s", want, out, res.Stderr)
				}
			}
		})
	}
}

// forkBomb forks up to the process limit, and a setsid'd daemon.
const forkBomb = `import os, time
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

// TestRunKillsEverything: a fork bomb and a setsid daemon leave no process
// once Run returns; a timeout is reported and kills too.
func TestRunKillsEverything(t *testing.T) {
	for _, mode := range sandboxedModes {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			ep := testEpisode(t, testSandbox(t, mode))
			res := runPy(t, ep, forkBomb, Limits{Processes: 32}, 10*time.Second)
			if !strings.Contains(string(res.Stdout), "done") {
				t.Fatalf("stdout %q stderr %q", res.Stdout, res.Stderr)
			}
			// In namespaces nothing is left when Run returns; the uid-only
			// kill only guarantees none of them runs its code again.
			left := func() []int {
				if mode == Namespaces {
					pids, _ := Processes(ep.UID())
					return pids
				}
				pids, _ := gone(t, ep.UID())
				return pids
			}
			if pids := left(); len(pids) > 0 {
				t.Fatalf("processes left: %v", pids)
			}
			res = runPy(t, ep, "import time\nwhile True: time.sleep(1)", Limits{}, 500*time.Millisecond)
			if !res.TimedOut {
				t.Fatalf("not timed out: %+v", res)
			}
			if pids := left(); len(pids) > 0 {
				t.Fatalf("processes left after a timeout: %v", pids)
			}
		})
	}
}

// TestRunCancelledByContext: a cancelled context ends a namespaced run
// and all of its processes.
func TestRunCancelledByContext(t *testing.T) {
	t.Parallel()
	ep := testEpisode(t, testSandbox(t, Namespaces))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	res, err := ep.Run(ctx, Command{Argv: []string{python, "-c", "import os, time\nos.fork(); os.fork()\nprint('forked', flush=True)\ntime.sleep(100)"}})
	if err != nil || !res.TimedOut {
		t.Fatalf("err %v, result %+v", err, res)
	}
	if pids, _ := Processes(ep.UID()); len(pids) > 0 {
		t.Fatalf("processes left: %v", pids)
	}
}

// TestRunExitStatus: the exit status and the killing signal are the
// program's, not its launcher's.
func TestRunExitStatus(t *testing.T) {
	t.Parallel()
	for _, mode := range []Mode{Namespaces, UIDOnly, Unsandboxed} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			ep := testEpisode(t, testSandbox(t, mode))
			if res := runPy(t, ep, "import sys; sys.exit(3)", Limits{}, 10*time.Second); res.ExitCode != 3 {
				t.Errorf("exit code %d, want 3", res.ExitCode)
			}
			if res := runPy(t, ep, "import os, signal; os.kill(os.getpid(), signal.SIGTERM)", Limits{}, 10*time.Second); res.ExitCode != -int(syscall.SIGTERM) {
				t.Errorf("exit code %d, want -SIGTERM", res.ExitCode)
			}
		})
	}
}

// TestRunLaunchFailure: a program that cannot be executed is ErrLaunch
// with the errno, in namespaces too.
func TestRunLaunchFailure(t *testing.T) {
	t.Parallel()
	ep := testEpisode(t, testSandbox(t, Namespaces))
	res, err := ep.Run(context.Background(), Command{Argv: []string{"/nonexistent/python3"}, Timeout: 10 * time.Second})
	if !errors.Is(err, ErrLaunch) || !errors.Is(err, syscall.ENOENT) || !strings.Contains(err.Error(), "/nonexistent/python3") || len(res.Stdout) > 0 {
		t.Fatalf("err %v, want an exec failure", err)
	}
}

func TestRunOutputCap(t *testing.T) {
	t.Parallel()
	ep := testEpisode(t, testSandbox(t, Unsandboxed))
	res, err := ep.Run(context.Background(), Command{
		Argv:        []string{python, "-c", "import sys; sys.stdout.write('x' * 3000000)"},
		OutputBytes: 1000, Timeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Stdout) != 1000 || res.StdoutDropped != 3000000-1000 {
		t.Fatalf("kept %d, dropped %d", len(res.Stdout), res.StdoutDropped)
	}
}

// TestRunLeavesNoGoroutines: runs (with stdin, output, a timeout) leave
// no goroutine behind once they returned.
func TestRunLeavesNoGoroutines(t *testing.T) {
	ep := testEpisode(t, testSandbox(t, Namespaces))
	run := func(code string, stdin []byte, timeout time.Duration) {
		t.Helper()
		if _, err := ep.Run(context.Background(), Command{Argv: []string{python, "-c", code}, Stdin: stdin, Timeout: timeout}); err != nil {
			t.Fatal(err)
		}
	}
	run("pass", nil, 10*time.Second)
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

// isolationProbe prints what an episode's code can see of its namespaces.
const isolationProbe = `import os, socket, sys
print("pidns", os.readlink("/proc/self/ns/pid"))
print("netns", os.readlink("/proc/self/ns/net"))
print("ipcns", os.readlink("/proc/self/ns/ipc"))
print("mntns", os.readlink("/proc/self/ns/mnt"))
print("pid", os.getpid())
print("ifs", ",".join(n for _, n in socket.if_nameindex()))
try:
    socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
    print("vsock open")
except OSError as e:
    print("vsock", e.errno)
for p in ("/etc/agentpen-probe", "/var/tmp/agentpen-probe", os.path.dirname(os.getcwd()) + "/agentpen-probe"):
    try:
        open(p, "w")
        print("wrote", p)
    except OSError as e:
        print("write", e.errno)
open("/tmp/mark-" + sys.argv[1], "w").write("x")
open("/dev/shm/mark-" + sys.argv[1], "w").write("x")
print("tmp", sorted(os.listdir("/tmp")), sorted(os.listdir("/dev/shm")))
`

func probeNS(t *testing.T, ep *Episode, tag string) map[string]string {
	t.Helper()
	res, err := ep.Run(context.Background(), Command{Argv: []string{python, "-E", "-s", "-c", isolationProbe, tag}, Timeout: 20 * time.Second})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("probe: %v %+v %s", err, res, res.Stderr)
	}
	out := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
		k, v, _ := strings.Cut(l, " ")
		out[k] += v
	}
	return out
}

func selfNS(t *testing.T, kind string) string {
	t.Helper()
	l, err := os.Readlink("/proc/self/ns/" + kind)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestNamespacesIsolate: episode code runs in PID, network, IPC and mount
// namespaces other than the server's, as pid 2 under its launcher's init;
// it has only a loopback interface and no vsock; the rest of the file
// system is read-only; and /tmp and /dev/shm are the episode's own,
// shared by its runs but not with another episode.
func TestNamespacesIsolate(t *testing.T) {
	t.Parallel()
	sb := testSandbox(t, Namespaces)
	a, b := testEpisode(t, sb), testEpisode(t, sb)
	first, second, other := probeNS(t, a, "a1"), probeNS(t, a, "a2"), probeNS(t, b, "b1")
	for _, kind := range []string{"pid", "net", "ipc", "mnt"} {
		if mine := selfNS(t, kind); first[kind+"ns"] == mine || first[kind+"ns"] == "" {
			t.Errorf("%s namespace: the episode's %q, the server's %q", kind, first[kind+"ns"], mine)
		}
	}
	if first["netns"] != second["netns"] || first["netns"] == other["netns"] || first["mntns"] != second["mntns"] {
		t.Errorf("network and mount namespaces: the episode's runs %q %q %q %q, another episode %q", first["netns"], second["netns"], first["mntns"], second["mntns"], other["netns"])
	}
	// (PID and IPC namespaces are the run's: gone when it ends, their
	// inode numbers may come back for a later run.)
	want := map[string]string{
		"pid":   "2",
		"ifs":   "lo",
		"vsock": fmt.Sprint(int(syscall.EAFNOSUPPORT)),
		"write": fmt.Sprint(int(syscall.EROFS)) + fmt.Sprint(int(syscall.EROFS)) + fmt.Sprint(int(syscall.EROFS)),
	}
	for k, v := range want {
		if first[k] != v {
			t.Errorf("%s: %q, want %q (%v)", k, first[k], v, first)
		}
	}
	if first["tmp"] != "['mark-a1'] ['mark-a1']" || second["tmp"] != "['mark-a1', 'mark-a2'] ['mark-a1', 'mark-a2']" || other["tmp"] != "['mark-b1'] ['mark-b1']" {
		t.Errorf("/tmp and /dev/shm: %q, %q, another episode %q", first["tmp"], second["tmp"], other["tmp"])
	}
	// Agent code takes every permission away from them: ClearScratch
	// empties them all the same.
	if res := runPy(t, a, "import os\nos.chmod('/tmp', 0)\nos.chmod('/dev/shm', 0)", Limits{}, 10*time.Second); res.ExitCode != 0 {
		t.Fatalf("chmod: %+v", res)
	}
	if err := a.ClearScratch(); err != nil {
		t.Fatal(err)
	}
	if after := probeNS(t, a, "a3"); after["tmp"] != "['mark-a3'] ['mark-a3']" {
		t.Errorf("after ClearScratch: %q", after["tmp"])
	}
}

// TestSysVIPCRefused: a run's System V IPC calls are refused (a run's
// own IPC namespace has the kernel's unbounded defaults), in every mode.
func TestSysVIPCRefused(t *testing.T) {
	t.Parallel()
	for _, mode := range []Mode{Namespaces, Unsandboxed} {
		t.Run(mode.String(), func(t *testing.T) {
			ep := testEpisode(t, testSandbox(t, mode))
			code := `import ctypes
libc = ctypes.CDLL(None, use_errno=True)
for name, call in (("msg", lambda: libc.msgget(0, 0o1600)), ("shm", lambda: libc.shmget(0, 4096, 0o1600)), ("sem", lambda: libc.semget(0, 1, 0o1600))):
    print(name, call(), ctypes.get_errno())
`
			out := strings.TrimSpace(string(runPy(t, ep, code, Limits{}, 10*time.Second).Stdout))
			want := fmt.Sprintf("msg -1 %[1]d\nshm -1 %[1]d\nsem -1 %[1]d", int(syscall.EPERM))
			if out != want {
				t.Fatalf("got %q, want %q", out, want)
			}
		})
	}
}

// TestNamespacesFullTmpfs: an episode that fills its tmpfs gets ENOSPC,
// and neither the uid locks nor another episode are affected; closing it
// gives the space back.
func TestNamespacesFullTmpfs(t *testing.T) {
	t.Parallel()
	sb := testSandbox(t, Namespaces)
	ep := testEpisode(t, sb)
	code := `import os, errno
n = 0
for d in (".", "/tmp", "/dev/shm"):
    for i in range(100):
        try:
            with open(os.path.join(d, "fill%d" % i), "wb") as f:
                f.write(b"x" * (16 << 20))
            n += 1
        except OSError as e:
            print("stopped", errno.errorcode[e.errno])
            break
print("files", n)
`
	res := runPy(t, ep, code, Limits{}, 60*time.Second)
	out := string(res.Stdout)
	if !strings.Contains(out, "stopped ENOSPC") {
		t.Fatalf("the tmpfs did not fill: %s %s", out, res.Stderr)
	}
	var files int
	fmt.Sscanf(out[strings.Index(out, "files ")+len("files "):], "%d", &files)
	if max := int(sb.Config().EpisodeBytes / (16 << 20)); files > max {
		t.Fatalf("%d files of 16 MiB in a tmpfs of %d bytes", files, sb.Config().EpisodeBytes)
	}
	// The server's own state is elsewhere: another episode starts and
	// runs, and claims (writes to the lock directory) work.
	next := testEpisode(t, sb)
	if res := runPy(t, next, "print('ok')", Limits{}, 10*time.Second); strings.TrimSpace(string(res.Stdout)) != "ok" {
		t.Fatalf("another episode: %+v", res)
	}
}

// printForever prints without end from two processes, on both streams:
// only the output limit (or the timeout) ends it.
const printForever = `import os, sys
os.fork()
line = "z" * 4095 + "\n"
while True:
    sys.stdout.write(line)
    sys.stderr.write(line)
`

// TestRunOutputLimit: a run that prints past Command.OutputLimit is ended
// for it, long before its timeout, with every process of it, spawned
// (in each mode) and forked; what it printed is kept and counted as
// before; a run that prints less, or one without a limit, is not ended.
func TestRunOutputLimit(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	// check: the run was ended at the limit, and nothing of uid is left
	// (uid < 0: not looked for). In namespaces nothing is left when Run
	// returns; the uid-only kill only guarantees none of them runs its
	// code again, so their exits are waited for (TestRunKillsEverything).
	check := func(t *testing.T, res Result, err error, uid int, mode Mode) {
		t.Helper()
		printed := int64(len(res.Stdout)+len(res.Stderr)) + res.StdoutDropped + res.StderrDropped
		if err != nil || !res.OutputLimited || res.TimedOut || printed <= limit || len(res.Stdout) != 1000 {
			t.Fatalf("err %v; output limited %v, timed out %v, printed %d (limit %d), kept %d", err, res.OutputLimited, res.TimedOut, printed, limit, len(res.Stdout))
		}
		if uid < 0 {
			return
		}
		pids, _ := Processes(uid)
		if mode != Namespaces {
			pids, _ = gone(t, uid)
		}
		if len(pids) > 0 {
			t.Fatalf("processes left: %v", pids)
		}
	}
	for _, mode := range []Mode{Namespaces, UIDOnly, Unsandboxed} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			ep := testEpisode(t, testSandbox(t, mode))
			res, err := ep.Run(context.Background(), Command{
				Argv: []string{python, "-c", printForever}, OutputBytes: 1000, OutputLimit: limit, Timeout: 60 * time.Second,
			})
			check(t, res, err, ep.UID(), mode)
		})
	}
	t.Run("forked", func(t *testing.T) {
		t.Parallel()
		f := newForkEnv(t)
		f.write(t, ".run.py", printForever)
		c := f.command(nil)
		c.OutputBytes, c.OutputLimit, c.Timeout = 1000, limit, 60*time.Second
		res := f.fork(t, c)
		check(t, res, nil, -1, Namespaces)
		if pids := f.runProcesses(t); len(pids) > 0 {
			t.Fatalf("processes of the run left: %v", pids)
		}
	})
	t.Run("under", func(t *testing.T) {
		t.Parallel()
		ep := testEpisode(t, testSandbox(t, Unsandboxed))
		for _, lim := range []int64{limit, -1} {
			res, err := ep.Run(context.Background(), Command{
				Argv: []string{python, "-c", "import sys; sys.stdout.write('x' * (3 << 20))"}, OutputBytes: 1000, OutputLimit: lim * 4, Timeout: 60 * time.Second,
			})
			if err != nil || res.OutputLimited || res.ExitCode != 0 || res.StdoutDropped != 3<<20-1000 {
				t.Fatalf("limit %d: err %v, %+v", lim*4, err, res)
			}
		}
	})
}
