package launcher

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/store"
	"github.com/agentpen/agentpen/workbench/results"
)

func fakeResult(ws, n int, end string, reward float64) store.Result {
	t0 := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	return store.Result{Generation: 1, Workspace: ws, AgentID: fmt.Sprintf("agent-%d", ws), SourceEnd: int64(100 * (n + 1)), CollectedAt: t0,
		Record: results.Record{V: results.Version, EpisodeID: fmt.Sprintf("e-%d-%d", ws, n), TaskID: "software/median@7", Domain: "software",
			Reward: reward, Steps: 3, End: end, StartedAt: t0, EndedAt: t0.Add(time.Second)}}
}

// TestEpisodesRoute: the results the backend collects are served by
// GET .../episodes, filtered by workspace and paged, counted in
// /metrics by the collector's loop without any GET, and still served
// after the campaign's removal; an unknown campaign is a 404.
func TestEpisodesRoute(t *testing.T) {
	be := newFakeBackend(t)
	ts := newTestServer(t, be)
	const id = "camp-results"
	if resp, b := ts.do(t, http.MethodPost, "/v1/campaigns", specJSON(id, "software/median@7", "software/median@7"), true); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	var rs []store.Result
	for n := range 3 {
		rs = append(rs, fakeResult(0, n, results.EndSubmitted, 1), fakeResult(1, n, results.EndClosed, 0))
	}
	be.mu.Lock()
	be.pending = map[string][]store.Result{id: rs}
	be.mu.Unlock()
	// The loop collects on its own: the counters move with no GET.
	testenv.WaitFor(t, "the collector's loop to count the results", func() bool {
		_, b := ts.do(t, http.MethodGet, "/metrics", nil, true)
		return strings.Contains(string(b), `agentpen_episode_results_total{end="submitted"} 3`) &&
			strings.Contains(string(b), `agentpen_episode_results_total{end="closed"} 3`) &&
			strings.Contains(string(b), "agentpen_episode_reward_count 6")
	})
	get := func(q string) (int, []string, int) {
		t.Helper()
		resp, b := ts.do(t, http.MethodGet, "/v1/campaigns/"+id+"/episodes"+q, nil, true)
		var out struct {
			Episodes []store.Result
			Next     int
		}
		json.Unmarshal(b, &out)
		var ids []string
		for _, e := range out.Episodes {
			ids = append(ids, e.EpisodeID)
		}
		return resp.StatusCode, ids, out.Next
	}
	for _, tt := range []struct {
		q    string
		ids  string
		next int
	}{
		{"", "e-0-0 e-1-0 e-0-1 e-1-1 e-0-2 e-1-2", 0},
		{"?workspace=1", "e-1-0 e-1-1 e-1-2", 0},
		{"?limit=4", "e-0-0 e-1-0 e-0-1 e-1-1", 4},
		{"?limit=4&after=4", "e-0-2 e-1-2", 0},
		{"?workspace=0&limit=2", "e-0-0 e-0-1", 4},
		{"?workspace=0&limit=2&after=4", "e-0-2", 0},
	} {
		code, ids, next := get(tt.q)
		if code != http.StatusOK || strings.Join(ids, " ") != tt.ids || next != tt.next {
			t.Errorf("GET episodes%s: %d %v next %d, want %s next %d", tt.q, code, ids, next, tt.ids, tt.next)
		}
	}
	if code, _, _ := get("?limit=0"); code != http.StatusUnprocessableEntity {
		t.Errorf("limit=0: %d, want 422", code)
	}
	if resp, b := ts.do(t, http.MethodGet, "/v1/campaigns/"+id+"/episodes", nil, false); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without the token: %d %s", resp.StatusCode, b)
	}
	if resp, b := ts.do(t, http.MethodDelete, "/v1/campaigns/"+id, nil, true); resp.StatusCode != http.StatusOK {
		t.Fatalf("delete: %d %s", resp.StatusCode, b)
	}
	if code, ids, _ := get(""); code != http.StatusOK || len(ids) != 6 {
		t.Errorf("after the removal: %d %v", code, ids)
	}
	if resp, _ := ts.do(t, http.MethodGet, "/v1/campaigns/nope/episodes", nil, true); resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown campaign: %d, want 404", resp.StatusCode)
	}
}

