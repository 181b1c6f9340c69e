package docker

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/agentpen/agentpen/campaign"
)

// dk is the Docker driver under an engine (under the tests' wrappers).
func dk(a *adapter.Adapter) *Driver {
	d := a.Driver
	for {
		w, ok := d.(interface{ Unwrap() driver.Driver })
		if !ok {
			return d.(*Driver)
		}
		d = w.Unwrap()
	}
}

// runDirOf is a workspace's run directory.
func runDirOf(t testing.TB, w adapter.Workspace) string {
	t.Helper()
	dir, err := runDir(w.Handle)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// graderDirOf is the grader's socket directory of a campaign's plan
// (campaign.TopologyNone), "" for none.
func graderDirOf(a *adapter.Adapter, p *campaign.Plan) string {
	if p.Topology != campaign.TopologyNone {
		return ""
	}
	return filepath.Join(dk(a).runRoot(p.Instance), "grader")
}

// unready is a driver whose containers are ready as soon as they start:
// the fake daemon runs no process.
type unready struct{ driver.Driver }

func (unready) Ready(context.Context, *driver.Object) error { return nil }
func (u unready) Unwrap() driver.Driver                     { return u.Driver }

// withDriver is an engine configured as a, on d.
func withDriver(a *adapter.Adapter, d driver.Driver) *adapter.Adapter {
	return &adapter.Adapter{Driver: d, LockBase: a.LockBase, Logger: a.Logger, Getenv: a.Getenv, ReadyTimeout: a.ReadyTimeout,
		Parallelism: a.Parallelism, CleanupTimeout: a.CleanupTimeout, KeyPolicy: a.KeyPolicy, EnvPolicy: a.EnvPolicy,
		SigningKey: a.SigningKey, Journalled: a.Journalled, Progress: a.Progress}
}
