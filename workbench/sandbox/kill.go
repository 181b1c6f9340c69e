package sandbox

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Processes returns the pids of the live processes (not zombies, unless a
// thread other than the zombie leader still runs) whose real, effective,
// saved or filesystem uid is uid. It reads the status of every process on
// the machine; tests and diagnostics use it, as a view independent of
// signal permissions.
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
// whose effective uid is uid and real uid r.Killer() (no process may ever
// run as it: every such process is killed with each episode's processes;
// saved uid stays 0, so it can switch back; its effective capabilities
// are then empty, which is checked before the kill). The kernel then
// signals exactly the processes whose real or saved uid is uid or the
// killer, never root's nor another uid's nor this process, and does it
// atomically with respect to fork: no process of uid forks a successor
// the signal misses, and none of them runs its code again. The real uid
// is not uid itself: a thread whose real uid is uid could be sent SIGKILL
// (tgkill) by the uid's processes, which would end the server. Afterwards
// the thread's uids and capabilities are checked again; a thread that
// could not be restored dies instead of returning to the scheduler. It
// does not wait for the processes to finish exiting. The uid-only sandbox
// ends runs and episodes with it; in namespaces the kernel does the same
// when a run's PID namespace loses its init.
func KillAllOfUID(r Range, uid int) error {
	if !r.Contains(uid) {
		return fmt.Errorf("kill(-1) as uid %d: not a sandbox uid of %v", uid, r)
	}
	return onOwnThread(func(restored *bool) error {
		return asKillerLocked(r.Killer(), uid, restored, func() error {
			minus1 := -1
			_, _, errno := syscall.RawSyscall(unix.SYS_KILL, uintptr(minus1), uintptr(unix.SIGKILL), 0)
			if errno != 0 && errno != unix.ESRCH {
				return fmt.Errorf("kill(-1) as uid %d: %w", uid, errno)
			}
			return nil
		})
	})
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

// asKillerLocked runs fn with this thread's real uid killer and effective
// uid uid, only once the switch took and left no effective capability,
// then switches back to root and checks that. The caller must hold the OS
// thread locked.
func asKillerLocked(killer, uid int, restored *bool, fn func() error) (err error) {
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
