package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"golang.org/x/sys/unix"
)

func TestStatusMatches(t *testing.T) {
	t.Parallel()
	status := func(state, threads, uids string) []byte {
		return []byte("Name:\tpython3\nState:\t" + state + "\nTgid:\t7\nUid:\t" + uids + "\nGid:\t20000\t20000\t20000\t20000\nThreads:\t" + threads + "\n")
	}
	tests := []struct {
		name              string
		status            []byte
		wantLive, wantUID bool
	}{
		{"running", status("R (running)", "1", "20000\t20000\t20000\t20000"), true, true},
		{"sleeping_other_uid", status("S (sleeping)", "1", "20001\t20001\t20001\t20001"), true, false},
		{"fsuid_only", status("S (sleeping)", "1", "0\t0\t0\t20000"), true, true},
		{"zombie", status("Z (zombie)", "1", "20000\t20000\t20000\t20000"), false, true},
		{"dead", status("X (dead)", "1", "20000\t20000\t20000\t20000"), false, true},
		// The leader called exit(2) alone; another thread still runs.
		{"zombie_leader_live_thread", status("Z (zombie)", "2", "20000\t20000\t20000\t20000"), true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			live, match := statusMatches(tt.status, 20000)
			if live != tt.wantLive || match != tt.wantUID {
				t.Errorf("statusMatches = live %v, match %v; want %v, %v", live, match, tt.wantLive, tt.wantUID)
			}
		})
	}
}

// hopChain is a hostile chain of processes: each forks its successor and
// exits, so one process of the uid is alive at any moment and a /proc scan
// that lists pids before reading them can miss it. It stops by itself
// after 20 s.
const hopChain = `import os, time
end = time.time() + 20
print("hopping", flush=True)
while time.time() < end:
    if os.fork():
        os._exit(0)
`

// hopKill is the hopkill helper: as a child subreaper (so the chain's
// orphans are reaped at once, not by a slow init), start hopChain as
// SANDBOX_TEST_UID, wait until it hops, KillAllOfUID, and print the CapEff
// line and how many processes of the uid are left once the killed ones
// finished exiting.
func hopKill() {
	uid, _ := strconv.Atoi(os.Getenv("SANDBOX_TEST_UID"))
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "subreaper:", err)
		os.Exit(1)
	}
	cmd := exec.Command(python, "-E", "-s", "-c", hopChain)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}}}
	out, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "start chain:", err)
		os.Exit(1)
	}
	go func() {
		for {
			var ws unix.WaitStatus
			if _, err := unix.Wait4(-1, &ws, 0, nil); errors.Is(err, unix.ECHILD) {
				return
			}
		}
	}()
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "hopping\n" {
		fmt.Fprintf(os.Stderr, "chain said %q\n", line)
		os.Exit(1)
	}
	status, _ := os.ReadFile("/proc/self/status")
	fmt.Println(capEffLine(string(status)))
	if err := KillAllOfUID(testRange, uid); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Until the parent test's deadline, which it passes on.
	giveUp, _ := time.Parse(time.RFC3339Nano, os.Getenv("SANDBOX_TEST_GIVE_UP"))
	pids, err := goneBy(uid, giveUp)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("left %d\n", len(pids))
	os.Exit(0)
}

// TestKillHoppingChain: a chain whose every process forks its successor
// and exits is gone after one KillAllOfUID, run as root and with exactly the
// four production capabilities (CapEff e1).
func TestKillHoppingChain(t *testing.T) {
	for _, tt := range []struct {
		name    string
		prefix  []string
		wantCap string
	}{
		{"root", nil, ""},
		{"production_caps", productionCaps(t), "CapEff:\t00000000000000e1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			uid := claimUID(t)
			argv := append(append([]string{}, tt.prefix...), os.Args[0])
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Env = append(os.Environ(), helperEnv+"=hopkill", "SANDBOX_TEST_UID="+strconv.Itoa(uid))
			if d, ok := testenv.Deadline(t); ok {
				cmd.Env = append(cmd.Env, "SANDBOX_TEST_GIVE_UP="+d.Format(time.RFC3339Nano))
			}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("hopkill helper: %v\n%s", err, out)
			}
			if !strings.Contains(string(out), tt.wantCap) || !strings.Contains(string(out), "left 0") {
				t.Fatalf("want %q and \"left 0\" in %q", tt.wantCap, out)
			}
			if pids, err := Processes(uid); err != nil || len(pids) > 0 {
				t.Fatalf("processes of uid %d left: %v %v", uid, pids, err)
			}
		})
	}
}

