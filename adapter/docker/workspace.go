package docker

import (
	"context"
	"errors"
	"fmt"

	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/workbench/results"
)

// A Docker workspace is reached through its run directory on the host:
// the workbench's unix socket, its bind file and its results file are
// there, bind-mounted at /run/workbench. That directory is the daemon
// user's, and a container escape yields that user: every name in it is
// opened relative to the runtime directory without following a link, and
// everything read there is hostile.

// Workspace is the handle on the workspace ag: its run directory (the
// directory resource named by its agent id) and its container (named by
// the plan), among the live journalled resources.
func (d *Driver) Workspace(ag campaign.AgentPlan, live []campaign.Resource) (driver.Workspace, error) {
	w := driver.Workspace{AgentID: ag.AgentID}
	var dir string
	for _, r := range live {
		switch {
		case r.ID == "" || r.Orphan || r.Role != campaign.RoleWork:
		case r.Kind == campaign.KindContainer && r.Name == ag.Name:
			w.ID = r.ID
			w.Resources = append(w.Resources, r)
		case r.Kind == campaign.KindDir && filepath.Base(r.ID) == ag.AgentID:
			dir = r.ID
			w.Resources = append(w.Resources, r)
		}
	}
	if dir == "" {
		return w, fmt.Errorf("workspace %s: its run directory is not in the journal", ag.AgentID)
	}
	w.Socket = filepath.Join(dir, socketName)
	return w, nil
}

// runDir is the workspace's run directory.
func runDir(w driver.Workspace) (string, error) {
	for _, r := range w.Resources {
		if r.Kind == campaign.KindDir {
			return r.ID, nil
		}
	}
	return "", fmt.Errorf("workspace %s: no run directory", w.AgentID)
}

// Dial connects to the workbench's unix socket.
func (d *Driver) Dial(ctx context.Context, w driver.Workspace) (net.Conn, error) {
	if w.Socket == "" {
		return nil, fmt.Errorf("workspace %s: no socket", w.AgentID)
	}
	var dl net.Dialer
	return dl.DialContext(ctx, "unix", w.Socket)
}

// Bind writes the workspace's bind file (package workbench/bind) in its
// run directory: created new (a workspace is bound once), never through a
// link, 0400, owned by the daemon's user, which is container root; a
// sandbox uid cannot read it.
func (d *Driver) Bind(_ context.Context, w driver.Workspace, task string) error {
	dir, err := runDir(w)
	if err != nil {
		return err
	}
	return d.bindTask(dir, task)
}

// Activity is the latest modification time of the live workspaces'
// sockets, which the workbench sets at each reset and step it serves (at
// most once a second). Each is read below the run directories' base
// without following a link; a socket that is not a socket (a file or a
// link put in its place) is not read.
func (d *Driver) Activity(_ context.Context, live []campaign.Resource) time.Time {
	rt, err := d.runtimeDir()
	if err != nil {
		return time.Time{}
	}
	defer rt.Close()
	var last time.Time
	for _, r := range live {
		if r.Kind != campaign.KindDir || r.Role != campaign.RoleWork || r.ID == "" {
			continue
		}
		rel, err := d.runRel(filepath.Join(r.ID, socketName))
		if err != nil {
			continue
		}
		fi, err := rt.Lstat(rel)
		if err != nil || fi.Mode().Type() != fs.ModeSocket {
			continue
		}
		if fi.ModTime().After(last) {
			last = fi.ModTime()
		}
	}
	return last
}

// Results reads the workspace's results file from offset. The file is
// opened beneath the runtime directory without following a link and
// without blocking (a FIFO is refused, not waited on), and must be a
// regular file.
func (d *Driver) Results(_ context.Context, w driver.Workspace, offset int64) ([]byte, error) {
	dir, err := runDir(w)
	if err != nil {
		return nil, err
	}
	rel, err := d.runRel(dir)
	if err != nil {
		return nil, err
	}
	rt, err := d.runtimeDir()
	if err != nil {
		return nil, err
	}
	defer rt.Close()
	dd, err := rt.OpenDir(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer dd.Close()
	f, err := dd.OpenFile(results.FileName, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := results.ReadFrom(f, offset)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name(), err)
	}
	return b, nil
}
