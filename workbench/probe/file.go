package probe

import (
	"errors"
	"fmt"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// ProbeFile looks at path as root (lstat: a link is not followed) and
// tries to open it for reading as uid as (on a throwaway thread whose
// filesystem ids are the uid's; nothing is read): the outcome is
// OutcomeDenied, OutcomeReadable, OutcomeNotFound or OutcomeError. f is
// nil when root finds nothing there.
func ProbeFile(path string, as int) (outcome, msg string, f *File) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err == nil {
		f = &File{Regular: st.Mode&unix.S_IFMT == unix.S_IFREG, Mode: fmt.Sprintf("%04o", st.Mode&0o7777), UID: int(st.Uid)}
	} else if !errors.Is(err, unix.ENOENT) {
		return OutcomeError, "lstat as root: " + err.Error(), nil
	}
	open := func() {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		switch {
		case err == nil:
			unix.Close(fd)
			outcome = OutcomeReadable
		case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
			outcome, msg = OutcomeDenied, err.Error()
		case errors.Is(err, syscall.ENOENT):
			outcome, msg = OutcomeNotFound, err.Error()
		default:
			outcome, msg = OutcomeError, err.Error()
		}
	}
	if as <= 0 {
		open()
		return outcome, msg, f
	}
	if err := asUID(as, open); err != nil {
		return OutcomeError, err.Error(), f
	}
	if outcome == OutcomeDenied {
		// A refusal is no proof when the uid, free to change the mode of
		// what it owns, could read the file all the same.
		if why, ok := ownerCouldRead(path, as); ok {
			return OutcomeReadable, fmt.Sprintf("refused now, but uid %d %s", as, why), f
		}
	}
	return outcome, msg, f
}

// ownerCouldRead reports whether uid, which may change the mode of what
// it owns, could read the file at path (lstat as root, links not
// followed): it owns the file, or the file's bits let it read (as others,
// or as its group when the file's gid is the uid) and every directory
// above is its own or lets it pass. It says how.
func ownerCouldRead(path string, uid int) (string, bool) {
	var st unix.Stat_t
	if unix.Lstat(path, &st) != nil {
		return "", false
	}
	if int(st.Uid) == uid {
		return "owns " + path + " and may change its mode", true
	}
	lets := func(st *unix.Stat_t, bit uint32) bool {
		return st.Mode&bit != 0 || int(st.Gid) == uid && st.Mode&(bit<<3) != 0
	}
	if !lets(&st, 0o4) {
		return "", false
	}
	owned := ""
	for d := filepath.Dir(filepath.Clean(path)); ; d = filepath.Dir(d) {
		var dst unix.Stat_t
		if unix.Lstat(d, &dst) != nil {
			return "", false
		}
		switch {
		case int(dst.Uid) == uid:
			owned = d
		case !lets(&dst, 0o1):
			return "", false
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	if owned == "" {
		return "", false
	}
	return "owns " + owned + " above it and may open it to pass", true
}

// owner is the uid whose ownership of a file makes a refusal to it no
// proof: the uid a probe runs as, none (-1) for root, who is refused
// nothing.
func owner(as int) int {
	if as <= 0 {
		return -1
	}
	return as
}
