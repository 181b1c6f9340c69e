package sandbox

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// KillDeadline bounds KillUntilNone: processes of the uid still alive
// this long after the first kill are reported (ErrProcessesLeft). A
// process that was sent SIGKILL only has to finish exiting, which takes
// milliseconds even for dozens of large processes on a busy machine.
const KillDeadline = 5 * time.Second

// killPollMax bounds the sleep between two rounds once everything was
// signalled; the first sleeps are shorter (killPollMin, doubling).
const (
	killPollMin = 200 * time.Microsecond
	killPollMax = 10 * time.Millisecond
)

// ErrProcessesLeft is returned (wrapped) by KillUntilNone when processes
// of the uid were still alive at its deadline.
var ErrProcessesLeft = errors.New("processes of the uid survived the kill")

// Processes returns the pids of the live processes (not zombies, unless a
// thread other than the zombie leader still runs) whose real, effective,
// saved or filesystem uid is uid. It reads the status of every process on
// the machine, so the kill does not use it (see LiveProcesses); tests and
// diagnostics do, as a view independent of signal permissions.
func Processes(uid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("scan /proc: %w", err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue // gone since the listing
		}
		if live, match := statusMatches(data, uid); live && match {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// statusMatches reads a /proc/<pid>/status: whether the process is not a
// zombie, and whether any of its uids is uid. A leader that is a zombie
// while other threads of its process still run (its main thread called
// exit(2), not exit_group(2)) is live: SIGKILL to its pid ends them all.
func statusMatches(status []byte, uid int) (live, match bool) {
	zombie, threads := false, 1
	want := strconv.Itoa(uid)
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "State:"):
			f := strings.Fields(strings.TrimPrefix(line, "State:"))
			zombie = len(f) > 0 && (f[0] == "Z" || f[0] == "X")
		case strings.HasPrefix(line, "Threads:"):
			if n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "Threads:"))); err == nil {
				threads = n
			}
		case strings.HasPrefix(line, "Uid:"):
			for _, f := range strings.Fields(strings.TrimPrefix(line, "Uid:")) {
				if f == want {
					match = true
				}
			}
		}
	}
	return !zombie || threads > 1, match
}

// KillAllOfUID sends SIGKILL with kill(-1) from an OS thread of its own
// whose effective uid is uid and real uid CurrentRange().Killer() (no
// process may ever run as it: every such process is killed with each
// episode's processes; saved uid stays
// 0, so it can switch back; its effective capabilities are then empty,
// which is checked before the kill). The kernel then signals exactly the
// processes whose real or saved uid is uid or the killer, never root's
// nor another uid's nor this process, and does it atomically with respect
// to fork: no process of uid forks a successor the signal misses. The
// real uid is not uid itself: a thread whose real uid is uid could be sent
// SIGKILL (tgkill) by the uid's processes, which would end the server.
// Afterwards the thread's uids and capabilities are checked again; a
// thread that could not be restored dies instead of returning to the
// scheduler.
func KillAllOfUID(uid int) error {
	_, err := killRound(uid, false)
	return err
}

// LiveProcesses sends SIGKILL to every process of uid (KillAllOfUID) and
// returns the pids of those still alive: processes the same thread may
// signal (a kill(pid, 0) probe per pid listed in /proc, which sees
// non-dumpable processes too) that are not zombies, or zombie leaders
// whose other threads still run. Only the few processes the probe finds
// have their /proc status read, not every process of the machine.
func LiveProcesses(uid int) ([]int, error) {
	return killRound(uid, true)
}

// killRound is one round of the kill: kill(-1) as uid, then, when probe is
// set, the pids of uid's processes that are still alive.
func killRound(uid int, probe bool) ([]int, error) {
	if r := CurrentRange(); !r.Contains(uid) {
		return nil, fmt.Errorf("kill(-1) as uid %d: not a sandbox uid of %v", uid, r)
	}
	var candidates []int
	err := onOwnThread(func(restored *bool) error {
		return asKillerLocked(uid, restored, func() error {
			minus1 := -1
			_, _, errno := syscall.RawSyscall(unix.SYS_KILL, uintptr(minus1), uintptr(unix.SIGKILL), 0)
			if errno != 0 && errno != unix.ESRCH {
				return fmt.Errorf("kill(-1) as uid %d: %w", uid, errno)
			}
			if !probe {
				return nil
			}
			var err error
			candidates, err = signalable()
			return err
		})
	})
	if err != nil || len(candidates) == 0 {
		return nil, err
	}
	var live []int
	for _, pid := range candidates {
		data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		if err != nil {
			continue // reaped since the probe
		}
		// The thread could signal it, so its real or saved uid is uid or
		// the killer: alive is enough.
		if alive, _ := statusMatches(data, uid); alive {
			live = append(live, pid)
		}
	}
	return live, nil
}

// signalable lists the pids in /proc this thread may send a signal to:
// kill(pid, 0) succeeds (zombies included). Call it on the switched
// thread. It reads the directory with getdents into one buffer and
// parses the names itself: this runs after every program and before
// every graded case.
func signalable() ([]int, error) {
	fd, err := unix.Open("/proc", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("list /proc: %w", err)
	}
	defer unix.Close(fd)
	self := os.Getpid()
	var pids []int
	buf := make([]byte, 16<<10)
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			return nil, fmt.Errorf("list /proc: %w", err)
		}
		if n <= 0 {
			return pids, nil
		}
		// struct linux_dirent64: ino (8), off (8), reclen (2), type (1), name.
		for off := 0; off+19 < n; {
			reclen := int(binary.NativeEndian.Uint16(buf[off+16:]))
			if reclen == 0 {
				break
			}
			pid := 0
			for _, c := range buf[off+19 : off+reclen] {
				if c == 0 {
					break
				}
				if c < '0' || c > '9' {
					pid = -1
					break
				}
				pid = pid*10 + int(c-'0')
			}
			off += reclen
			if pid <= 1 || pid == self {
				continue
			}
			if _, _, errno := syscall.RawSyscall(unix.SYS_KILL, uintptr(pid), 0, 0); errno == 0 {
				pids = append(pids, pid)
			}
		}
	}
}

