package sandbox

import (
	"errors"

	"golang.org/x/sys/unix"
)

// RemoveSharedTmp removes every entry uid owns, at any depth, under each
// of dirs (Sweep passes the shared places' Dirs), working as the uid
// (AsUID); it never follows a symlink. Only
// directories the uid could have written in are entered, its own and
// world-writable ones, so no other episode's files are touched. A
// directory of the uid's that still holds another uid's files is handed to
// root as a sticky, world-writable directory (mode 1777), so the other uid
// keeps its files and the uid's next holder inherits nothing.
func RemoveSharedTmp(uid int, dirs []string) error {
	if uid < 0 || len(dirs) == 0 {
		return nil
	}
	owned := func(st *unix.Stat_t) bool { return int(st.Uid) == uid }
	enter := func(st *unix.Stat_t) bool { return int(st.Uid) == uid || st.Mode&unix.S_IWOTH != 0 }
	var kept []int
	defer func() {
		for _, fd := range kept {
			unix.Close(fd)
		}
	}()
	keep := func(dirfd int, name string) {
		fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == nil {
			kept = append(kept, fd)
		}
	}
	var errs []error
	err := AsUID(uid, func() error {
		for _, d := range dirs {
			if err := RemoveEntries(d, owned, enter, keep); err != nil {
				errs = append(errs, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Back as root: chown needs CAP_CHOWN, and root owns the directory once
	// it is chowned, so the chmod needs no FOWNER.
	for _, fd := range kept {
		if err := unix.Fchown(fd, 0, 0); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := unix.Fchmod(fd, 0o1777); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
