package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// forkEnv is an episode with a fork server and one of its servers.
type forkEnv struct {
	ep  *Episode
	fs  *ForkServer
	k   *Forker
	env []string
}

var forkTestEnv = []string{"PATH=/usr/bin:/bin", "HOME=" + DefaultWorkspaceDir, "LANG=C.UTF-8"}

func newForkEnv(t *testing.T, preload ...string) *forkEnv {
	t.Helper()
	return newForkEnvWith(t, ForkServerConfig{Python: python, Env: forkTestEnv, Preload: preload}, "")
}

// newForkEnvWith starts a fork server of cfg running program (empty: the
// fork server's).
func newForkEnvWith(t *testing.T, cfg ForkServerConfig, program string) *forkEnv {
	t.Helper()
	ep := testEpisode(t, testSandbox(t, Namespaces))
	fs := newForkServer(ep, cfg, program)
	if program == "" && !fs.WaitReady(context.Background()) {
		t.Fatalf("fork server not ready: %v", fs.Err())
	}
	if err := fs.Err(); err != nil {
		t.Fatalf("fork server: %v", err)
	}
	return &forkEnv{ep: ep, fs: fs, k: fs.Forker(), env: forkTestEnv}
}

// write writes a file of the workspace as the uid.
func (f *forkEnv) write(t *testing.T, name, content string) {
	t.Helper()
	err := AsUID(f.ep.UID(), func() error {
		return os.WriteFile(filepath.Join(f.ep.Dir(), name), []byte(content), 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (f *forkEnv) read(t *testing.T, name string) string {
	t.Helper()
	var b []byte
	err := AsUID(f.ep.UID(), func() (err error) {
		b, err = os.ReadFile(filepath.Join(f.ep.Dir(), name))
		return err
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return string(b)
}

// command is `python3 -E -s <flags> .run.py` as the episode runs it.
func (f *forkEnv) command(stdin []byte, flags ...string) Command {
	argv := append(append([]string{python, "-E", "-s"}, flags...), ".run.py")
	return Command{Argv: argv, Env: f.env, Stdin: stdin, Timeout: 20 * time.Second}
}

// fork runs .run.py through the server and fails unless the server ran it.
func (f *forkEnv) fork(t *testing.T, c Command) Result {
	t.Helper()
	before := f.fs.Forked()
	res, err := f.k.Run(context.Background(), c)
	if err != nil {
		t.Fatalf("forked run: %v", err)
	}
	if f.fs.Forked() != before+1 {
		t.Fatalf("the run was spawned, not forked (server: %v)", f.fs.Err())
	}
	return res
}

func (f *forkEnv) spawn(t *testing.T, c Command) Result {
	t.Helper()
	res, err := f.ep.Run(context.Background(), c)
	if err != nil {
		t.Fatalf("spawned run: %v", err)
	}
	return res
}

// identity prints what a run can see of how it was started.
const identity = `import gc, os, resource, signal, sys, threading
print(os.getuid(), os.geteuid(), os.getgid(), os.getegid(), os.getgroups(), os.getpid(), os.getppid(), os.getpgrp(), os.getsid(0))
print(os.getcwd(), oct(os.umask(0o77)), sorted(os.environ.items()))
for r in ("FSIZE", "NOFILE", "CPU", "AS", "MSGQUEUE"):
    print(r, resource.getrlimit(getattr(resource, "RLIMIT_" + r)))
print(sys.argv, sys.orig_argv, sys.path, sys.executable, sys.flags, sys.dont_write_bytecode, sys.getrecursionlimit())
print(__name__, __file__, __doc__, __package__, __spec__, __cached__, type(__loader__).__name__, __loader__.name, __loader__.path)
print(sorted(k for k in globals() if k not in ("gc", "os", "resource", "signal", "sys", "threading", "r")))
print(sorted(sys.modules))
for s in (sys.stdin, sys.stdout, sys.stderr, sys.__stdout__):
    print(s.name, s.mode, s.encoding, s.errors, s.line_buffering, s.write_through, s.isatty(), type(s.buffer).__name__, s.buffer.raw.name, s.newlines)
print(sys.stdout is sys.__stdout__, sys.stdin is sys.__stdin__, sys.stderr is sys.__stderr__)
print([(int(s), str(signal.getsignal(s))) for s in signal.valid_signals() if s not in (signal.SIGKILL, signal.SIGSTOP)])
print(signal.pthread_sigmask(signal.SIG_BLOCK, []), sorted(os.listdir("/proc/self/fd")), threading.active_count())
print(gc.isenabled(), gc.get_threshold(), sys.getswitchinterval(), sys.getdefaultencoding(), sys.excepthook is sys.__excepthook__)
print([l for l in open("/proc/self/status").read().splitlines() if l.startswith(("Cap", "NoNewPrivs", "Seccomp:", "Uid", "Gid", "Groups", "Threads"))])
import warnings; warnings.warn("a warning")
`

// TestForkServerRunsAsSpawned: what a script sees and does is the same,
// byte for byte, when the fork server runs it as when it is spawned: its
// identity, limits, interpreter state, output, tracebacks, exit status,
// standard input, files left open, atexit functions, threads and
// children. The known differences are normalized and listed.
func TestForkServerRunsAsSpawned(t *testing.T) {
	t.Parallel()
	f := newForkEnv(t) // nothing preloaded: sys.modules must match too
	cases := []struct {
		name, code string
		stdin      []byte
		flags      []string
		file       string // a file the run writes, compared too
	}{
		{name: "identity", code: identity},
		{name: "identity_B", code: identity, flags: []string{"-B"}},
		{name: "exception", code: "def f():\n    return 1/0\nprint('before')\nf()\n"},
		{name: "chained", code: "try:\n    {}['k']\nexcept KeyError as e:\n    raise ValueError('v') from e\n"},
		{name: "syntax_error", code: "x = (\n"},
		{name: "exit_string", code: "import sys; print('x'); sys.exit('bye')"},
		{name: "exit_int", code: "raise SystemExit(3)"},
		{name: "exit_true", code: "raise SystemExit(True)"},
		{name: "exit_none", code: "import sys; sys.exit()"},
		{name: "keyboard_interrupt", code: "print('x', flush=True)\nraise KeyboardInterrupt"},
		{name: "stdin", code: "import sys; data = sys.stdin.read(); print(len(data), data[:10]); print(input.__name__)", stdin: []byte("hello\nworld\n")},
		{name: "input_eof", code: "input()"},
		{name: "unclosed_file", code: "f = open('out.txt', 'w'); f.write('kept')", file: "out.txt"},
		{name: "atexit_and_threads", code: "import atexit, threading, time\natexit.register(print, 'atexit')\nthreading.Thread(target=lambda: (time.sleep(0.2), print('thread', flush=True))).start()\nprint('main', flush=True)\n"},
		{name: "unflushed", code: "import sys; sys.stdout.write('x' * 100000); sys.stderr.write('e')"},
		{name: "child", code: "import os\nif os.fork() == 0:\n    print('child', os.getpid(), flush=True)\nelse:\n    os.wait(); print('parent', os.getpid())\n"},
		{name: "nul_bytes", code: "print(1)\x00print(2)\n"},
		{name: "main_module", code: "import __main__, sys, pickle\ndef g(): pass\nprint(__main__.__file__, sys.modules['__main__'] is __main__, pickle.loads(pickle.dumps(g)) is g)"},
		{name: "recursion", code: "import sys\ndef f(n):\n    try:\n        return f(n + 1)\n    except RecursionError:\n        return n\nprint(f(0) > 900)"},
		{name: "del_builtins", code: "import builtins; del builtins.print; print('x')"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f.write(t, ".run.py", c.code)
			cmd := f.command(c.stdin, c.flags...)
			if c.file != "" {
				f.write(t, c.file, "")
			}
			spawned := f.spawn(t, cmd)
			var spawnedFile string
			if c.file != "" {
				spawnedFile = f.read(t, c.file)
				f.write(t, c.file, "")
			}
			forked := f.fork(t, cmd)
			norm := func(b []byte) string { return normalizeRun(string(b)) }
			if norm(spawned.Stdout) != norm(forked.Stdout) || norm(spawned.Stderr) != norm(forked.Stderr) || spawned.ExitCode != forked.ExitCode {
				t.Errorf("spawned and forked runs differ:\nspawned exit %d\n%s\n%s\nforked exit %d\n%s\n%s",
					spawned.ExitCode, spawned.Stdout, spawned.Stderr, forked.ExitCode, forked.Stdout, forked.Stderr)
			}
			if c.file != "" {
				if got := f.read(t, c.file); got != spawnedFile || got == "" {
					t.Errorf("%s: spawned %q, forked %q", c.file, spawnedFile, got)
				}
			}
		})
	}
}

// normalizeRun removes what differs between runs of one script whichever
// way it runs: object addresses and a child's pid.
func normalizeRun(s string) string {
	s = regexp.MustCompile(`0x[0-9a-f]+`).ReplaceAllString(s, "0x?")
	return regexp.MustCompile(`child \d+`).ReplaceAllString(s, "child ?")
}

// TestForkServerRunLimits: a forked run has the episode's limits; its
// RLIMIT_NPROC is Processes plus the server's processes always counted
// with it (runParents), and it can start no more than Processes.
func TestForkServerRunLimits(t *testing.T) {
	t.Parallel()
	lims := Limits{Processes: 12}
	f := newForkEnvWith(t, ForkServerConfig{Python: python, Env: forkTestEnv, Limits: lims}, "")
	f.write(t, ".run.py", `import os, resource, time
print(resource.getrlimit(resource.RLIMIT_NPROC))
n = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(100)
        n += 1
except OSError as e:
    print("forked", n, e.errno)
`)
	cmd := f.command(nil)
	cmd.Limits = lims
	spawned, forked := f.spawn(t, cmd), f.fork(t, cmd)
	if !strings.Contains(string(forked.Stdout), fmt.Sprintf("(%d, %d)", 12+runParents, 12+runParents)) {
		t.Errorf("forked RLIMIT_NPROC: %s", forked.Stdout)
	}
	count := func(out []byte) int {
		_, rest, _ := strings.Cut(string(out), "forked ")
		n, _ := strconv.Atoi(strings.Fields(rest + " x")[0])
		return n
	}
	// A forked run starts at most Processes - 1 (itself the last), fewer
	// by the next run's child, init and program when they are made
	// beside it already; a spawned one no more, since the server's
	// processes are the uid's too.
	if s, k := count(spawned.Stdout), count(forked.Stdout); k > lims.Processes-1 || k < lims.Processes-1-3 || s > lims.Processes-1 {
		t.Errorf("a spawned run started %d processes, a forked one %d; want %d-%d forked, no more spawned", s, k, lims.Processes-4, lims.Processes-1)
	}
	if pids := f.runProcesses(t); len(pids) > 0 {
		t.Errorf("processes of the run left: %v", pids)
	}
}

// runProcesses are the episode uid's processes that are not the fork
// server's: a run's.
func (f *forkEnv) runProcesses(t *testing.T) []int {
	t.Helper()
	pids, err := f.fs.RunProcesses()
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		t.Logf("left: %s", describe(pid))
	}
	return pids
}

// describe says what a process is, for a failure.
func describe(pid int) string {
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	var b strings.Builder
	fmt.Fprintf(&b, "pid %d:", pid)
	for _, l := range strings.Split(string(status), "\n") {
		if f := strings.Fields(l); len(f) > 1 && (f[0] == "Name:" || f[0] == "State:" || f[0] == "PPid:" || f[0] == "NSpid:" || f[0] == "CapEff:" || f[0] == "Seccomp_filters:") {
			fmt.Fprintf(&b, " %s", strings.Join(f, " "))
		}
	}
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
	fmt.Fprintf(&b, " ns %s %v", ns, err)
	return b.String()
}

// TestForkServerPristine: each run starts from the server's pristine
// state: nothing a run did to its interpreter (modules, builtins, a
// preloaded module's attributes, the environment, the directory, sys
// settings, signals, open files, threads, children) is seen by the next.
func TestForkServerPristine(t *testing.T) {
	t.Parallel()
	f := newForkEnv(t, "json")
	look := `import builtins, json, os, signal, sys, threading
print("json", "json" in sys.modules and hasattr(json, "dumps") and json.dumps([1]) == "[1]")
print("mod", "planted" in sys.modules, hasattr(builtins, "planted"), len.__name__, getattr(json, "planted", None))
print("env", os.environ.get("PLANTED"), os.getcwd(), sys.path[0], sys.getrecursionlimit())
print("sig", signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT), signal.pthread_sigmask(signal.SIG_BLOCK, []))
print("fds", sorted(os.listdir("/proc/self/fd")), threading.active_count(), os.getpid())
try:
    print("children", os.waitpid(-1, os.WNOHANG))
except ChildProcessError:
    print("children none")
`
	plant := `import builtins, json, os, signal, sys, threading, time, types, atexit
sys.modules["planted"] = types.ModuleType("planted")
builtins.planted = True
json.planted = "yes"
json.dumps = lambda v: "forged"
os.environ["PLANTED"] = "1"
os.chdir("/tmp")
sys.path.insert(0, "/tmp")
sys.setrecursionlimit(50)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])
kept = [open("/proc/self/status") for _ in range(5)]
os.dup2(kept[0].fileno(), 50)
threading.Thread(target=time.sleep, args=(100,), daemon=True).start()
if os.fork() == 0:
    os.setsid()
    time.sleep(100)
print("planted")
builtins.len = lambda x: 0
`
	f.write(t, ".run.py", look)
	before := f.fork(t, f.command(nil))
	f.write(t, ".run.py", plant)
	if out := f.fork(t, f.command(nil)); !strings.Contains(string(out.Stdout), "planted") {
		t.Fatalf("plant: %s %s", out.Stdout, out.Stderr)
	}
	if pids := f.runProcesses(t); len(pids) > 0 {
		t.Fatalf("the planting run left processes: %v", pids)
	}
	f.write(t, ".run.py", look)
	after := f.fork(t, f.command(nil))
	if string(before.Stdout) != string(after.Stdout) || len(after.Stderr) > 0 {
		t.Errorf("a run saw what the one before it did:\nbefore\n%s\nafter\n%s%s", before.Stdout, after.Stdout, after.Stderr)
	}
	for _, want := range []string{"json True", "mod False False len None", "env None " + DefaultWorkspaceDir, "children none", "fds ['0', '1', '2', '3'] 1 2"} {
		if !strings.Contains(string(after.Stdout), want) {
			t.Errorf("want %q in\n%s", want, after.Stdout)
		}
	}
}

// TestForkServerShadowedPreload: a script whose directory holds a module
// named as a preloaded one (or one they imported) imports it as a fresh
// interpreter would: its own.
func TestForkServerShadowedPreload(t *testing.T) {
	t.Parallel()
	f := newForkEnv(t, "json")
	f.write(t, ".run.py", "import json, sys; print(json.__file__, 're' in sys.modules)")
	out := f.fork(t, f.command(nil))
	if !strings.Contains(string(out.Stdout), "/usr/lib/python3") || !strings.Contains(string(out.Stdout), "True") {
		t.Fatalf("preloaded json: %s %s", out.Stdout, out.Stderr)
	}
	for _, shadow := range []string{"json.py", "re.py"} {
		f.write(t, shadow, "print('shadow "+shadow+"')\ndumps = None\n")
		spawned, forked := f.spawn(t, f.command(nil)), f.fork(t, f.command(nil))
		if string(spawned.Stdout) != string(forked.Stdout) || !strings.Contains(string(forked.Stdout), "shadow "+shadow) {
			t.Errorf("%s: spawned %q %q, forked %q %q", shadow, spawned.Stdout, spawned.Stderr, forked.Stdout, forked.Stderr)
		}
		err := AsUID(f.ep.UID(), func() error { return os.Remove(filepath.Join(f.ep.Dir(), shadow)) })
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestForkServerContains: a forked run is contained as a spawned one: a
// fork bomb and a setsid daemon leave no process once Run returns; a
// timeout and a cancelled context end the run and every process of it;
// output beyond OutputBytes is counted, not kept; the program cannot use
// the server's unshare.
func TestForkServerContains(t *testing.T) {
	t.Parallel()
	f := newForkEnv(t)
	f.write(t, ".run.py", forkBomb)
	cmd := f.command(nil)
	if res := f.fork(t, cmd); !strings.Contains(string(res.Stdout), "done") {
		t.Fatalf("stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	if pids := f.runProcesses(t); len(pids) > 0 {
		t.Fatalf("processes left: %v", pids)
	}
	f.write(t, ".run.py", "import os, time\nos.fork(); os.fork()\nprint('forked', flush=True)\ntime.sleep(100)")
	cmd.Timeout = 500 * time.Millisecond
	if res := f.fork(t, cmd); !res.TimedOut || !strings.Contains(string(res.Stdout), "forked") {
		t.Fatalf("not timed out: %+v", res)
	}
	if pids := f.runProcesses(t); len(pids) > 0 {
		t.Fatalf("processes left after a timeout: %v", pids)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	cmd.Timeout = 0
	if res, err := f.k.Run(ctx, cmd); err != nil || !res.TimedOut {
		t.Fatalf("cancelled: %+v %v", res, err)
	}
	if pids := f.runProcesses(t); len(pids) > 0 {
		t.Fatalf("processes left after a cancel: %v", pids)
	}
	f.write(t, ".run.py", "import sys; sys.stdout.write('x' * 5000); sys.stderr.write('y' * 10)")
	cmd = f.command(nil)
	cmd.OutputBytes = 1000
	if res := f.fork(t, cmd); len(res.Stdout) != 1000 || res.StdoutDropped != 4000 || string(res.Stderr) != strings.Repeat("y", 10) {
		t.Fatalf("output cap: %d kept, %d dropped, stderr %q", len(res.Stdout), res.StdoutDropped, res.Stderr)
	}
	// The program's filter is the episode's, stacked on the server's: the
	// unshare the server's children make is refused to it.
	f.write(t, ".run.py", `import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
for flags in (0x20000000 | 0x08000000, 0x10000000):
    print(libc.unshare(flags), os.strerror(ctypes.get_errno()))
print([l for l in open("/proc/self/status").read().splitlines() if l.startswith(("CapEff", "CapPrm", "CapAmb", "Seccomp"))])
`)
	res := f.fork(t, f.command(nil))
	// One filter more than a spawned run has (a container's profile is one
	// more for both).
	filters := strconv.Itoa(seccompFilters(t, "self") + 2)
	for _, want := range []string{"-1 Operation not permitted\n-1 Operation not permitted", `'CapEff:\t0000000000000000'`, `'CapPrm:\t0000000000000000'`, `'CapAmb:\t0000000000000000'`, `'Seccomp_filters:\t` + filters + `'`} {
		if !strings.Contains(string(res.Stdout), want) {
			t.Errorf("want %q in %s%s", want, res.Stdout, res.Stderr)
		}
	}
}

// seccompFilters is the Seccomp_filters of /proc/<pid>/status.
func seccompFilters(t *testing.T, pid string) int {
	t.Helper()
	status, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(l, "Seccomp_filters:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(rest))
			return n
		}
	}
	return 0
}

// serverProcess is one of the fork server's processes as root sees it.
type serverProcess struct {
	pid, nsPid int
	status     string
}

func (f *forkEnv) serverProcesses(t *testing.T) []serverProcess {
	t.Helper()
	pids, err := f.fs.Processes()
	if err != nil {
		t.Fatal(err)
	}
	var out []serverProcess
	for _, pid := range pids {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		p := serverProcess{pid: pid, status: string(st)}
		for _, l := range strings.Split(p.status, "\n") {
			if rest, ok := strings.CutPrefix(l, "NSpid:"); ok {
				fs := strings.Fields(rest)
				p.nsPid, _ = strconv.Atoi(fs[len(fs)-1])
			}
		}
		out = append(out, p)
	}
	return out
}

// template returns the template's process (pid 2 of its namespace, the
// outermost of the server's).
func (f *forkEnv) template(t *testing.T) serverProcess {
	t.Helper()
	for _, p := range f.serverProcesses(t) {
		if p.nsPid == 2 && strings.Count(p.status[strings.Index(p.status, "NSpid:"):strings.Index(p.status, "NSpgid:")], "\t") == 2 {
			return p
		}
	}
	t.Fatal("no template process")
	return serverProcess{}
}

// TestForkServerProcesses: the server's processes (the template, a
// server, the next run's child, init and program, made before its
// request) run as
// the episode's uid, not dumpable (their /proc files are root's), with no
// new privileges, in a user namespace of their own that maps the uid
// alone; the template and server with the server's filter and of all
// capabilities CAP_SYS_ADMIN and CAP_NET_ADMIN alone, the next run's child, init and
// program with none and the episode's filter over the server's.
func TestForkServerProcesses(t *testing.T) {
	t.Parallel()
	f := newForkEnv(t)
	// The control: the run's program is dumpable, as after an exec.
	f.write(t, ".run.py", "import os; print(os.stat('/proc/self/environ').st_uid == os.getuid() != 0)")
	if res := f.fork(t, f.command(nil)); string(res.Stdout) != "True\n" {
		t.Fatalf("the program's /proc/self/environ: %q %q", res.Stdout, res.Stderr)
	}
	var procs []serverProcess
	for i := 0; ; i++ {
		if procs = f.serverProcesses(t); len(procs) == 5 || i == 100 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(procs) != 5 {
		var desc []string
		for _, p := range procs {
			state, _, _ := strings.Cut(p.status[strings.Index(p.status, "State:"):], "\n")
			desc = append(desc, fmt.Sprintf("%d (ns %d, %s)", p.pid, p.nsPid, state))
		}
		t.Fatalf("server processes: %v", desc)
	}
	uid := strconv.Itoa(f.ep.UID())
	caps := fmt.Sprintf("%016x", 1<<unix.CAP_SYS_ADMIN|1<<unix.CAP_NET_ADMIN)
	admin := 0
	// This process's filters (in a workspace container, Docker's profile)
	// and the server's, and for a run's child and init the episode's too.
	server := "Seccomp_filters:\t" + strconv.Itoa(seccompFilters(t, "self")+1)
	child := "Seccomp_filters:\t" + strconv.Itoa(seccompFilters(t, "self")+2)
	for _, p := range procs {
		for _, want := range []string{"Uid:\t" + uid + "\t" + uid + "\t" + uid + "\t" + uid, "NoNewPrivs:\t1", "Seccomp:\t2"} {
			if !strings.Contains(p.status, want) {
				t.Errorf("process %d: want %q in\n%s", p.pid, want, p.status)
			}
		}
		switch {
		case strings.Contains(p.status, "CapEff:\t"+caps) && strings.Contains(p.status, "CapPrm:\t"+caps) &&
			strings.Contains(p.status, "CapAmb:\t"+caps) && strings.Contains(p.status, server):
			admin++
		case strings.Contains(p.status, "CapEff:\t0000000000000000") && strings.Contains(p.status, "CapPrm:\t0000000000000000") &&
			strings.Contains(p.status, child):
		default:
			t.Errorf("process %d: capabilities and filters:\n%s", p.pid, p.status)
		}
		// A process not dumpable has its /proc files (not its directory)
		// owned by root (the overflow uid in a container), not its uid.
		var st unix.Stat_t
		if err := unix.Stat(fmt.Sprintf("/proc/%d/environ", p.pid), &st); err != nil || strconv.Itoa(int(st.Uid)) == uid {
			t.Errorf("process %d: /proc/%d/environ owned by %d (%v): dumpable", p.pid, p.pid, st.Uid, err)
		}
		mapping, err := os.ReadFile(fmt.Sprintf("/proc/%d/uid_map", p.pid))
		if err != nil || strings.Join(strings.Fields(string(mapping)), " ") != uid+" "+uid+" 1" {
			t.Errorf("process %d: uid_map %q (%v)", p.pid, mapping, err)
		}
		userNS, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/user", p.pid))
		if userNS == "" || userNS == f.episodeUserNS(t) {
			t.Errorf("process %d: user namespace %q, the episode's is %q", p.pid, userNS, f.episodeUserNS(t))
		}
	}
	if admin != 2 {
		t.Errorf("%d processes with the server's capabilities, want the template and the server", admin)
	}
}

// TestOwnNetwork: a run with OwnNetwork, forked (through a
// NetworkForker) or spawned, is in a network namespace of its own with its
// loopback interface up, so a port the run before it left in TIME_WAIT in
// the episode's is free there (the control: a run without OwnNetwork finds
// it taken). A command whose OwnNetwork is not its Forker's is spawned.
func TestOwnNetwork(t *testing.T) {
	t.Parallel()
	f := newForkEnv(t)
	net := f.fs.NetworkForker()
	const port = "47124"
	f.write(t, ".run.py", `import socket
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(1)
client = socket.socket()
client.bind(("127.0.0.1", `+port+`))
client.connect(listener.getsockname())
conn = listener.accept()[0]
client.close()  # first: its port stays in TIME_WAIT
conn.close()
print("left", flush=True)
`)
	if res := f.fork(t, f.command(nil)); string(res.Stdout) != "left\n" {
		t.Fatalf("the run that leaves a port in TIME_WAIT: %q %q", res.Stdout, res.Stderr)
	}
	f.write(t, ".run.py", `import socket
s = socket.socket()
try:
    s.bind(("127.0.0.1", `+port+`))
    print("port free")
except OSError:
    print("port taken")
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(1)
socket.create_connection(listener.getsockname()).sendall(b"loopback up")
print(listener.accept()[0].recv(100).decode())
`)
	for _, c := range []struct {
		name   string
		k      *Forker // nil: spawned
		own    bool
		forked bool
		want   string
	}{
		{"forked, the episode's network (the control)", f.k, false, true, "port taken"},
		{"spawned, the episode's network (the control)", nil, false, false, "port taken"},
		{"forked, its own", net, true, true, "port free"},
		{"forked again, its own", net, true, true, "port free"},
		{"spawned, its own", nil, true, false, "port free"},
		{"through a Forker without networks", f.k, true, false, "port free"},
		{"without OwnNetwork through a NetworkForker", net, false, false, "port taken"},
	} {
		cmd := f.command(nil)
		cmd.OwnNetwork = c.own
		before := f.fs.Forked()
		var res Result
		var err error
		if c.k == nil {
			res, err = f.ep.Run(context.Background(), cmd)
		} else {
			res, err = c.k.Run(context.Background(), cmd)
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if forked := f.fs.Forked() == before+1; forked != c.forked {
			t.Errorf("%s: forked %v, want %v (%v)", c.name, forked, c.forked, f.fs.Err())
		}
		if want := c.want + "\nloopback up\n"; string(res.Stdout) != want {
			t.Errorf("%s: %q %q, want %q", c.name, res.Stdout, res.Stderr, want)
		}
	}
}

// TestForkServerOwnerReachesNothing: the processes that could hold a
// capability over the server's processes try every way
// testdata/agents/fork_server_kill.py knows on them: a spawned run of the
// uid beside the server (the owner of the server's user namespace, in its
// parent: the kernel gives it every capability there) and another
// episode's runs, forked and spawned. None reaches any, and the next run
// comes from the same template.
func TestForkServerOwnerReachesNothing(t *testing.T) {
	t.Parallel()
	f := newForkEnv(t, "json")
	other := newForkEnv(t, "json")
	src, err := os.ReadFile(filepath.Join("..", "..", "testdata", "agents", "fork_server_kill.py"))
	if err != nil {
		t.Fatal(err)
	}
	f.write(t, ".run.py", "pass")
	f.fork(t, f.command(nil)) // the next run's child, init and program are made now
	template := f.template(t).pid
	var pids []string
	for _, p := range f.serverProcesses(t) {
		pids = append(pids, strconv.Itoa(p.pid))
	}
	serverPIDs := strings.Join(pids, ",")
	for _, a := range []struct {
		name   string
		env    *forkEnv
		target string // {{TARGET_PIDS}}: empty, the processes of the run's uid
		fork   bool
	}{
		{"spawned run of the uid", f, "", false},
		{"forked run of another uid", other, serverPIDs, true},
		{"spawned run of another uid", other, serverPIDs, false},
	} {
		code := string(src)
		if a.target != "" {
			code = strings.ReplaceAll(code, "{{TARGET_PIDS}}", a.target)
		}
		a.env.write(t, ".run.py", code)
		var res Result
		if a.fork {
			res = a.env.fork(t, a.env.command(nil))
		} else {
			res = a.env.spawn(t, a.env.command(nil))
		}
		out := string(res.Stdout)
		if !strings.Contains(out, "reached []") || res.ExitCode != 0 || !strings.Contains(out, "targets ") || strings.Contains(out, "targets 0\n") {
			t.Errorf("%s: exit %d\n%s%s", a.name, res.ExitCode, out, res.Stderr)
		}
	}
	if got := f.template(t).pid; got != template {
		t.Fatalf("the template was %d, is %d", template, got)
	}
	for _, p := range f.serverProcesses(t) {
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid))
		if i := strings.LastIndexByte(string(stat), ')'); i < 0 || len(strings.Fields(string(stat[i+1:]))) < 17 || strings.Fields(string(stat[i+1:]))[16] != "0" {
			t.Errorf("server process %d reniced: %s", p.pid, stat)
		}
	}
	f.write(t, ".run.py", "print('still served')")
	if res := f.fork(t, f.command(nil)); string(res.Stdout) != "still served\n" {
		t.Fatalf("after the attacks: %q %q", res.Stdout, res.Stderr)
	}
}

func (f *forkEnv) episodeUserNS(t *testing.T) string {
	t.Helper()
	ns, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", f.ep.ns.user.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// waitTemplateEnd waits until the server has seen its template end.
func (f *forkEnv) waitTemplateEnd(t *testing.T) {
	t.Helper()
	f.fs.mu.Lock()
	tmpl := f.fs.tmpl
	f.fs.mu.Unlock()
	select {
	case <-tmpl.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the template did not end")
	}
}

// TestForkServerRestarts: the server's death, between runs or during one,
// ends nothing but the run it interrupts; the next run gets a new server
// (a server killed alone is replaced from the template, a dead template
// by a new one).
func TestForkServerRestarts(t *testing.T) {
	t.Parallel()
	f := newForkEnv(t)
	f.write(t, ".run.py", "import os; print('ran', os.getpid())")
	f.fork(t, f.command(nil))
	tmpl := f.template(t)
	// A server alone (and the next run's child, init and program).
	for _, p := range f.serverProcesses(t) {
		if p.pid != tmpl.pid {
			syscall.Kill(p.pid, syscall.SIGKILL)
		}
	}
	if res := f.fork(t, f.command(nil)); !strings.Contains(string(res.Stdout), "ran 2") {
		t.Fatalf("after the server died: %q %q", res.Stdout, res.Stderr)
	}
	if f.template(t).pid != tmpl.pid {
		t.Fatal("the template was replaced; only its server died")
	}
	// The template, between runs (once the server has seen it end: a run
	// sent while it dies may be reported as interrupted, as below).
	syscall.Kill(tmpl.pid, syscall.SIGKILL)
	f.waitTemplateEnd(t)
	if !f.fs.WaitReady(context.Background()) {
		t.Fatalf("no new template: %v", f.fs.Err())
	}
	if res := f.fork(t, f.command(nil)); !strings.Contains(string(res.Stdout), "ran 2") {
		t.Fatalf("after the template died: %q %q", res.Stdout, res.Stderr)
	}
	tmpl2 := f.template(t)
	if tmpl2.pid == tmpl.pid {
		t.Fatal("the same template")
	}
	// The template, during a run: the run ends, reported, and nothing of
	// it is left.
	f.write(t, ".run.py", "import os, time\nos.fork()\nprint('started', flush=True)\ntime.sleep(100)")
	time.AfterFunc(500*time.Millisecond, func() { syscall.Kill(tmpl2.pid, syscall.SIGKILL) })
	start := time.Now()
	res, err := f.k.Run(context.Background(), f.command(nil))
	if !errors.Is(err, ErrLaunch) || !strings.Contains(err.Error(), "died during the run") || time.Since(start) > 10*time.Second {
		t.Fatalf("a run whose server died: %+v %v", res, err)
	}
	if pids := f.runProcesses(t); len(pids) > 0 {
		t.Fatalf("processes left: %v", pids)
	}
	f.write(t, ".run.py", "print('again')")
	if !f.fs.WaitReady(context.Background()) {
		t.Fatalf("no new template: %v", f.fs.Err())
	}
	if res := f.fork(t, f.command(nil)); string(res.Stdout) != "again\n" {
		t.Fatalf("after the template died during a run: %q %q", res.Stdout, res.Stderr)
	}
	if f.fs.Err() != nil {
		t.Fatalf("server broken: %v", f.fs.Err())
	}
}

// TestForkServerGoneBeforeRun: a run sent once the template is gone (its
// process reaped, the rest of its namespace perhaps still dying: its
// server and the next run's program die one after another, each of its
// parent's death) runs, spawned or forked from a new template; it is never
// taken by a program of the dead template and reported as interrupted.
func TestForkServerGoneBeforeRun(t *testing.T) {
	t.Parallel()
	f := newForkEnv(t)
	f.write(t, ".run.py", "print('ran')")
	for i := range 20 {
		if !f.fs.WaitReady(context.Background()) {
			t.Fatalf("no template: %v", f.fs.Err())
		}
		f.fork(t, f.command(nil)) // the next run's program is made
		tmpl := f.template(t)
		syscall.Kill(tmpl.pid, syscall.SIGKILL)
		for {
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", tmpl.pid)); err != nil {
				break
			}
			time.Sleep(time.Millisecond)
		}
		res, err := f.k.Run(context.Background(), f.command(nil))
		if err != nil || string(res.Stdout) != "ran\n" {
			t.Fatalf("run %d after the template was gone: %v %q %q", i, err, res.Stdout, res.Stderr)
		}
	}
}

// TestForkServerFallback: runs the server does not serve are spawned (a
// command of its own, another environment or limits), and so is every
// run once the server cannot start.
func TestForkServerFallback(t *testing.T) {
	t.Parallel()
	f := newForkEnv(t)
	f.write(t, ".run.py", "import gc; print(gc.get_freeze_count() > 0)")
	c := f.command(nil)
	other := []Command{
		{Argv: []string{python, "-E", "-s", "-c", "import gc; print(gc.get_freeze_count() > 0)"}, Env: f.env},
		{Argv: c.Argv, Env: append([]string{"X=1"}, f.env...)},
		{Argv: c.Argv, Env: f.env, Limits: Limits{OpenFiles: 100}},
		{Argv: append([]string{python, "-E", "-s", "-u"}, ".run.py"), Env: f.env},
		{Argv: []string{python, "-s", ".run.py"}, Env: f.env},
	}
	for _, o := range other {
		res, err := f.k.Run(context.Background(), o)
		if err != nil || string(res.Stdout) != "False\n" {
			t.Errorf("%q: %q %q %v", o.Argv, res.Stdout, res.Stderr, err)
		}
	}
	if f.fs.Forked() != 0 {
		t.Errorf("%d runs forked", f.fs.Forked())
	}
	if res := f.fork(t, c); string(res.Stdout) != "True\n" {
		t.Errorf("forked: %q", res.Stdout)
	}

	// A template that cannot start: runs are spawned, and after
	// maxTemplateFailures no template is started again; the reason is kept.
	broken := newForkEnvWith(t, ForkServerConfig{Python: python, Env: f.env}, "import sys; sys.exit(3)")
	broken.write(t, ".run.py", "import gc; print(gc.get_freeze_count() > 0)")
	for i := 0; i < 100 && broken.fs.Err() == nil; i++ {
		res, err := broken.k.Run(context.Background(), broken.command(nil))
		if err != nil || string(res.Stdout) != "False\n" {
			t.Fatalf("%q %q %v", res.Stdout, res.Stderr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := broken.fs.Err(); err == nil || !strings.Contains(err.Error(), "ended 2 times before serving a run (last: exit 3") {
		t.Fatalf("broken server's error: %v", err)
	}
}

// TestForkServerClose: closing the episode ends the server: none of its
// processes is left.
func TestForkServerClose(t *testing.T) {
	t.Parallel()
	ep, err := testSandbox(t, Namespaces).NewEpisode()
	if err != nil {
		t.Fatal(err)
	}
	f := &forkEnv{ep: ep, env: forkTestEnv}
	f.fs = ep.ForkServer(ForkServerConfig{Python: python, Env: f.env})
	if len(f.fs.cfg.Env) == 0 {
		t.Fatal("no env")
	}
	f.k = f.fs.Forker()
	spare := f.fs.Forker()
	if !f.fs.WaitReady(context.Background()) {
		t.Fatal(f.fs.Err())
	}
	f.write(t, ".run.py", "print(1)")
	f.fork(t, f.command(nil))
	if _, err := spare.Run(context.Background(), f.command(nil)); err != nil {
		t.Fatal(err)
	}
	uid := ep.UID()
	var left []int
	ep.BeforeRelease = func() { left, _ = Processes(uid) }
	if err := ep.Close(); err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Fatalf("processes of the fork server left: %v", left)
	}
	if _, err := f.k.Run(context.Background(), f.command(nil)); err == nil {
		t.Fatal("a run after the episode closed")
	}
}

// TestTemplateEndingIsNotAlive: a template whose end has begun (its
// control socket closed by template.end, or by its reaper once the
// launcher is gone) is not alive, though done is not closed yet: alive
// must not take a socket it can no longer poll for one that serves.
func TestTemplateEndingIsNotAlive(t *testing.T) {
	t.Parallel()
	f := newForkEnv(t)
	if !f.fs.WaitReady(context.Background()) {
		t.Fatalf("no template: %v", f.fs.Err())
	}
	f.fs.mu.Lock()
	tmpl := f.fs.tmpl
	f.fs.mu.Unlock()
	tmpl.ctl.Close() // end's first step
	alive := tmpl.alive()
	tmpl.p.stop()
	<-tmpl.done
	if alive {
		t.Fatal("a template whose control socket is closed is alive")
	}
}

// TestBootstrapImportsNothingOfTheWorkspace: the template's bootstrap runs
// in the workspace (its working directory) with -c, which puts the empty string first
// on sys.path; it imports _socket, which is a file of lib-dynload in many
// builds (python.org's, the python:3.11-slim base the Dockerfile names by
// default), not a built-in module. A template started once the workspace
// holds files of the agent's (one started again after its template died)
// must import no _socket.py of the workspace, and its program must find
// no empty string on sys.path.
func TestBootstrapImportsNothingOfTheWorkspace(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	shadow := "open(" + strconv.Quote(marker) + ", 'w').close()\nfrom _socket_real import *\n"
	if err := os.WriteFile(filepath.Join(dir, "_socket.py"), []byte(shadow), 0o644); err != nil {
		t.Fatal(err)
	}
	ours, theirs, err := socketPair()
	if err != nil {
		t.Fatal(err)
	}
	defer ours.Close()
	cmd := exec.Command(python, "-E", "-s", "-c", forkServerBootstrap)
	cmd.Dir, cmd.Stdin = dir, theirs
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	theirs.Close()
	var b [8]byte
	ours.SetReadDeadline(time.Now().Add(20 * time.Second))
	if n, _ := ours.Read(b[:]); string(b[:n]) == "up" {
		if err := send(ours, []byte("import sys\nprint('' in sys.path)\n")); err != nil {
			t.Fatal(err)
		}
	}
	cmd.Wait()
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the bootstrap imported the workspace's _socket.py")
	}
	if strings.TrimSpace(out.String()) != "False" {
		t.Errorf("the program found '' (the workspace) on sys.path: %q", out.String())
	}
}

// TestForkServerReplacesWhileEpisodeCloses: an episode closed while its
// fork server replaces a gone template closes, and so does the
// replacement: template() ends the gone one (waiting for its namespace)
// and starts another under the server's lock, which takes the episode's
// (launcherFor); Episode.Close took the episode's lock, then the
// server's.
func TestForkServerReplacesWhileEpisodeCloses(t *testing.T) {
	t.Parallel()
	sb := testSandbox(t, Namespaces)
	for i := range 20 {
		ep, err := sb.NewEpisode()
		if err != nil {
			t.Fatal(err)
		}
		f := &forkEnv{ep: ep, fs: newForkServer(ep, ForkServerConfig{Python: python, Env: forkTestEnv}, "")}
		if !f.fs.WaitReady(context.Background()) {
			ep.Close()
			t.Fatalf("no template: %v", f.fs.Err())
		}
		tmpl := f.template(t)
		syscall.Kill(tmpl.pid, syscall.SIGKILL)
		for {
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", tmpl.pid)); err != nil {
				break
			}
			time.Sleep(100 * time.Microsecond)
		}
		done := make(chan struct{}, 2)
		go func() { f.fs.WaitReady(context.Background()); done <- struct{}{} }()
		go func() {
			time.Sleep(time.Duration(i%5) * 200 * time.Microsecond)
			ep.Close()
			done <- struct{}{}
		}()
		for range 2 {
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				t.Fatalf("round %d: the fork server and Episode.Close wait for each other", i)
			}
		}
	}
}
