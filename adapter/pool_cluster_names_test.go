package adapter

import (
	"context"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/fakedriver"
)

// podNamed is the fake runtime naming each workspace's container as a
// cluster's driver journals a pod, "<namespace>/<agent id>", not the
// plan's container name.
type podNamed struct{ *fakedriver.Driver }

func (d podNamed) Layout(ctx context.Context, b driver.BringUp) (*driver.Layout, error) {
	l, err := d.Driver.Layout(ctx, b)
	if err != nil {
		return nil, err
	}
	for _, u := range l.Workspaces {
		u.Main.Name = "ns/" + b.Plan.Agents[u.Agent].AgentID
	}
	return l, nil
}

func (d podNamed) Workspace(ag campaign.AgentPlan, live []campaign.Resource) (driver.Workspace, error) {
	w, err := d.Driver.Workspace(ag, live)
	for _, r := range live {
		if r.ID != "" && r.Kind == campaign.KindContainer && r.Role == campaign.RoleWork && strings.HasSuffix(r.Name, "/"+ag.AgentID) {
			w.ID = r.ID
			w.Resources = append(w.Resources, r)
		}
	}
	return w, err
}

// TestClaimedPoolSlotKeepsItsTaskOnACluster: a claimed pooled workspace
// is its claim's task's, whatever name the driver journals its container
// under. c39e342 found the uid block by the agent label because a
// cluster journals "<namespace>/<agent>", but Load and Workspaces still
// find the claim by the plan's container name (claims[ag.Name]), so on a
// cluster the claimed workspace has no task: the results collector
// refuses every record it writes ("a record of a task other than the
// workspace's"). (Review of c39e342.)
func TestClaimedPoolSlotKeepsItsTaskOnACluster(t *testing.T) {
	d := podNamed{fakedriver.New(map[string]string{"img": fakeImage})}
	a, root := fakeEngine(t, d.Driver, t.TempDir())
	a.Driver = d
	c := fakePool(t, a, root, "podnamed", 2)
	cl, err := a.Claim(t.Context(), c, "software/median", "a0", AttestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Read()
	if err != nil {
		t.Fatal(err)
	}
	ws, err := a.Workspaces(c, st)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, w := range ws {
		if w.AgentID == cl.Workspace.AgentID {
			found = true
			if w.TaskID != "software/median" {
				t.Errorf("Workspaces: the claimed pooled workspace %s has task %q, want its claim's", w.AgentID, w.TaskID)
			}
		}
	}
	if !found {
		t.Fatalf("Workspaces lists no claimed workspace %s", cl.Workspace.AgentID)
	}
	lc, err := a.Load(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range lc.Workspaces {
		if w.AgentID == cl.Workspace.AgentID && w.TaskID != "software/median" {
			t.Errorf("Load: the claimed pooled workspace %s has task %q, want its claim's", w.AgentID, w.TaskID)
		}
	}
}
