package adapter

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/agentpen/agentpen/campaign"
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

// lockDir is where the daemon-wide locks and claims live (the campaign
// locks, the subnet and uid-block locks, the uid-block claims): in
// runBase, under the daemon's identity (its /info ID), so every spelling of
// DOCKER_HOST that reaches one daemon shares them, and two daemons whose
// sockets share a directory do not.
func (a *Adapter) lockDir() string {
	return filepath.Join(a.runBase(), "locks", daemonKey(a.Docker.Daemon().ID))
}

// daemonKey names a daemon's lock directory: "daemon-" and 16 hex digits
// of the SHA-256 of its /info ID (which holds ':' and is long).
func daemonKey(id string) string {
	sum := sha256.Sum256([]byte("agentpen-daemon\x00" + id))
	return "daemon-" + hex.EncodeToString(sum[:8])
}

// ensureLockDir makes lockDir and its parents (0700, the daemon's user).
func (a *Adapter) ensureLockDir() error {
	if err := a.ensureRunBase(); err != nil {
		return err
	}
	for _, d := range []string{filepath.Dir(a.lockDir()), a.lockDir()} {
		if err := a.mkdirOwned(d, true); err != nil {
			return fmt.Errorf("lock directory %s: %w", d, err)
		}
	}
	return nil
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
func removeEmptyRunRoots(dirs []string) {
	for _, d := range dirs {
		_ = os.Remove(filepath.Dir(d))
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

// mkdirOwned makes dir 0700 owned by the daemon's user; an existing one is
// accepted only when exist is true.
func (a *Adapter) mkdirOwned(dir string, exist bool) error {
	uid, gid, err := a.daemonOwner()
	if err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !(exist && errors.Is(err, os.ErrExist)) {
		return err
	}
	return os.Lchown(dir, uid, gid)
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
	if !ag.NeedsKey {
		return nil
	}
	uid, gid, err := a.daemonOwner()
	if err != nil {
		return err
	}
	return bind.Write(runDir, ag.Spec.TaskID, uid, gid)
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