// threadIDs returns this thread's real, effective, saved and filesystem
// uids and its effective capabilities (credentials are per thread; the
// raw calls read the calling thread's).
func threadIDs() (uids [4]int, capEff uint64, err error) {
	var r, e, s uint32
	if _, _, errno := syscall.RawSyscall(unix.SYS_GETRESUID, uintptr(unsafe.Pointer(&r)), uintptr(unsafe.Pointer(&e)), uintptr(unsafe.Pointer(&s))); errno != 0 {
		return uids, 0, fmt.Errorf("getresuid: %w", errno)
	}
	keep := ^uintptr(0) // -1: only report the filesystem uid
	fs, _, _ := syscall.RawSyscall(unix.SYS_SETFSUID, keep, 0, 0)
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return uids, 0, fmt.Errorf("capget: %w", err)
	}
	return [4]int{int(r), int(e), int(s), int(uint32(fs))}, uint64(data[1].Effective)<<32 | uint64(data[0].Effective), nil
}

// asKillerLocked runs fn with this thread's real uid the range's Killer and
// effective uid uid, only once the switch took and left no effective
// capability, then switches back to root and checks that. The caller must
// hold the OS thread locked.
func asKillerLocked(uid int, restored *bool, fn func() error) (err error) {
	uidsBefore, capsBefore, err := threadIDs()
	if err != nil {
		*restored = true // nothing changed yet
		return fmt.Errorf("kill as uid %d: %w", uid, err)
	}
	if uidsBefore != [4]int{} {
		*restored = true
		return fmt.Errorf("kill as uid %d: thread uids %v, want root", uid, uidsBefore)
	}
	keep := ^uintptr(0) // -1: leave that id as it is
	defer func() {
		syscall.RawSyscall(unix.SYS_SETRESUID, 0, 0, keep)
		uids, caps, idErr := threadIDs()
		*restored = idErr == nil && uids == uidsBefore && caps == capsBefore
		if !*restored && err == nil {
			err = fmt.Errorf("kill as uid %d: thread not restored (uids %v caps %#x, want %v %#x; %v)", uid, uids, caps, uidsBefore, capsBefore, idErr)
		}
	}()
	killer := CurrentRange().Killer()
	if _, _, errno := syscall.RawSyscall(unix.SYS_SETRESUID, uintptr(killer), uintptr(uid), keep); errno != 0 {
		return fmt.Errorf("kill as uid %d: setresuid: %w", uid, errno)
	}
	// With CAP_KILL still effective kill(-1) would reach every process.
	uids, caps, err := threadIDs()
	want := [4]int{killer, uid, 0, uid}
	if err != nil || uids != want || caps != 0 {
		return fmt.Errorf("kill as uid %d: switched thread has uids %v caps %#x (want %v, none): %v", uid, uids, caps, want, err)
	}
	return fn()
}

// KillUntilNone kills the processes of uid until none is alive or
// KillDeadline passes. Each round sends kill(-1) as the uid (atomic with
// fork, so nothing forks past it) and probes which processes of the uid
// are left (LiveProcesses); once everything was signalled what is left is
// only exiting, so the rounds are spaced by short sleeps. At the deadline
// it returns ErrStillExiting when every process left has SIGKILL pending
// (it runs no more of its code, it is only tearing down: the run is over,
// but the caller must not hand the uid to another episode, see
// Pool.Retire), and ErrProcessesLeft otherwise.
func KillUntilNone(uid int) error {
	if uid < 0 {
		return nil
	}
	deadline := time.Now().Add(KillDeadline)
	pause := killPollMin
	for {
		left, err := LiveProcesses(uid)
		if err != nil {
			return err
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			for _, pid := range left {
				if !dying(pid) {
					return fmt.Errorf("uid %d after %v: pid %d of %d alive (%v) has no SIGKILL pending: %w", uid, KillDeadline, pid, len(left), left, ErrProcessesLeft)
				}
			}
			return fmt.Errorf("uid %d after %v: %d processes (%v): %w", uid, KillDeadline, len(left), left, ErrStillExiting)
		}
		time.Sleep(pause)
		pause = min(2*pause, killPollMax)
	}
}

// ErrStillExiting is returned (wrapped) by KillUntilNone when processes of
// the uid were all sent SIGKILL but some had not finished exiting at the
// deadline. Such a process never returns to its own code; only the kernel
// is still freeing what it held.
var ErrStillExiting = errors.New("processes of the uid are still exiting")

// dying reports whether every thread of pid has SIGKILL pending (for the
// process, or for the thread) or is gone: it will not run its code again.
func dying(pid int) bool {
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return true // gone
	}
	const sigkill = uint64(1) << (unix.SIGKILL - 1)
	for _, task := range tasks {
		data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + task.Name() + "/status")
		if err != nil {
			continue
		}
		var pending uint64
		exited := false
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "State:"); ok {
				v = strings.TrimSpace(v)
				exited = strings.HasPrefix(v, "Z") || strings.HasPrefix(v, "X")
			}
			for _, key := range []string{"SigPnd:", "ShdPnd:"} {
				if v, ok := strings.CutPrefix(line, key); ok {
					n, _ := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
					pending |= n
				}
			}
		}
		if !exited && pending&sigkill == 0 {
			return false
		}
	}
	return true
}
