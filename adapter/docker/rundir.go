package docker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/agentpen/agentpen/internal/beneath"
	"github.com/agentpen/agentpen/workbench/bind"
)

// runBase is where workspaces' /run/workbench directories live: beside the
// daemon's socket (its real path: every spelling of DOCKER_HOST that
// reaches it through symbolic links gets the same directory), in the
// rootless user's runtime directory, which the daemon can always reach for
// bind mounts (a root-only state root cannot). A bring-up's are in
// runBase/i-<nonce>/<agent id>.
func (d *Driver) runBase() string {
	return filepath.Join(filepath.Dir(d.RealSocketPath()), "agentpen")
}

// runtimeDir opens the directory the run directories live in: the daemon
// user's runtime directory (its socket's real directory). That user can
// write it, and a container escape yields that user: every name below it
// is made, observed and removed relative to this descriptor, never
// following a link (internal/beneath), so nothing planted there sends
// root to a file elsewhere. The caller closes it.
func (d *Driver) runtimeDir() (*beneath.Dir, error) {
	rt, err := beneath.Open(filepath.Dir(d.RealSocketPath()), nil)
	if err != nil {
		return nil, fmt.Errorf("the daemon's runtime directory: %w", err)
	}
	return rt, nil
}

// runRel is path (a run directory, or a directory of one) relative to the
// runtime directory; an error for a path that is not below it.
func (d *Driver) runRel(path string) (string, error) {
	rel, err := filepath.Rel(filepath.Dir(d.RealSocketPath()), path)
	if err != nil || rel == "." || filepath.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("%s is not below the daemon's runtime directory %s", path, filepath.Dir(d.RealSocketPath()))
	}
	return rel, nil
}

// runRoot is the directory of one bring-up's run directories, named by
// the first 16 digits of its instance nonce, so two generations, or a twin
// campaign, never share a directory. (Not by the campaign key too: the
// workbench's socket path in it must stay under the 107 bytes of a unix
// socket address.)
func (d *Driver) runRoot(instance string) string {
	return filepath.Join(d.runBase(), runRootName(instance))
}

// runRootName is the run root's name for an instance nonce.
func runRootName(instance string) string {
	return "i-" + instance[:min(16, len(instance))]
}

// daemonOwner returns the uid and gid owning the daemon's socket (the
// rootless user, container root).
func (d *Driver) daemonOwner() (uid, gid int, err error) {
	st, err := os.Stat(d.host.SocketPath)
	if err != nil {
		return 0, 0, fmt.Errorf("stat docker socket: %w", err)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, fmt.Errorf("stat docker socket: no owner")
	}
	return int(sys.Uid), int(sys.Gid), nil
}

// mkdirOwned makes dir 0700 owned by the daemon's user, relative to the
// runtime directory without following a link; an existing one is
// accepted only when exist is true (and when it is a directory: a link in
// its place is refused).
func (d *Driver) mkdirOwned(dir string, exist bool) error {
	uid, gid, err := d.daemonOwner()
	if err != nil {
		return err
	}
	rel, err := d.runRel(dir)
	if err != nil {
		return err
	}
	rt, err := d.runtimeDir()
	if err != nil {
		return err
	}
	defer rt.Close()
	if err := rt.Mkdir(rel, 0o700); err != nil && !(exist && errors.Is(err, fs.ErrExist)) {
		return err
	}
	fi, err := rt.Lstat(rel)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory (%v): never followed", dir, fi.Mode().Type())
	}
	return rt.Chown(rel, uid, gid)
}

// ensureRunBase makes the daemon runtime directory's agentpen directory.
func (d *Driver) ensureRunBase() error {
	if err := d.mkdirOwned(d.runBase(), true); err != nil {
		return fmt.Errorf("run directory base %s: %w", d.runBase(), err)
	}
	return nil
}

// bindTask writes the bind file of task in the run directory runDir:
// created new, never through a link, 0400, owned by the daemon's user
// (container root); it goes with its directory at cleanup.
func (d *Driver) bindTask(runDir, task string) error {
	uid, gid, err := d.daemonOwner()
	if err != nil {
		return err
	}
	// The run directory is opened relative to the runtime directory,
	// following no link on the way (its user controls it).
	rel, err := d.runRel(runDir)
	if err != nil {
		return err
	}
	rt, err := d.runtimeDir()
	if err != nil {
		return err
	}
	defer rt.Close()
	dir, err := rt.OpenDir(rel)
	if err != nil {
		return fmt.Errorf("bind file: %w", err)
	}
	defer dir.Close()
	return bind.WriteAt(dir.Fd(), runDir, task, uid, gid)
}

// makeRunDir makes one directory of a bring-up's run root (which it makes
// too, when missing): 0700, owned by the daemon's user (container root),
// so container root on both sides reaches what is in it and sandbox uids
// do not. The directory itself must be new: one that exists belongs to
// somebody else and is never adopted (driver.ErrNameTaken).
func (d *Driver) makeRunDir(dir string) error {
	if err := d.ensureRunBase(); err != nil {
		return err
	}
	root := filepath.Dir(dir)
	if err := d.mkdirOwned(root, true); err != nil {
		return fmt.Errorf("workspace run root %s: %w", root, err)
	}
	if err := d.mkdirOwned(dir, false); err != nil {
		if errors.Is(err, os.ErrExist) {
			return driver.Kind(fmt.Sprintf("run directory %s: the path already existed", dir), driver.ErrNameTaken)
		}
		return fmt.Errorf("run directory %s: %w", dir, err)
	}
	return nil
}

// lstatRun looks at a run directory relative to the runtime directory,
// following no link (a link there reads as a link, never its target).
func (d *Driver) lstatRun(path string) error {
	rel, err := d.runRel(path)
	if err != nil {
		return err
	}
	rt, err := d.runtimeDir()
	if err != nil {
		return err
	}
	defer rt.Close()
	fi, err := rt.Lstat(rel)
	if err == nil && !fi.IsDir() {
		return &os.PathError{Op: "lstat", Path: path, Err: fmt.Errorf("%w: a %v, not a directory", beneath.ErrLink, fi.Mode().Type())}
	}
	return err
}

// removeRun removes a run directory and everything in it relative to the
// runtime directory, following no link: the daemon's user may have
// planted one anywhere in it (os.RemoveAll of the path would follow a
// link planted as one of its parents). Its run root goes too once it is
// empty.
func (d *Driver) removeRun(path string) error {
	rel, err := d.runRel(path)
	if err != nil {
		return err
	}
	rt, err := d.runtimeDir()
	if err != nil {
		return err
	}
	defer rt.Close()
	if err := rt.RemoveAll(rel); err != nil {
		return err
	}
	// An error is ignored on purpose: a root that still holds a directory
	// (one left alone, or another of the bring-up's not yet removed) must
	// stay, and an absent one is already gone.
	if root, err := d.runRel(filepath.Dir(path)); err == nil {
		_ = rt.Remove(root) // an empty directory only (never one with a file in it)
	}
	return nil
}
