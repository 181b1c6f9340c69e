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
		if err := unix.Kill(pid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
			return len(pids), fmt.Errorf("kill %d of uid %d: %w", pid, uid, err)
		}
	}
	return len(pids), nil
}

// KillUntilNone kills the processes of uid until a scan of /proc finds
// none, so nothing forks past a single scan.
func KillUntilNone(uid int) error {
	if uid < 0 {
		return nil
	}
	for range killRounds {
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
