package adapter

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/agentpen/agentpen/campaign"
)

// runBase is where workspaces' /run/workbench directories live: beside the
// daemon's socket, in the rootless user's runtime directory, which the
// daemon can always reach for bind mounts (a root-only state root cannot).
// A campaign's are in runBase/<campaign key>/<agent id>.
func (a *Adapter) runBase() string {
	return filepath.Join(filepath.Dir(a.Docker.Host().SocketPath), "agentpen")
}

// runRoot is the directory of one campaign's run directories.
func (a *Adapter) runRoot(key string) string {
	return filepath.Join(a.runBase(), key)
}

// removeRunRoot removes a campaign's run root once it is empty. An error is
// ignored on purpose: a root that still holds a directory (one left alone,
// or a twin's) must stay, and an absent one is already gone; the
// directories inside are journalled and removed one by one.
func (a *Adapter) removeRunRoot(key string) {
	_ = os.Remove(a.runRoot(key))
}

// makeRunDir creates the workspace's /run/workbench on the host: 0700,
// owned by the daemon's user (container root), journalled for cleanup.
func (a *Adapter) makeRunDir(j *campaign.Journal, p *campaign.Plan, ag campaign.AgentPlan) (string, error) {
	root := a.runRoot(p.Key)
	dir := filepath.Join(root, ag.AgentID)
	if err := j.Append(campaign.Record{Op: campaign.OpIntent, Kind: campaign.KindDir, Role: campaign.RoleWork, Name: dir}); err != nil {
		return "", err
	}
	st, err := os.Stat(a.Docker.Host().SocketPath)
	if err != nil {
		return "", fmt.Errorf("stat docker socket: %w", err)
	}
	sys, _ := st.Sys().(*syscall.Stat_t)
	for _, d := range []string{filepath.Dir(root), root, dir} {
		if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("workspace run dir %s: %w", d, err)
		}
		if sys != nil {
			if err := os.Lchown(d, int(sys.Uid), int(sys.Gid)); err != nil {
				return "", fmt.Errorf("workspace run dir %s: %w", d, err)
			}
		}
	}
	if err := j.Append(campaign.Record{Op: campaign.OpCreated, Kind: campaign.KindDir, Role: campaign.RoleWork, Name: dir, ID: dir}); err != nil {
		return "", err
	}
	return dir, nil
}
