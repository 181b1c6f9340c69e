package probe

import (
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// File is what a file probe found of its path as root: whether it is a
// regular file, its permission bits (octal, "0400") and its owner. It
// never holds the file's content.
type File struct {
	Regular bool   `json:"regular"`
	Mode    string `json:"mode"`
	UID     int    `json:"uid"`
}

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
	return outcome, msg, f
}