// TestRunStopsCounted: the runs of collected results are counted in
// /metrics by why their code stopped, the inferred stops labelled so and
// every stop's series there from the start (at 0); the episodes route
// serves each result's runs and stop as the results file writes them,
// and the document describes them so (runs an object of counts by stop
// word, the stop's reason one of the words).
func TestRunStopsCounted(t *testing.T) {
	be := newFakeBackend(t)
	ts := newTestServer(t, be)
	_, b := ts.do(t, http.MethodGet, "/metrics", nil, true)
	for _, s := range results.Stops {
		st, _ := results.ParseStop(s)
		series := fmt.Sprintf(`agentpen_episode_runs_total{inferred="%v",stop="%s"} 0`, st.Inferred(), s)
		if !strings.Contains(string(b), series) {
			t.Errorf("no %s before any result", series)
		}
	}
	const id = "camp-stops"
	if resp, b := ts.do(t, http.MethodPost, "/v1/campaigns", specJSON(id, "software/median@7"), true); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	mem, loop := fakeResult(0, 0, results.EndSubmitted, 0), fakeResult(0, 1, results.EndNoStepsLeft, 0)
	mem.Runs.Add(results.StopExited)
	mem.Runs.Add(results.StopMemory)
	mem.Stop = results.RunStop{Reason: results.StopMemory, Inferred: true, Evidence: results.EvidenceMemoryError, Status: 1}
	loop.Runs.Add(results.StopTimeout)
	loop.Runs.Add(results.StopMemory)
	loop.Stop = results.RunStop{Reason: results.StopTimeout}
	for _, r := range []store.Result{mem, loop} {
		if err := r.Check(); err != nil {
			t.Fatalf("a fake result the file would refuse: %v", err)
		}
	}
	be.mu.Lock()
	be.pending = map[string][]store.Result{id: {mem, loop}}
	be.mu.Unlock()
	testenv.WaitFor(t, "the runs counted", func() bool {
		_, b := ts.do(t, http.MethodGet, "/metrics", nil, true)
		return strings.Contains(string(b), `agentpen_episode_runs_total{inferred="true",stop="memory"} 2`) &&
			strings.Contains(string(b), `agentpen_episode_runs_total{inferred="false",stop="timeout"} 1`) &&
			strings.Contains(string(b), `agentpen_episode_runs_total{inferred="false",stop="exited"} 1`)
	})
	_, b = ts.do(t, http.MethodGet, "/v1/campaigns/"+id+"/episodes", nil, true)
	var out struct {
		Episodes []struct {
			Runs map[string]int `json:"runs"`
			Stop map[string]any `json:"stop"`
		}
	}
	if err := json.Unmarshal(b, &out); err != nil || len(out.Episodes) != 2 {
		t.Fatalf("episodes %s: %v", b, err)
	}
	if e := out.Episodes[0]; e.Runs["memory"] != 1 || e.Runs["exited"] != 1 || len(e.Runs) != 2 ||
		e.Stop["reason"] != "memory" || e.Stop["inferred"] != true || e.Stop["evidence"] != "MemoryError" {
		t.Errorf("the first episode's runs %v, stop %v", e.Runs, e.Stop)
	}
	_, b = ts.do(t, http.MethodGet, OpenAPIPath, nil, true)
	type schema struct {
		Ref                  string `json:"$ref"`
		Type                 any
		AdditionalProperties any
		Enum                 []string
		Properties           map[string]*schema
	}
	var doc struct {
		Components struct{ Schemas map[string]*schema }
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	// deref is s, or the schema it refers to.
	deref := func(s *schema) *schema {
		if s != nil && s.Ref != "" {
			return doc.Components.Schemas[strings.TrimPrefix(s.Ref, "#/components/schemas/")]
		}
		return s
	}
	res := deref(&schema{Ref: "#/components/schemas/StoreResult"})
	runs := deref(res.Properties["runs"])
	if add, _ := runs.AdditionalProperties.(map[string]any); runs.Type != "object" || add["type"] != "integer" {
		t.Errorf("runs' schema %+v: want an object of integers", runs)
	}
	stop := deref(res.Properties["stop"])
	if got := stop.Properties["reason"].Enum; strings.Join(got, " ") != strings.Join(results.Stops, " ") {
		t.Errorf("stop's reasons %v, want %v", got, results.Stops)
	}
}
