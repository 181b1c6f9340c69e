// Package beneath opens files under a directory agentpen trusts without
// following a symbolic link anywhere below it.
//
// agentpen runs as root and keeps its state, its locks and the run
// directories of workspaces in directories; some of those directories, or
// their neighbours, belong to less trusted users (the rootless daemon's
// user owns its runtime directory; a container escape yields that user).
// A path opened the usual way follows every symbolic link on it, so a link
// planted as a lock file's name would make root create, truncate or write
// a file of the planter's choosing. A Dir is an open directory: every name
// below it is resolved by the kernel relative to its descriptor with
// openat2(2)'s RESOLVE_BENEATH and RESOLVE_NO_SYMLINKS (and
// RESOLVE_NO_MAGICLINKS), so a link anywhere on the way, or a ".." that
// climbs out, is refused (ELOOP, EXDEV) rather than followed.
//
// What is trusted is the Dir itself: Open follows the path its caller
// gives (the operator's choice) and then checks the directory it opened
// with the caller's rule (Trust). Nothing in this package creates a file
// in place of one that exists unless asked to (Create is O_EXCL), and
// nothing truncates.
//
// Linux only (openat2 needs Linux 5.6).
package beneath

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// resolve is how every name below a Dir is resolved.
const resolve = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// ErrLink is the kind of error (wrapped) for a name below a Dir that is,
// or passes through, a symbolic link (or climbs out of the Dir).
var ErrLink = errors.New("a symbolic link or a path out of the directory, not followed")

// Dir is an open directory. Its methods take names relative to it
// ("campaigns/k/journal.jsonl"); none follows a symbolic link. A Dir is
// safe for concurrent use; Close it when done.
type Dir struct {
	f    *os.File
	path string
}

// Open opens the directory at path (following links in path itself: the
// caller names it) and returns it after check, when check is not nil,
// accepts what fstat says of it. The check runs on the open descriptor,
// so what it approves is what the Dir is.
func Open(path string, check func(fs.FileInfo) error) (*Dir, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	d := &Dir{f: f, path: path}
	if check != nil {
		fi, err := f.Stat()
		if err == nil {
			err = check(fi)
		}
		if err != nil {
			f.Close()
			return nil, err
		}
	}
	return d, nil
}

// Path returns the path the Dir was opened by (or Sub's path under it),
// for messages.
func (d *Dir) Path() string { return d.path }

// Join returns the path of name below the Dir, for messages.
func (d *Dir) Join(name string) string { return filepath.Join(d.path, name) }

// Fd returns the directory's descriptor (for flock and the *at calls).
func (d *Dir) Fd() int { return int(d.f.Fd()) }

// Close closes the directory.
func (d *Dir) Close() error { return d.f.Close() }

// Stat returns the directory's own FileInfo.
func (d *Dir) Stat() (fs.FileInfo, error) { return d.f.Stat() }

func (d *Dir) openat2(name string, flags int, mode uint32) (*os.File, error) {
	if filepath.IsAbs(name) {
		return nil, &os.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w: an absolute name", ErrLink)}
	}
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC | unix.O_NOFOLLOW), Mode: uint64(mode), Resolve: resolve}
	for {
		fd, err := unix.Openat2(d.Fd(), name, &how)
		switch {
		case err == nil:
			return os.NewFile(uintptr(fd), d.Join(name)), nil
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.EAGAIN):
			continue
		case errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV):
			return nil, &os.PathError{Op: "open", Path: d.Join(name), Err: fmt.Errorf("%w (%v)", ErrLink, err)}
		case errors.Is(err, unix.ENOTDIR):
			// A directory was wanted (on the way, or O_DIRECTORY) and a
			// file or a link (O_NOFOLLOW) is there: not followed either.
			return nil, &os.PathError{Op: "open", Path: d.Join(name), Err: fmt.Errorf("%w (%v: a file or a link where a directory belongs)", ErrLink, err)}
		}
		return nil, &os.PathError{Op: "open", Path: d.Join(name), Err: err}
	}
}

// OpenFile opens name below the Dir with flag (os.O_RDONLY, os.O_RDWR,
// os.O_APPEND, os.O_CREATE ...) and perm for a file it creates. O_TRUNC
// is refused: nothing here empties a file in place.
func (d *Dir) OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	if flag&os.O_TRUNC != 0 {
		return nil, &os.PathError{Op: "open", Path: d.Join(name), Err: errors.New("beneath: O_TRUNC refused")}
	}
	return d.openat2(name, flag, uint32(perm.Perm()))
}

