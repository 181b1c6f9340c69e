package sandbox

import (
	"errors"
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// ErrExposed is returned (wrapped) by CheckUnexposed for a file the
// sandbox uids could read or execute.
var ErrExposed = errors.New("readable or executable by the sandbox uids")

// CheckUnexposed returns an error wrapping ErrExposed when a sandbox uid
// could read or execute the file at path (symlinks followed), saying how;
// mounts is the mount table (ParseMountinfo). A sandbox uid has no
// supplementary groups and a gid equal to its uid, so it reaches a file
// through its owner bits when it owns it, its group bits when the group is
// a sandbox gid, and its other bits otherwise. A file whose bits let it
// through is still out of reach when a directory on its path does not let
// the uid pass, provided that path is the only one: the file has one link
// and its file system is mounted once. A POSIX ACL, on the file or on a
// directory counted on to close the path, is taken to let the uid
// through.
func CheckUnexposed(path string, mounts []Mount) error {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fmt.Errorf("check %s: %w", path, err)
	}
	var st unix.Stat_t
	if err := unix.Stat(real, &st); err != nil {
		return fmt.Errorf("check %s: %w", path, err)
	}
	exposed := func(why string, args ...any) error {
		return fmt.Errorf("%s: %w: %s", path, ErrExposed, fmt.Sprintf(why, args...))
	}
	mode := st.Mode & 0o7777
	switch {
	case IsSandboxUID(int(st.Uid)):
		return exposed("owned by sandbox uid %d", st.Uid)
	case hasACL(real):
		return exposed("it has a POSIX ACL")
	case !uidMay(&st, 0o4|0o1):
		return nil
	case st.Nlink > 1:
		return exposed("mode %04o, and %d hard links: another path may lead to it", mode, st.Nlink)
	case mountedTwice(&st, mounts):
		return exposed("mode %04o, and its file system is mounted more than once: another path may lead to it", mode)
	}
	for d := filepath.Dir(real); ; d = filepath.Dir(d) {
		var dst unix.Stat_t
		if err := unix.Stat(d, &dst); err != nil {
			return fmt.Errorf("check %s: %w", path, err)
		}
		if !IsSandboxUID(int(dst.Uid)) && !uidMay(&dst, 0o1) && !hasACL(d) {
			return nil // the uid cannot pass d
		}
		if d == filepath.Dir(d) {
			return exposed("mode %04o, and every directory above it lets the sandbox uids pass", mode)
		}
	}
}

// uidMay reports whether a sandbox uid that does not own st gets any of
// the permission bits want (r=4, w=2, x=1) through its mode.
func uidMay(st *unix.Stat_t, want uint32) bool {
	if IsSandboxUID(int(st.Gid)) && (st.Mode>>3)&want != 0 {
		return true
	}
	return st.Mode&want != 0
}

func hasACL(path string) bool {
	_, err := unix.Getxattr(path, "system.posix_acl_access", nil)
	return err == nil
}

// mountedTwice reports whether the file system holding st appears at more
// than one place of the mount table (a bind mount, or the same device
// mounted again).
func mountedTwice(st *unix.Stat_t, mounts []Mount) bool {
	n := 0
	for _, m := range mounts {
		if m.Major == unix.Major(st.Dev) && m.Minor == unix.Minor(st.Dev) {
			n++
		}
	}
	return n > 1
}
