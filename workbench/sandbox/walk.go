package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// WalkDepth is how many directories a walk holds open at once; a deeper
// directory is yielded but not entered (removeEntries moves it up instead).
const WalkDepth = 128

// maxPasses bounds removeEntries' passes over a tree.
const maxPasses = 1 << 16

// ErrTooDeep is returned (wrapped) by a strict walk on a tree deeper than
// WalkDepth.
var ErrTooDeep = errors.New("the tree is too deep to walk")

// Entry is one entry a walk yields: read with fstatat(AT_SYMLINK_NOFOLLOW)
// through DirFD, the open directory holding it, which is valid only during
// the callback.
type Entry struct {
	DirFD int
	Name  string
	// Rel is the path below the walk's root, "/"-separated.
	Rel  string
	Stat unix.Stat_t
	// Left is set on the second visit of a directory the walk entered,
	// after everything under it.
	Left bool
}

// IsDir reports whether the entry is a directory.
func (e *Entry) IsDir() bool { return e.Stat.Mode&unix.S_IFMT == unix.S_IFDIR }

// Depth is how many directories above the entry are below the root.
func (e *Entry) Depth() int { return strings.Count(e.Rel, "/") }

type frame struct {
	fd     int
	depth  int
	parent int
	entry  *Entry // nil for the root
	names  []string
}

// Walk visits every entry under the directory root, depth first, never
// following a symlink and keeping its own stack, so neither a path longer
// than PATH_MAX nor a tree thousands of levels deep stops it. fn sees each
// entry once with Left false; a directory descend accepts (it may change
// the directory's mode first) is then entered and seen again with Left
// true. When fn returns an error the walk stops with it. What cannot be
// read is skipped, or is an error when strict (a directory too deep to
// enter included).
func Walk(root string, descend func(e *Entry) bool, strict bool, fn func(e *Entry) error) error {
	const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	var stack []frame
	defer func() {
		for _, f := range stack {
			unix.Close(f.fd)
		}
	}()
	enter := func(fd, depth, parent int, e *Entry) error {
		names, err := readNames(fd)
		if err != nil {
			if strict {
				unix.Close(fd)
				return fmt.Errorf("list %s: %w", e.relOr(root), err)
			}
			names = nil
		}
		stack = append(stack, frame{fd: fd, depth: depth, parent: parent, entry: e, names: names})
		return nil
	}
	top, err := unix.Open(root, dirFlags, 0)
	if err != nil {
		if strict {
			return fmt.Errorf("open %s: %w", root, err)
		}
		return nil
	}
	if err := enter(top, 0, -1, nil); err != nil {
		return err
	}
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		if len(f.names) == 0 {
			stack = stack[:len(stack)-1]
			unix.Close(f.fd)
			if f.entry != nil {
				e := *f.entry
				e.DirFD, e.Left = f.parent, true
				if err := fn(&e); err != nil {
					return err
				}
			}
			continue
		}
		name := f.names[0]
		f.names = f.names[1:]
		e := &Entry{DirFD: f.fd, Name: name, Rel: name}
		if f.entry != nil {
			e.Rel = f.entry.Rel + "/" + name
		}
		if err := unix.Fstatat(f.fd, name, &e.Stat, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if strict {
				return fmt.Errorf("stat %s: %w", e.Rel, err)
			}
			continue
		}
		if err := fn(e); err != nil {
			return err
		}
		if !e.IsDir() || !descend(e) {
			continue
		}
		if f.depth+1 >= WalkDepth {
			if strict {
				return fmt.Errorf("%s: %w", e.Rel, ErrTooDeep)
			}
			continue
		}
		child, err := unix.Openat(f.fd, name, dirFlags, 0)
		if err != nil {
			if strict {
				return fmt.Errorf("open %s: %w", e.Rel, err)
			}
			continue
		}
		if err := enter(child, f.depth+1, f.fd, e); err != nil {
			return err
		}
	}
	return nil
}

func (e *Entry) relOr(root string) string {
	if e == nil {
		return root
	}
	return e.Rel
}

// readNames lists the directory open at fd, sorted, without moving fd's
// own offset.
func readNames(fd int) ([]string, error) {
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	// A dup shares the offset; start from the beginning.
	if _, err := unix.Seek(dup, 0, 0); err != nil {
		unix.Close(dup)
		return nil, err
	}
	f := os.NewFile(uintptr(dup), "dir")
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	return names, nil
}

// removeEntries removes every entry under the directory root. A directory
// gets mode 0700 before it is entered, so a mode the agent took away keeps
// nothing. A directory too deep to enter is moved up into root and
// removed on a later pass, so no depth of tree outlasts it.
func removeEntries(root string) error {
	rootFD, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil // nothing to remove
	}
	defer unix.Close(rootFD)
	descend := func(e *Entry) bool {
		chmodDirNoFollow(e.DirFD, e.Name, 0o700)
		return true
	}
	for range maxPasses {
		moved := false
		err := Walk(root, descend, false, func(e *Entry) error {
			switch {
			case e.Left:
				unix.Unlinkat(e.DirFD, e.Name, unix.AT_REMOVEDIR)
			case !e.IsDir():
				unix.Unlinkat(e.DirFD, e.Name, 0)
			case e.Depth()+1 >= WalkDepth:
				if unix.Renameat(e.DirFD, e.Name, rootFD, ".wb-deep-"+randomHex()) == nil {
					moved = true
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		if !moved {
			return nil
		}
	}
	return fmt.Errorf("remove under %s: still moving deep directories after %d passes", root, maxPasses)
}

// chmodDirNoFollow sets the mode of the directory name in dirfd, never
// through a symlink: the agent may have swapped the directory for a link
// since the walk read it. fchmodat2(AT_SYMLINK_NOFOLLOW) (Linux 6.6)
// refuses a link; where it is missing or refuses (a link, or a kernel
// without it), the directory is opened O_PATH|O_NOFOLLOW|O_DIRECTORY, which
// fails on a link, and its mode set through /proc/thread-self/fd. Failing
// is harmless: the removal then finds less to remove.
func chmodDirNoFollow(dirfd int, name string, mode uint32) {
	err := unix.Fchmodat(dirfd, name, mode, unix.AT_SYMLINK_NOFOLLOW)
	if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOSYS) {
		return
	}
	chmodDirOPath(dirfd, name, mode)
}

// chmodDirOPath is chmodDirNoFollow without fchmodat2.
func chmodDirOPath(dirfd int, name string, mode uint32) {
	fd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	unix.Chmod("/proc/thread-self/fd/"+strconv.Itoa(fd), mode)
}

// EmptyDir gives the directory dir mode 0700 and removes everything in it.
// A dir that is missing or not a directory is left alone.
func EmptyDir(dir string) error {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil
	}
	unix.Chmod(dir, 0o700)
	return removeEntries(dir)
}

// RemoveTree removes path: a directory with everything in it, even after
// agent code took the permissions away from its own directories, or
// whatever else path is (a symlink is removed, never followed). A missing
// path is not an error.
func RemoveTree(path string) error {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("remove %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		if err := unix.Unlink(path); err != nil {
			return fmt.Errorf("remove %s: %w", path, err)
		}
		return nil
	}
	if err := EmptyDir(path); err != nil {
		return err
	}
	if err := unix.Rmdir(path); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}

func randomHex() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