// Open opens name below the Dir for reading.
func (d *Dir) Open(name string) (*os.File, error) { return d.OpenFile(name, os.O_RDONLY, 0) }

// Create creates name below the Dir, which must not exist (O_EXCL), for
// writing with perm.
func (d *Dir) Create(name string, perm fs.FileMode) (*os.File, error) {
	return d.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
}

// ReadFile reads name below the Dir, at most max bytes (more is an
// error: a file agentpen wrote is never that large).
func (d *Dir) ReadFile(name string, max int64) ([]byte, error) {
	f, err := d.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &os.PathError{Op: "read", Path: d.Join(name), Err: errors.New("not a regular file")}
	}
	if fi.Size() > max {
		return nil, &os.PathError{Op: "read", Path: d.Join(name), Err: fmt.Errorf("%d bytes, more than the %d expected", fi.Size(), max)}
	}
	b := make([]byte, fi.Size())
	n, err := f.ReadAt(b, 0)
	if err != nil && n != len(b) {
		return nil, &os.PathError{Op: "read", Path: d.Join(name), Err: err}
	}
	return b, nil
}

// WriteNew writes data to name below the Dir, which must not exist, with
// perm, and syncs the file and the directory that holds it: once it
// returns, the file is whole on disk. On error the partial file is
// removed.
func (d *Dir) WriteNew(name string, data []byte, perm fs.FileMode) error {
	f, err := d.Create(name, perm)
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		d.Remove(name)
		return fmt.Errorf("write %s: %w", d.Join(name), err)
	}
	return d.SyncParent(name)
}

// SyncParent syncs the directory holding name.
func (d *Dir) SyncParent(name string) error {
	parent := filepath.Dir(name)
	if parent == "." {
		return d.f.Sync()
	}
	p, err := d.OpenDir(parent)
	if err != nil {
		return err
	}
	defer p.Close()
	return p.f.Sync()
}

