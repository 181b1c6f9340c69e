package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// PathError is a workspace path refused by SplitPath; Reason is the text
// shown to the agent.
type PathError struct {
	Path   string
	Reason string
}

func (e *PathError) Error() string { return e.Reason }

// Refusal reasons of SplitPath, as the seed words them.
const (
	ReasonPathEmpty    = "'path' must be a non-empty string without NUL characters"
	ReasonPathOutside  = "paths must stay inside the workspace (relative, no '..')"
	ReasonPathNoName   = "'path' must name a file, not the workspace itself"
	ReasonPathReserved = "that file is reserved"
)

// ReservedPrefixes are the name prefixes of the server's own files in a
// workspace (.run.py, .grade.py, .grade_tests.py); no path component may
// start with one.
var ReservedPrefixes = []string{".run", ".grade"}

// SplitPath checks a workspace path an agent gave and returns its
// components: relative, no "..", no NUL, at least one component, none
// starting with a reserved prefix. "." components and repeated slashes are
// dropped. Whether a component is a symlink is checked when the path is
// opened (OpenFile).
func SplitPath(rel string) ([]string, error) {
	if strings.TrimSpace(rel) == "" || strings.ContainsRune(rel, 0) {
		return nil, &PathError{rel, ReasonPathEmpty}
	}
	if strings.HasPrefix(rel, "/") {
		return nil, &PathError{rel, ReasonPathOutside}
	}
	var parts []string
	for _, p := range strings.Split(rel, "/") {
		switch p {
		case "", ".":
			continue
		case "..":
			return nil, &PathError{rel, ReasonPathOutside}
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return nil, &PathError{rel, ReasonPathNoName}
	}
	for _, p := range parts {
		for _, r := range ReservedPrefixes {
			if strings.HasPrefix(p, r) {
				return nil, &PathError{rel, ReasonPathReserved}
			}
		}
	}
	return parts, nil
}

// ErrSymlink is returned (wrapped) by OpenFile when a component of the
// path is a symlink.
var ErrSymlink = errors.New("the path passes through a symlink")

// ErrNotRegular is returned (wrapped) by OpenFile when the path names
// something other than a regular file.
var ErrNotRegular = errors.New("not a regular file")

// OpenFile opens the regular file root/parts... without following any
// symlink: each directory is opened from its parent's descriptor with
// O_NOFOLLOW, and the file with O_NOFOLLOW|O_NONBLOCK, so a FIFO cannot
// block the open; its type is read from the open descriptor. With mkdirs,
// missing directories are made (0755). Errors: ErrSymlink, ErrNotRegular,
// or an *os.PathError whose Op is "walk" (a directory on the way), "mkdir"
// or "open" (the file itself) and whose Err is the errno.
func OpenFile(root string, parts []string, flags int, perm uint32, mkdirs bool) (*os.File, error) {
	rel := strings.Join(parts, "/")
	dirFlags := unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Open(root, dirFlags, 0)
	if err != nil {
		return nil, &os.PathError{Op: "walk", Path: rel, Err: err}
	}
	for _, part := range parts[:len(parts)-1] {
		next, err := unix.Openat(fd, part, dirFlags, 0)
		if errors.Is(err, unix.ENOENT) && mkdirs {
			if err = unix.Mkdirat(fd, part, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
				unix.Close(fd)
				return nil, &os.PathError{Op: "mkdir", Path: rel, Err: err}
			}
			next, err = unix.Openat(fd, part, dirFlags, 0)
		}
		if err != nil {
			link := isSymlinkAt(fd, part)
			unix.Close(fd)
			if link {
				return nil, fmt.Errorf("%s: %w", rel, ErrSymlink)
			}
			op := "walk"
			if errors.Is(err, unix.ENOENT) {
				op = "open"
			}
			return nil, &os.PathError{Op: op, Path: rel, Err: err}
		}
		unix.Close(fd)
		fd = next
	}
	last := parts[len(parts)-1]
	ffd, err := unix.Openat(fd, last, flags|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, perm)
	if err != nil {
		link := isSymlinkAt(fd, last)
		unix.Close(fd)
		if link {
			return nil, fmt.Errorf("%s: %w", rel, ErrSymlink)
		}
		return nil, &os.PathError{Op: "open", Path: rel, Err: err}
	}
	unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(ffd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(ffd)
		return nil, fmt.Errorf("%s: %w", rel, ErrNotRegular)
	}
	// Blocking again, now that it is known to be a regular file.
	if err := unix.SetNonblock(ffd, false); err != nil {
		unix.Close(ffd)
		return nil, &os.PathError{Op: "open", Path: rel, Err: err}
	}
	return os.NewFile(uintptr(ffd), rel), nil
}

func isSymlinkAt(dirfd int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}
