package sandbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	"syscall"
)

// killRounds bounds KillUntilNone. With RLIMIT_NPROC a fork bomb dies in a
// few rounds; a scan that still finds processes after this many is an
// error.
const killRounds = 200

// ErrProcessesLeft is returned (wrapped) by KillUntilNone when processes
// of the uid survived every round.
var ErrProcessesLeft = errors.New("processes of the uid survived the kill")

// Processes returns the pids of the live processes (not zombies, unless a
// thread other than the zombie leader still runs) whose real, effective,
// saved or filesystem uid is uid.
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

// KillUID sends SIGKILL to every live process of uid (see Processes) and
// returns how many it found. A process that exited meanwhile counts as
// killed.
func KillUID(uid int) (int, error) {
	pids, err := Processes(uid)
	if err != nil {
		return 0, err
	}
	for _, pid := range pids {
		if err := killPid(pid, uid); err != nil {
			return len(pids), fmt.Errorf("kill %d of uid %d: %w", pid, uid, err)
		}
	}
	return len(pids), nil
}

// killPid sends SIGKILL to the process pid if it is still a live process
// of uid. The scan read its status before, and meanwhile the process may
// have exited and its pid been reused (even by a thread of this server:
// kill(2) of a thread id signals its whole process), so it is pinned with
// a pidfd, its status read again, and the signal sent through the pidfd,
// which never reaches a later process with the same pid.
func killPid(pid, uid int) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil // gone
	}
	if err != nil {
		return fmt.Errorf("pidfd_open: %w", err)
	}
	defer unix.Close(fd)
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return nil // gone since the scan
	}
	if live, match := statusMatches(data, uid); !live || !match {
		return nil // not (or no longer) a live process of uid
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return err
	}
	return nil
}

// KillerRealUID is the real uid of the thread that sends kill(-1) for
// KillAllOfUID. No process may ever run as it: every such process is
// killed with each episode's processes.
const KillerRealUID = UIDBase + UIDSlots

// KillAllOfUID sends SIGKILL with kill(-1) from an OS thread of its own
// whose effective uid is uid and real uid KillerRealUID (saved uid stays
// 0, so it can switch back; its effective capabilities are then empty,
// which is checked before the kill). The kernel then signals exactly the
// processes whose real or saved uid is uid or KillerRealUID, never root's
// nor another uid's nor this process, and does it atomically with respect
// to fork: no process of uid forks a successor the signal misses. The
// real uid is not uid itself: a thread whose real uid is uid could be sent
// SIGKILL (tgkill) by the uid's processes, which would end the server.
// Afterwards the thread's uids and capabilities are checked in
// /proc/thread-self/status; a thread that could not be restored dies
// instead of returning to the scheduler.
func KillAllOfUID(uid int) error {
	if uid <= 0 || uid == KillerRealUID {
		return fmt.Errorf("kill(-1) as uid %d: not a sandbox uid", uid)
	}
	return onOwnThread(func(restored *bool) error {
		return asKillerLocked(uid, restored, func() error {
			minus1 := -1
			_, _, errno := syscall.RawSyscall(unix.SYS_KILL, uintptr(minus1), uintptr(unix.SIGKILL), 0)
			if errno != 0 && errno != unix.ESRCH {
				return fmt.Errorf("kill(-1) as uid %d: %w", uid, errno)
			}
			return nil
		})
	})
}

// threadIDs returns the Uid and CapEff lines of this thread's status.
func threadIDs() (uids, capEff string, err error) {
	data, err := os.ReadFile("/proc/thread-self/status")
	if err != nil {
		return "", "", err
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "Uid:"); ok {
			uids = strings.Join(strings.Fields(v), " ")
		}
		if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
			capEff = strings.TrimSpace(v)
		}
	}
	if uids == "" || capEff == "" {
		return "", "", fmt.Errorf("/proc/thread-self/status lacks Uid or CapEff")
	}
	return uids, capEff, nil
}

// asKillerLocked runs fn with this thread's real uid KillerRealUID and
// effective uid uid, only once the switch took and left no effective
// capability, then switches back to root and checks that. The caller must
// hold the OS thread locked.
func asKillerLocked(uid int, restored *bool, fn func() error) (err error) {
	uidsBefore, capsBefore, err := threadIDs()
	if err != nil {
		*restored = true // nothing changed yet
		return fmt.Errorf("kill as uid %d: %w", uid, err)
	}
	if uidsBefore != "0 0 0 0" {
		*restored = true
		return fmt.Errorf("kill as uid %d: thread uids %q, want root", uid, uidsBefore)
	}
	keep := ^uintptr(0) // -1: leave that id as it is
	defer func() {
		syscall.RawSyscall(unix.SYS_SETRESUID, 0, 0, keep)
		uids, caps, idErr := threadIDs()
		*restored = idErr == nil && uids == uidsBefore && caps == capsBefore
		if !*restored && err == nil {
			err = fmt.Errorf("kill as uid %d: thread not restored (uids %q caps %q, want %q %q; %v)", uid, uids, caps, uidsBefore, capsBefore, idErr)
		}
	}()
	if _, _, errno := syscall.RawSyscall(unix.SYS_SETRESUID, uintptr(KillerRealUID), uintptr(uid), keep); errno != 0 {
		return fmt.Errorf("kill as uid %d: setresuid: %w", uid, errno)
	}
	// With CAP_KILL still effective kill(-1) would reach every process.
	uids, caps, err := threadIDs()
	want := fmt.Sprintf("%d %d 0 %d", KillerRealUID, uid, uid)
	if err != nil || uids != want || caps != "0000000000000000" {
		return fmt.Errorf("kill as uid %d: switched thread has uids %q caps %q (want %q, none): %v", uid, uids, caps, want, err)
	}
	return fn()
}

// KillUntilNone kills the processes of uid until a scan of /proc finds
// none, so nothing forks past a single scan: each round sends kill(-1) as
// the uid (KillAllOfUID), which no fork escapes, then SIGKILL to every
// process the scan finds.
func KillUntilNone(uid int) error {
	if uid < 0 {
		return nil
	}
	for range killRounds {
		if err := KillAllOfUID(uid); err != nil {
			return err
		}
		n, err := KillUID(uid)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
	}
	return fmt.Errorf("uid %d after %d rounds: %w", uid, killRounds, ErrProcessesLeft)
}