// OpenDir opens the directory name below the Dir as a Dir of its own.
func (d *Dir) OpenDir(name string) (*Dir, error) {
	f, err := d.openat2(name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	return &Dir{f: f, path: d.Join(name)}, nil
}

// OpenDirAs is OpenDir, with the Dir named shown in messages: the path a
// rename the caller makes next puts it at (a directory made under a
// temporary name and renamed into place).
func (d *Dir) OpenDirAs(name, shown string) (*Dir, error) {
	sub, err := d.OpenDir(name)
	if err != nil {
		return nil, err
	}
	sub.path = shown
	return sub, nil
}

// Rename renames oldname below the Dir to newname below it, atomically
// and never replacing an existing newname (renameat2's
// RENAME_NOREPLACE: fs.ErrExist), following neither.
func (d *Dir) Rename(oldname, newname string) error {
	op, ob, err := d.parentOf(oldname)
	if err != nil {
		return err
	}
	if op != d {
		defer op.Close()
	}
	np, nb, err := d.parentOf(newname)
	if err != nil {
		return err
	}
	if np != d {
		defer np.Close()
	}
	if err := unix.Renameat2(op.Fd(), ob, np.Fd(), nb, unix.RENAME_NOREPLACE); err != nil {
		return &os.LinkError{Op: "rename", Old: d.Join(oldname), New: d.Join(newname), Err: err}
	}
	return nil
}

// Mkdir makes the directory name below the Dir with perm (not changed by
// the umask: it is set on the new directory's descriptor). An existing
// directory is an error wrapping fs.ErrExist.
func (d *Dir) Mkdir(name string, perm fs.FileMode) error {
	parent, base, err := d.parentOf(name)
	if err != nil {
		return err
	}
	if parent != d {
		defer parent.Close()
	}
	if err := unix.Mkdirat(parent.Fd(), base, uint32(perm.Perm())); err != nil {
		return &os.PathError{Op: "mkdir", Path: d.Join(name), Err: err}
	}
	sub, err := parent.OpenDir(base)
	if err != nil {
		return err
	}
	defer sub.Close()
	if err := sub.f.Chmod(perm.Perm()); err != nil {
		return err
	}
	return nil
}

// MkdirAll makes name below the Dir and every missing directory on the
// way (each with perm); existing directories are kept as they are. It
// returns the directory, open.
func (d *Dir) MkdirAll(name string, perm fs.FileMode) (*Dir, error) {
	if err := d.Mkdir(name, perm); err != nil && !errors.Is(err, fs.ErrExist) {
		if !errors.Is(err, fs.ErrNotExist) || filepath.Dir(name) == "." {
			return nil, err
		}
		p, perr := d.MkdirAll(filepath.Dir(name), perm)
		if perr != nil {
			return nil, perr
		}
		p.Close()
		if err := d.Mkdir(name, perm); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
	}
	return d.OpenDir(name)
}

// parentOf returns the Dir holding name (d itself for a name without a
// slash, else a Dir the caller closes) and name's last element.
func (d *Dir) parentOf(name string) (*Dir, string, error) {
	dir, base := filepath.Split(filepath.Clean(name))
	if base == "" || base == "." || base == ".." || filepath.IsAbs(name) {
		return nil, "", &os.PathError{Op: "open", Path: d.Join(name), Err: fmt.Errorf("%w: not a name below the directory", ErrLink)}
	}
	if dir == "" {
		return d, base, nil
	}
	p, err := d.OpenDir(filepath.Clean(dir))
	if err != nil {
		return nil, "", err
	}
	return p, base, nil
}

// Lstat returns what name below the Dir is, without following it when it
// is a link (fstatat with AT_SYMLINK_NOFOLLOW, its parent opened without
// following any).
func (d *Dir) Lstat(name string) (fs.FileInfo, error) {
	parent, base, err := d.parentOf(name)
	if err != nil {
		return nil, err
	}
	if parent != d {
		defer parent.Close()
	}
	var st unix.Stat_t
	if err := unix.Fstatat(parent.Fd(), base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, &os.PathError{Op: "lstat", Path: d.Join(name), Err: err}
	}
	return fileInfo(base, &st), nil
}

// Remove removes the file or empty directory name below the Dir (a link
// is removed, never followed).
func (d *Dir) Remove(name string) error {
	parent, base, err := d.parentOf(name)
	if err != nil {
		return err
	}
	if parent != d {
		defer parent.Close()
	}
	err = unix.Unlinkat(parent.Fd(), base, 0)
	if errors.Is(err, unix.EISDIR) {
		err = unix.Unlinkat(parent.Fd(), base, unix.AT_REMOVEDIR)
	}
	if err != nil {
		return &os.PathError{Op: "remove", Path: d.Join(name), Err: err}
	}
	return nil
}

// ReadDir lists the directory name below the Dir ("." for the Dir
// itself), sorted by name; entries are not followed.
func (d *Dir) ReadDir(name string) ([]fs.DirEntry, error) {
	sub, err := d.OpenDir(name)
	if err != nil {
		return nil, err
	}
	defer sub.Close()
	return sub.f.ReadDir(-1)
}

// Chown sets the owner of name below the Dir (not following it).
func (d *Dir) Chown(name string, uid, gid int) error {
	parent, base, err := d.parentOf(name)
	if err != nil {
		return err
	}
	if parent != d {
		defer parent.Close()
	}
	if err := unix.Fchownat(parent.Fd(), base, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &os.PathError{Op: "chown", Path: d.Join(name), Err: err}
	}
	return nil
}

// Link makes newname below the Dir a hard link to oldname below it, never
// replacing an existing newname (fs.ErrExist) and following neither.
func (d *Dir) Link(oldname, newname string) error {
	op, ob, err := d.parentOf(oldname)
	if err != nil {
		return err
	}
	if op != d {
		defer op.Close()
	}
	np, nb, err := d.parentOf(newname)
	if err != nil {
		return err
	}
	if np != d {
		defer np.Close()
	}
	if err := unix.Linkat(op.Fd(), ob, np.Fd(), nb, 0); err != nil {
		return &os.LinkError{Op: "link", Old: d.Join(oldname), New: d.Join(newname), Err: err}
	}
	return nil
}

// RemoveAll removes name below the Dir and everything in it, never
// following a link: a link met on the way is removed itself. A name that
// does not exist is no error.
func (d *Dir) RemoveAll(name string) error {
	fi, err := d.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		sub, err := d.OpenDir(name)
		if err != nil {
			return err
		}
		entries, err := sub.f.ReadDir(-1)
		if err != nil {
			sub.Close()
			return err
		}
		var errs []error
		for _, e := range entries {
			errs = append(errs, sub.RemoveAll(e.Name()))
		}
		sub.Close()
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
	if err := d.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
