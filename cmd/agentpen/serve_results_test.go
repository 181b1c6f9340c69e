package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/internal/testkit/workbenchtest"
	"github.com/agentpen/agentpen/store"
)

// TestResultsOfClaimedWorkspaces: episodes played on a campaign's own
// workspace and on two workspaces claimed from its pool all reach
// agentpen ls --json (while up), GET .../episodes and agentpen results,
// each under its workspace's index and claimed task, before the
// campaign's removal and after it: after a DELETE, and after its ttl
// ran out. The claimed workspaces' results used to be never collected
// (only the spec's workspaces were read) and were lost with the campaign.
func TestResultsOfClaimedWorkspaces(t *testing.T) {
	testenv.RequireRoot(t)
	e := newCLIEnv(t)
	p := startServe(t, e)
	stamp := time.Now().UnixNano()
	claimed := []string{"sql/top_customer@2", "logs/error_count@1"}
	for _, end := range []string{"delete", "ttl"} {
		t.Run(end, func(t *testing.T) {
			id := fmt.Sprintf("res-%s-%d", end, stamp)
			t.Cleanup(func() { e.run("down", id) })
			_, spec := e.lifeSpec(id, 1, func(s *campaign.CampaignSpec) { s.Pool = 2 })
			if code, b := p.call(http.MethodPost, "/v1/campaigns", spec); code != http.StatusCreated {
				t.Fatalf("create: %d %s", code, b)
			}
			for i, task := range claimed {
				if code, b := p.call(http.MethodPost, "/v1/campaigns/"+id+"/workspaces", mustJSON(map[string]string{"task_id": task, "attempt_id": fmt.Sprint("a", i)})); code != http.StatusOK && code != http.StatusCreated {
					t.Fatalf("claim %s: %d %s", task, code, b)
				}
			}
			want := map[int]string{0: "data/csv_region_total", 1: claimed[0], 2: claimed[1]}
			// ls lists the three, with their sockets; an episode is played
			// on each.
			out, errs, code := e.run("ls", "--json")
			var entries []lsEntry
			if code != 0 || json.Unmarshal([]byte(out), &entries) != nil {
				t.Fatalf("ls: exit %d %s%s", code, out, errs)
			}
			i := slices.IndexFunc(entries, func(l lsEntry) bool { return l.CampaignID == id })
			if i < 0 {
				t.Fatalf("ls does not list %s: %s", id, out)
			}
			listed := map[int]string{}
			for _, w := range entries[i].Workspaces {
				listed[w.Index] = w.TaskID
			}
			if fmt.Sprint(listed) != fmt.Sprint(want) {
				t.Fatalf("ls lists the workspaces %v, want %v", listed, want)
			}
			for _, w := range entries[i].Workspaces {
				ctx := testenv.Context(t)
				s := workbenchtest.Dial(t, ctx, w.Socket)
				if err := workbenchtest.PlayOracle(ctx, s, w.TaskID); err != nil {
					t.Fatalf("workspace %d (%s): %v", w.Index, w.TaskID, err)
				}
				s.Close()
			}
			check := func(when string) {
				t.Helper()
				code, b := p.call(http.MethodGet, "/v1/campaigns/"+id+"/episodes", nil)
				var page struct{ Episodes []store.Result }
				if code != http.StatusOK || json.Unmarshal(b, &page) != nil {
					t.Fatalf("%s: GET episodes: %d %s", when, code, b)
				}
				if got := byWorkspace(page.Episodes); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("%s: GET episodes has %v, want one episode of each of %v", when, got, want)
				}
				out, errs, code := e.run("results", "--json", id)
				var rs []store.Result
				if code != 0 || json.Unmarshal([]byte(out), &rs) != nil {
					t.Fatalf("%s: results: exit %d %s%s", when, code, out, errs)
				}
				if got := byWorkspace(rs); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("%s: agentpen results has %v, want one episode of each of %v", when, got, want)
				}
				for _, r := range rs {
					if r.Reward != 1 {
						t.Errorf("%s: workspace %d: reward %v, want 1 (the oracle's)", when, r.Workspace, r.Reward)
					}
				}
			}
			check("up")
			switch end {
			case "delete":
				if code, b := p.call(http.MethodDelete, "/v1/campaigns/"+id, nil); code != http.StatusOK {
					t.Fatalf("delete: %d %s", code, b)
				}
			case "ttl":
				// The ttl counts from the create's acceptance, which is
				// more than 10 s ago once the episodes are played, or soon.
				if code, b := p.call(http.MethodPatch, "/v1/campaigns/"+id, []byte(`{"ttl_seconds": 10}`)); code != http.StatusOK {
					t.Fatalf("patch: %d %s", code, b)
				}
				testenv.WaitFor(t, id+" to expire", func() bool { return p.view(id).State == campaign.StatusRemoved.String() })
				if r, ok := e.removalOf(id); !ok || r.Reason != campaign.ReasonTTL {
					t.Fatalf("removed with %+v, want reason ttl", r)
				}
			}
			check("after " + end)
		})
	}
}

// byWorkspace maps each workspace index of rs to its task, and marks a
// workspace with more than one result.
func byWorkspace(rs []store.Result) map[int]string {
	out := map[int]string{}
	for _, r := range rs {
		if _, twice := out[r.Workspace]; twice {
			out[r.Workspace] = "more than one result"
			continue
		}
		out[r.Workspace] = r.TaskID
	}
	return out
}
