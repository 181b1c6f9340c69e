package adapter

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/beneath"
	"github.com/agentpen/agentpen/workbench/bind"
)

// runBase is where workspaces' /run/workbench directories live: beside the
// daemon's socket (its real path: every spelling of DOCKER_HOST that
// reaches it through symbolic links gets the same directory), in the
// rootless user's runtime directory, which the daemon can always reach for
// bind mounts (a root-only state root cannot). A bring-up's are in
// runBase/i-<nonce>/<agent id>.
func (a *Adapter) runBase() string {
	return filepath.Join(filepath.Dir(a.Docker.RealSocketPath()), "agentpen")
}

// runtimeDir opens the directory the run directories live in: the daemon
// user's runtime directory (its socket's real directory). That user can
// write it, and a container escape yields that user: every name below it
// is made, observed and removed relative to this descriptor, never
// following a link (internal/beneath), so nothing planted there sends
// root to a file elsewhere. The caller closes it.
func (a *Adapter) runtimeDir() (*beneath.Dir, error) {
	d, err := beneath.Open(filepath.Dir(a.Docker.RealSocketPath()), nil)
	if err != nil {
		return nil, fmt.Errorf("the daemon's runtime directory: %w", err)
	}
	return d, nil
}

// runRel is path (a run directory, or a directory of one) relative to the
// runtime directory; an error for a path that is not below it.
func (a *Adapter) runRel(path string) (string, error) {
	rel, err := filepath.Rel(filepath.Dir(a.Docker.RealSocketPath()), path)
	if err != nil || rel == "." || filepath.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("%s is not below the daemon's runtime directory %s", path, filepath.Dir(a.Docker.RealSocketPath()))
	}
	return rel, nil
}

// runRoot is the directory of one bring-up's run directories, named by
// the first 16 digits of its instance nonce, so two generations, or a twin
// campaign, never share a directory. (Not by the campaign key too: the
// workbench's socket path in it must stay under the 107 bytes of a unix
// socket address.)
func (a *Adapter) runRoot(p *campaign.Plan) string {
	return filepath.Join(a.runBase(), runRootName(p.Instance))
}

// runRootName is the run root's name for an instance nonce.
func runRootName(instance string) string {
	return "i-" + instance[:min(16, len(instance))]
}

// removeEmptyRunRoots removes the parents of the given run directories
// once they are empty. An error is ignored on purpose: a root that still
// holds a directory (one left alone) must stay, and an absent one is
// already gone; the directories inside are journalled and removed one by
// one, by exact path.
func (a *Adapter) removeEmptyRunRoots(dirs []string) {
	rt, err := a.runtimeDir()
	if err != nil {
		return
	}
	defer rt.Close()
	for _, d := range dirs {
		if rel, err := a.runRel(filepath.Dir(d)); err == nil {
			_ = rt.Remove(rel) // an empty directory only (never one with a file in it)
		}
	}
}

// daemonOwner returns the uid and gid owning the daemon's socket (the
// rootless user, container root).
func (a *Adapter) daemonOwner() (uid, gid int, err error) {
	st, err := os.Stat(a.Docker.Host().SocketPath)
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
func (a *Adapter) mkdirOwned(dir string, exist bool) error {
	uid, gid, err := a.daemonOwner()
	if err != nil {
		return err
	}
	rel, err := a.runRel(dir)
	if err != nil {
		return err
	}
	rt, err := a.runtimeDir()
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
func (a *Adapter) ensureRunBase() error {
	if err := a.mkdirOwned(a.runBase(), true); err != nil {
		return fmt.Errorf("run directory base %s: %w", a.runBase(), err)
	}
	return nil
}

// makeGraderDir creates the directory of the grader's unix socket
// (campaign.TopologyNone): 0700, owned by the daemon's user, so container
// root on both sides reaches the socket and sandbox uids do not; journalled
// for cleanup.
func (a *Adapter) makeGraderDir(j *campaign.Journal, p *campaign.Plan) (string, error) {
	return a.makeOwnedDir(j, p, campaign.RoleServer, filepath.Join(a.runRoot(p), "grader"))
}

// makeRunDir creates the workspace's /run/workbench on the host: 0700,
// owned by the daemon's user (container root), journalled for cleanup. The
// directory itself must be new: one that exists belongs to somebody else
// and is never adopted.
func (a *Adapter) makeRunDir(j *campaign.Journal, p *campaign.Plan, ag campaign.AgentPlan) (string, error) {
	return a.makeOwnedDir(j, p, campaign.RoleWork, filepath.Join(a.runRoot(p), ag.AgentID))
}

// writeBindFile binds a workspace running the workbench (the default
// command) to its task: the bind file in its run directory (package
// workbench/bind: created new, never through a link, 0400, owned by the
// daemon's user, container root), before the container starts. A
// launcher's own command gets no file: the task id is never put where
// code the workbench does not sandbox could read it. The file goes with
// its directory at cleanup.
func (a *Adapter) writeBindFile(runDir string, ag campaign.AgentPlan) error {
	if !ag.NeedsKey || ag.Pool {
		return nil // a launcher's command, or a pooled workspace (bound at its claim)
	}
	return a.bindTask(runDir, ag.Spec.TaskID)
}

// bindTask writes the bind file of task in the run directory runDir.
func (a *Adapter) bindTask(runDir, task string) error {
	uid, gid, err := a.daemonOwner()
	if err != nil {
		return err
	}
	// The run directory is opened relative to the runtime directory,
	// following no link on the way (its user controls it).
	rel, err := a.runRel(runDir)
	if err != nil {
		return err
	}
	rt, err := a.runtimeDir()
	if err != nil {
		return err
	}
	defer rt.Close()
	d, err := rt.OpenDir(rel)
	if err != nil {
		return fmt.Errorf("bind file: %w", err)
	}
	defer d.Close()
	return bind.WriteAt(d.Fd(), runDir, task, uid, gid)
}

// makeOwnedDir journals and makes one directory of the bring-up's run
// root (which it makes too, when missing).
func (a *Adapter) makeOwnedDir(j *campaign.Journal, p *campaign.Plan, role, dir string) (string, error) {
	root := filepath.Dir(dir)
	if err := j.Append(campaign.Record{Op: campaign.OpIntent, Gen: p.Generation, Kind: campaign.KindDir, Role: role, Name: dir}); err != nil {
		return "", err
	}
	if err := a.ensureRunBase(); err != nil {
		return "", err
	}
	if err := a.mkdirOwned(root, true); err != nil {
		return "", fmt.Errorf("workspace run root %s: %w", root, err)
	}
	if err := a.mkdirOwned(dir, false); err != nil {
		if errors.Is(err, os.ErrExist) {
			// Not ours: say so in the journal, so the intent is resolved.
			return "", errors.Join(fmt.Errorf("run directory %s: %w", dir, err),
				j.Append(campaign.Record{Op: campaign.OpRemoved, Gen: p.Generation, Kind: campaign.KindDir, Name: dir, Note: "never created: the path already existed"}))
		}
		return "", fmt.Errorf("run directory %s: %w", dir, err)
	}
	if err := j.Append(campaign.Record{Op: campaign.OpCreated, Gen: p.Generation, Kind: campaign.KindDir, Role: role, Name: dir, ID: dir}); err != nil {
		return "", err
	}
	return dir, nil
}
