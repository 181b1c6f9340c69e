// Package bind binds a workbench to one task, so a workspace serves only
// its task whoever connects to it.
//
// A campaign workspace's workbench is bound by a file in its run
// directory (FileName beside the unix socket, /run/workbench/task in the
// container), which agentpen writes at bring-up with Write: the task id
// and a newline, mode 0400, owned by the daemon's user (container root),
// in a directory of mode 0700, so no sandbox uid can read it or learn
// where it points. The binding never travels in argv or the environment,
// which agent code can read: the workbench's command line names only the
// file's path (workbench serve --task-file). A bare workbench serve may
// be bound at start instead (--task, Fixed).
//
// A Binding read from a file is read lazily, at the first reset that
// finds it, so a workspace started unbound (a pool's) is bound when the
// file appears (written at claim time); until then every reset is
// refused (ErrUnbound). Once bound it stays bound: the file is never
// read again, so a changed or removed file changes nothing.
//
// The package does not decide what a reset does with the task: package
// episode asks Resolve for the task of each reset, and the servers turn
// ErrOtherTask and ErrUnbound into their protocols' refusals.
package bind

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// FileName is the bind file's name in a workspace's run directory.
const FileName = "task"

// FileMode is the bind file's mode: readable by its owner only.
const FileMode = 0o400

// maxFileBytes bounds the bind file: a task id of at most 128 bytes and
// its newline.
const maxFileBytes = 129

// Errors a reset is refused with, wrapped; the text of each is what a
// client is told.
var (
	// ErrOtherTask: the reset named a task other than the bound one.
	ErrOtherTask = errors.New("this workspace is bound to its task: a reset may not name another task_id (leave task_id out)")
	// ErrUnbound: the workbench must be bound (a campaign workspace) and
	// its bind file is not there yet.
	ErrUnbound = errors.New("this workspace is not bound to a task yet: every reset is refused until it is")
	// ErrBadFile: the bind file is there but not one the workbench
	// trusts (a link, not a regular file, another owner, readable by
	// others, too large, or not a task id).
	ErrBadFile = errors.New("the workspace's bind file is not valid")
)

// Binding is the task a workbench serves. The nil *Binding serves any
// task (a bare workbench serve); its methods are safe for concurrent use.
type Binding struct {
	path string // the bind file; "" for Fixed

	mu   sync.Mutex
	task string // "" until bound
}

// Fixed returns a Binding bound to task from the start.
func Fixed(task string) (*Binding, error) {
	if err := checkTask(task); err != nil {
		return nil, err
	}
	return &Binding{task: task}, nil
}

// File returns a Binding read from the file at path (absolute) at the
// first reset that finds it there.
func File(path string) (*Binding, error) {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return nil, fmt.Errorf("bind file %q: want an absolute, clean path", path)
	}
	return &Binding{path: path}, nil
}

// Path is the bind file's path ("" for a Fixed binding or nil).
func (b *Binding) Path() string {
	if b == nil {
		return ""
	}
	return b.path
}

// Bound reports whether b holds its task (a Fixed binding, or a file
// already read); it reads nothing.
func (b *Binding) Bound() bool {
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.task != ""
}

// Task returns the bound task, reading the bind file when b is not bound
// yet. The error wraps ErrUnbound (no file) or ErrBadFile.
func (b *Binding) Task() (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.task != "" {
		return b.task, nil
	}
	task, err := readFile(b.path)
	if err != nil {
		return "", err
	}
	b.task = task
	return task, nil
}

// Resolve returns the task a reset asking for requested ("" for none)
// plays: the bound task, or requested itself when b is nil. A request for
// another task is refused with ErrOtherTask, one while the file is
// missing with ErrUnbound.
func (b *Binding) Resolve(requested string) (string, error) {
	if b == nil {
		return requested, nil
	}
	task, err := b.Task()
	if err != nil {
		return "", err
	}
	if requested != "" && requested != task {
		return "", ErrOtherTask
	}
	return task, nil
}

