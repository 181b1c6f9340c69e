package docker

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/dockerfake"
)

// TestProgress: a bring-up reports every network and container created,
// counted per role, and its rollback every resource it is done with,
// counted over the teardown, one call at a time.
func TestProgress(t *testing.T) {
	a, fake := fakeAdapter(t)
	// The fake's workbench never answers. Once all four containers run,
	// they exit: readiness fails on that (not on ReadyTimeout, which a
	// loaded machine could reach before the last workspace started) and
	// a rollback follows.
	a.ReadyTimeout = time.Hour
	var exited atomic.Bool
	fake.OnFunc("GET /containers/{id}/json", func(dockerfake.Call) dockerfake.Reply {
		cs := fake.Containers()
		if len(cs) == 4 && !exited.Load() && !slices.ContainsFunc(cs, func(c dockerfake.Container) bool { return !c.Running }) {
			exited.Store(true)
			for _, c := range cs {
				fake.SetRunning(c.ID, false)
			}
		}
		return dockerfake.Pass
	})
	var got []string
	calls := 0
	a.Progress = func(p adapter.Progress) {
		calls++
		if p.CampaignID != "progress" {
			t.Errorf("campaign %q", p.CampaignID)
		}
		got = append(got, fmt.Sprintf("%s %s %d/%d %s", p.Step, p.Role, p.Done, p.Total, p.Outcome))
		// Containers are removed before directories: each role's count
		// binds to the same kinds on every run.
		if p.Step == adapter.StepRemoved && p.Role == campaign.RoleWork && (p.Done <= 3) != (p.Kind == campaign.KindContainer) {
			t.Errorf("removed workspace %d/%d is a %s", p.Done, p.Total, p.Kind)
		}
	}
	_, err := a.BringUp(t.Context(), fakeSpec("progress", 3))
	if err == nil {
		t.Fatal("the fake's campaign came up")
	}
	var created, removed []string
	for _, g := range got {
		switch {
		case strings.HasPrefix(g, "created"):
			created = append(created, g)
		case strings.HasPrefix(g, "removed"):
			removed = append(removed, g)
		}
	}
	slices.Sort(created)
	want := []string{
		"created server 1/1 ",
		"created workspace 1/3 ", "created workspace 2/3 ", "created workspace 3/3 ",
	}
	if !slices.Equal(created, want) {
		t.Errorf("created steps %q, want %q", created, want)
	}
	// The rollback (the default topology: no network): the server and
	// its socket directory, 3 workspaces and their 3 run directories,
	// counted per role, containers first.
	slices.Sort(removed)
	want = []string{
		"removed server 1/2 removed", "removed server 2/2 removed",
		"removed workspace 1/6 removed", "removed workspace 2/6 removed", "removed workspace 3/6 removed",
		"removed workspace 4/6 removed", "removed workspace 5/6 removed", "removed workspace 6/6 removed",
	}
	if !slices.Equal(removed, want) {
		t.Errorf("removed steps %q, want %q", removed, want)
	}
	if calls != len(got) {
		t.Fatal("calls")
	}
}
