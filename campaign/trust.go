package campaign

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// ErrUntrusted is the kind of every *TrustError: state (a state root, a
// campaign directory, a journal) that another user owns or can write.
// agentpen acts on what its state says (it removes the ids a journal
// names), so it reads no state another user could have written.
var ErrUntrusted = errors.New("untrusted state")

// TrustError is a path of agentpen's state that it refuses: what it is
// (What: "journal", "campaign directory", "state root"), why, and the
// command that fixes it.
type TrustError struct {
	What string
	Path string
	Why  string
	Fix  string
}

func (e *TrustError) Error() string {
	return fmt.Sprintf("%s %s %s; agentpen trusts no state another user can write; %s", e.What, e.Path, e.Why, e.Fix)
}

// Unwrap makes every TrustError match ErrUntrusted.
func (e *TrustError) Unwrap() error { return ErrUntrusted }

// CheckPrivate checks that fi (what, at path) can be trusted as this
// process's state: owned by its effective uid (or by root), not writable by
// group or others, and of the kind wanted (a directory when dir, else a
// regular file; never a symbolic link). The error is a *TrustError naming
// the path and the fix.
func CheckPrivate(what, path string, fi fs.FileInfo, dir bool) error {
	refuse := func(why, fix string) error { return &TrustError{What: what, Path: path, Why: why, Fix: fix} }
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return refuse("is a symbolic link", "agentpen makes none: remove it, or point --state-root at the real directory")
	case dir && !fi.IsDir():
		return refuse("is not a directory", "remove it, or name another --state-root")
	case !dir && !fi.Mode().IsRegular():
		return refuse("is not a regular file", "remove it")
	}
	euid := os.Geteuid()
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != euid && st.Uid != 0 {
		return refuse(fmt.Sprintf("is owned by uid %d, not by this user (uid %d)", st.Uid, euid),
			fmt.Sprintf("if it is yours: chown %d %s; otherwise leave it and name another --state-root", euid, path))
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		mode := "0600"
		if dir {
			mode = "0700"
		}
		return refuse(fmt.Sprintf("has mode %04o: other users can write it", perm), "if it is yours: chmod "+mode+" "+path)
	}
	return nil
}