// readFile reads a bind file without following a link in its last
// component, and trusts it only when it is a regular file owned by this
// process's user and readable by no one else.
func readFile(path string) (string, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return "", fmt.Errorf("%w (%s is missing)", ErrUnbound, path)
	}
	if err != nil {
		return "", fmt.Errorf("%w: open %s: %v", ErrBadFile, path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "", fmt.Errorf("%w: stat %s: %v", ErrBadFile, path, err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return "", fmt.Errorf("%w: %s is not a regular file", ErrBadFile, path)
	case int(st.Uid) != os.Geteuid():
		return "", fmt.Errorf("%w: %s is owned by uid %d, not %d", ErrBadFile, path, st.Uid, os.Geteuid())
	case st.Mode&0o077 != 0:
		return "", fmt.Errorf("%w: %s has mode %04o; others may read it", ErrBadFile, path, st.Mode&0o7777)
	case st.Size > maxFileBytes:
		return "", fmt.Errorf("%w: %s holds %d bytes", ErrBadFile, path, st.Size)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return "", fmt.Errorf("%w: read %s: %v", ErrBadFile, path, err)
	}
	task, err := Parse(b)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v", ErrBadFile, path, err)
	}
	return task, nil
}

// Parse reads a bind file's content: a task id and one newline.
func Parse(b []byte) (string, error) {
	s, ok := strings.CutSuffix(string(b), "\n")
	if !ok {
		return "", errors.New("want a task id and a newline")
	}
	if err := checkTask(s); err != nil {
		return "", err
	}
	return s, nil
}

// checkTask accepts what a task id may be: 1 to 128 bytes of printable
// ASCII without spaces (the catalogue decides whether it exists).
func checkTask(s string) error {
	if s == "" || len(s) > maxFileBytes-1 {
		return fmt.Errorf("task id of %d bytes: want 1 to %d", len(s), maxFileBytes-1)
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return fmt.Errorf("task id %q: want printable ASCII without spaces", s)
		}
	}
	return nil
}

// Write makes the bind file FileName in dir, holding task: created new
// (never over an existing file, nor through a link, and dir itself is not
// followed if it is a link), written, owned by uid:gid and mode 0400.
// The file appears whole or not at all: a workbench reading it at that
// moment (a pool's workspace, bound at claim time) sees no file or the
// finished one, never an empty file or root's. Nothing it made is left
// when it fails.
func Write(dir, task string, uid, gid int) (err error) {
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("bind file: open %s: %w", dir, err)
	}
	defer unix.Close(dfd)
	return WriteAt(dfd, dir, task, uid, gid)
}

// WriteAt is Write in the directory open as dfd (named dir in messages):
// for a caller that opened the run directory itself, relative to a
// descriptor it trusts, without following a link on the way.
//
// The file is made under a name of its own (a dot, the name and random
// hex), finished there, then linked to FileName, which fails when
// anything (a link included) is there already, and the temporary name is
// removed.
func WriteAt(dfd int, dir, task string, uid, gid int) (err error) {
	if err := checkTask(task); err != nil {
		return fmt.Errorf("bind file in %s: %w", dir, err)
	}
	path := filepath.Join(dir, FileName)
	tmp := "." + FileName + "." + rand.Text()
	fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, FileMode)
	if err != nil {
		return fmt.Errorf("bind file: create %s: %w", filepath.Join(dir, tmp), err)
	}
	defer unix.Unlinkat(dfd, tmp, 0)
	f := os.NewFile(uintptr(fd), filepath.Join(dir, tmp))
	if err := finish(f, task, uid, gid); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("bind file: %w", err)
	}
	if err := unix.Linkat(dfd, tmp, dfd, FileName, 0); err != nil {
		return fmt.Errorf("bind file: create %s: %w", path, err)
	}
	// No fsync: the workbench reads the file through the same page cache,
	// and a host crash ends the workspace with it (an fsync cost up to
	// milliseconds per workspace on a busy disk, on the bring-up's path).
	return nil
}

// finish writes task and its newline to the new file f, and gives it to
// uid:gid with mode FileMode.
func finish(f *os.File, task string, uid, gid int) error {
	if _, err := f.Write([]byte(task + "\n")); err != nil {
		return fmt.Errorf("bind file: %w", err)
	}
	fd := int(f.Fd())
	if err := unix.Fchown(fd, uid, gid); err != nil {
		return fmt.Errorf("bind file: chown %s: %w", f.Name(), err)
	}
	// The umask may have taken bits away, never added any; set it exactly.
	if err := unix.Fchmod(fd, FileMode); err != nil {
		return fmt.Errorf("bind file: chmod %s: %w", f.Name(), err)
	}
	return nil
}