// startAs starts sleep as uid (root when 0) and kills it at the end.
func startAs(t *testing.T, uid int) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("/bin/sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// killedBy waits for cmd and returns the signal that ended it.
func killedBy(t *testing.T, cmd *exec.Cmd) syscall.Signal {
	t.Helper()
	cmd.Wait()
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() {
		t.Fatalf("pid %d exited without a signal: %v", cmd.Process.Pid, cmd.ProcessState)
	}
	return ws.Signal()
}

// TestKillAllOfUIDSparesOthers: kill(-1) as one uid kills that uid's
// process and neither a root process nor another sandbox uid's; the
// calling process lives on. The others are then ended with SIGTERM: had
// kill(-1) reached them, they would report SIGKILL.
func TestKillAllOfUIDSparesOthers(t *testing.T) {
	uid, other := claimUID(t), claimUID(t)
	victim, rootProc, otherProc := startAs(t, uid), startAs(t, 0), startAs(t, other)
	if err := KillAllOfUID(testRange, uid); err != nil {
		t.Fatal(err)
	}
	if sig := killedBy(t, victim); sig != syscall.SIGKILL {
		t.Fatalf("the uid's process ended by %v, want SIGKILL", sig)
	}
	for name, cmd := range map[string]*exec.Cmd{"root": rootProc, "other uid": otherProc} {
		cmd.Process.Signal(syscall.SIGTERM)
		if sig := killedBy(t, cmd); sig != syscall.SIGTERM {
			t.Errorf("%s process ended by %v, want SIGTERM (kill(-1) reached it)", name, sig)
		}
	}
	if err := KillAllOfUID(testRange, 0); err == nil {
		t.Error("KillAllOfUID(0) was accepted")
	}
}

// tgkillProbe, run as a sandbox uid: for each "pid tid" line, tgkill(pid,
// tid, 0) and print "ok" or the error.
const tgkillProbe = `import ctypes, os, platform, sys
SYS_TGKILL = {"x86_64": 234, "aarch64": 131}[platform.machine()]
libc = ctypes.CDLL(None, use_errno=True)
for line in sys.stdin:
    pid, tid = map(int, line.split())
    r = libc.syscall(SYS_TGKILL, pid, tid, 0)
    print("ok" if r == 0 else os.strerror(ctypes.get_errno()), flush=True)
`

// TestKillerThreadUnsignalable: while a thread is switched for kill(-1),
// a process of the uid cannot signal it (a SIGKILL to any thread ends the
// server); a thread whose real uid were the uid could be.
func TestKillerThreadUnsignalable(t *testing.T) {
	uid := claimUID(t)
	helper := exec.Command(python, "-E", "-s", "-c", tgkillProbe)
	helper.Dir = "/"
	helper.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}}}
	in, err := helper.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outPipe, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); helper.Wait() })
	out := bufio.NewReader(outPipe)
	probe := func() string {
		fmt.Fprintf(in, "%d %d\n", os.Getpid(), unix.Gettid())
		line, _ := out.ReadString('\n')
		return strings.TrimSpace(line)
	}
	// On a thread of its own, never the main one (whose ids are the
	// process's for other processes' signals), and never unlocked: its ids
	// were played with.
	var r [2]string
	onOwnThread(func(*bool) error {
		restored := false
		err := asKillerLocked(testRange.Killer(), uid, &restored, func() error { r[0] = probe(); return nil })
		if err != nil || !restored {
			r[0] = fmt.Sprintf("asKillerLocked: %v, restored %v", err, restored)
		}
		// The control: real uid the uid's.
		keep := ^uintptr(0)
		if _, _, errno := syscall.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), keep); errno != 0 {
			r[1] = errno.Error()
		} else {
			r[1] = probe()
			syscall.RawSyscall(unix.SYS_SETRESUID, 0, 0, keep)
		}
		return nil
	})
	if r[0] != "Operation not permitted" {
		t.Errorf("a process of the uid probing the switched thread: %q, want %q", r[0], "Operation not permitted")
	}
	if r[1] != "ok" {
		t.Errorf("control (real uid the uid's): %q, want ok", r[1])
	}
}

// liveProbeAgent leaves, as the uid: a non-dumpable daemon (its /proc
// entry is root's), a zombie leader whose second thread runs, and a
// zombie whose parent sleeps without reaping it. It prints their pids.
const liveProbeAgent = `import ctypes, os, threading, time, platform
libc = ctypes.CDLL(None)
SYS_EXIT = {"x86_64": 60, "aarch64": 93}[platform.machine()]
r, w = os.pipe()
def detach():
    os.setsid()
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
if os.fork() == 0:
    detach()
    libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
    os.write(w, b"nondumpable %d\n" % os.getpid())
    while True: time.sleep(1)
if os.fork() == 0:
    detach()
    threading.Thread(target=lambda: time.sleep(1000)).start()
    os.write(w, b"zombieleader %d\n" % os.getpid())
    libc.syscall(SYS_EXIT, 0)
if os.fork() == 0:
    detach()
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.write(w, b"zombie %d\nparent %d\n" % (pid, os.getpid()))
    while True: time.sleep(1)
time.sleep(0.3)
os.close(w)
print(os.read(r, 4096).decode(), end="")
`

// TestKillReachesWhatHides: one KillAllOfUID ends a non-dumpable process
// and a zombie leader with a live thread, and not another uid's process.
// The processes are started outside a run (whose end would kill them).
func TestKillReachesWhatHides(t *testing.T) {
	uid := claimUID(t)
	other := startAs(t, claimUID(t))
	cmd := exec.Command(python, "-E", "-s", "-c", liveProbeAgent)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}}}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("agent: %v", err)
	}
	if n := strings.Count(string(out), "\n"); n != 4 {
		t.Fatalf("agent printed %q", out)
	}
	if pids, _ := Processes(uid); len(pids) < 3 {
		t.Fatalf("the agent left %v, want its daemons alive", pids)
	}
	if err := KillAllOfUID(testRange, uid); err != nil {
		t.Fatal(err)
	}
	if pids, err := gone(t, uid); err != nil || len(pids) > 0 {
		t.Fatalf("left after the kill: %v %v", pids, err)
	}
	if err := other.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("another uid's process was killed: %v", err)
	}
}

// gone waits until no process of uid is alive (Processes), until the
// test's deadline (the killed processes only have to finish exiting, which
// on a loaded machine takes a while), and returns those still alive then.
func gone(t *testing.T, uid int) ([]int, error) {
	d, _ := testenv.Deadline(t)
	return goneBy(uid, d)
}

// goneBy is gone giving up at giveUp (never when zero).
func goneBy(uid int, giveUp time.Time) ([]int, error) {
	for {
		pids, err := Processes(uid)
		if err != nil || len(pids) == 0 || !giveUp.IsZero() && time.Now().After(giveUp) {
			return pids, err
		}
		time.Sleep(5 * time.Millisecond)
	}
}
