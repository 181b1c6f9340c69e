package adapter

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestProgress: a bring-up reports every network and container created,
// counted per role, and its rollback every resource it is done with,
// counted over the teardown, one call at a time.
func TestProgress(t *testing.T) {
	a, _ := fakeAdapter(t)
	a.ReadyTimeout = 300 * time.Millisecond // the fake's workbench never answers: a rollback follows
	var got []string
	calls := 0
	a.Progress = func(p Progress) {
		calls++
		if p.CampaignID != "progress" {
			t.Errorf("campaign %q", p.CampaignID)
		}
		got = append(got, fmt.Sprintf("%s %s %d/%d %s", p.Step, p.Role, p.Done, p.Total, p.Outcome))
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
	// its socket directory, 3 workspaces and their 3 run directories, each
	// counted once over the 8.
	if len(removed) != 8 {
		t.Errorf("removed steps %q, want 8", removed)
	}
	for i, r := range removed {
		if !strings.Contains(r, fmt.Sprintf(" %d/8 removed", i+1)) {
			t.Errorf("removed step %d: %q", i, r)
		}
	}
	if calls != len(got) {
		t.Fatal("calls")
	}
}
