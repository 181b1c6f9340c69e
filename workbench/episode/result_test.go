package episode

import (
	"sync"
	"testing"
	"time"

	"github.com/agentpen/agentpen/workbench/results"
)

// collected collects what Config.OnEnd receives.
type collected struct {
	mu  sync.Mutex
	got []results.Record
}

func (r *collected) add(x results.Record) { r.mu.Lock(); r.got = append(r.got, x); r.mu.Unlock() }

func (r *collected) all() []results.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]results.Record(nil), r.got...)
}

// TestResults: every episode leaves exactly one Result when it ends, with
// its reward and the reward's parts, its steps, how it ended and when;
// an episode a reset replaces or Close ends is recorded too, and an
// ended episode is not recorded again by the reset or Close after it.
func TestResults(t *testing.T) {
	clock := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); clock = clock.Add(time.Second); return clock }
	cases := []struct {
		name  string
		task  string
		limit int
		calls []tc
		end   string
		want  results.Record
	}{
		{"submitted", "t/number", 0, []tc{read, {"check", ans("42")}, {"submit", ans("42")}}, "",
			results.Record{V: results.Version, TaskID: "t/number", Domain: "t", Reward: 1, Steps: 3, End: results.EndSubmitted,
				Parts: results.Parts{Correctness: 1, Inspected: true, Verified: true, NoInvalid: true}}},
		{"wrong", "t/number", 0, []tc{bad, {"submit", ans("41")}}, "",
			results.Record{V: results.Version, TaskID: "t/number", Domain: "t", Reward: 0, Steps: 2, End: results.EndSubmitted}},
		{"code", "t/code", 0, []tc{writeF, tests, {"submit", ans("fixed")}}, "",
			// Its runs: the tests, their visible case, and the submit's
			// three cases, each exited 0.
			results.Record{V: results.Version, TaskID: "t/code", Domain: "t", Reward: 0.9, Steps: 3, End: results.EndSubmitted,
				Parts: results.Parts{Correctness: 1, Verified: true, NoInvalid: true}, Runs: runsOf(results.StopExited, 5)}},
		{"no_steps_left", "t/number", 2, []tc{read, read}, "",
			results.Record{V: results.Version, TaskID: "t/number", Domain: "t", Steps: 2, End: results.EndNoStepsLeft}},
		{"invalid_calls", "t/number", 0, []tc{bad, bad, bad}, "",
			results.Record{V: results.Version, TaskID: "t/number", Domain: "t", Steps: 3, End: results.EndInvalidCalls}},
		{"finished", "t/number", 0, []tc{read, {"finish", nil}}, "",
			results.Record{V: results.Version, TaskID: "t/number", Domain: "t", Steps: 2, End: results.EndFinished}},
		{"abandoned", "t/number", 0, []tc{read}, "reset",
			results.Record{V: results.Version, TaskID: "t/number", Domain: "t", Steps: 1, End: results.EndAbandoned}},
		{"closed", "t/number", 0, []tc{read}, "close",
			results.Record{V: results.Version, TaskID: "t/number", Domain: "t", Steps: 1, End: results.EndClosed}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var r collected
			env := fakeEnv(t, Config{OnEnd: r.add, Now: now, Limits: Limits{MaxSteps: c.limit}}, c.task)
			id := env.State().EpisodeID
			play(t, env, c.calls)
			switch c.end {
			case "reset":
				reset(t, env, "t/code")
			case "close":
				env.Close()
			}
			got := r.all()
			if len(got) != 1 {
				t.Fatalf("%d results, want 1: %+v", len(got), got)
			}
			g := got[0]
			if err := g.Check(); err != nil {
				t.Errorf("a result the results file would refuse: %v", err)
			}
			if g.EpisodeID != id || !g.EndedAt.After(g.StartedAt) || g.StartedAt.IsZero() {
				t.Errorf("identity or times: %+v (episode %s)", g, id)
			}
			c.want.EpisodeID, c.want.StartedAt, c.want.EndedAt = g.EpisodeID, g.StartedAt, g.EndedAt
			if g != c.want {
				t.Errorf("result\n got %+v\nwant %+v", g, c.want)
			}
			// Nothing more for this episode: a step after its end, a reset
			// and a Close record only what a new episode did.
			if c.end == "close" {
				return
			}
			step(t, env, "list_files", nil)
			env.Close()
			if n := len(r.all()); c.end == "" && n != 1 {
				t.Errorf("after the end, a step and Close: %d results, want 1", n)
			}
		})
	}
}

// runsOf counts n runs stopped for s.
func runsOf(s results.Stop, n int) results.RunCounts {
	var c results.RunCounts
	for range n {
		c.Add(s)
	}
	return c
}

// TestUnrecorded: an episode marked Unrecorded leaves no result when it
// is closed or replaced, but one that ends on its own still does.
func TestUnrecorded(t *testing.T) {
	var r collected
	env := fakeEnv(t, Config{OnEnd: r.add}, "t/number")
	play(t, env, []tc{read})
	env.Unrecorded()
	reset(t, env, "t/number")
	env.Unrecorded()
	play(t, env, []tc{read, {"submit", ans("42")}})
	env.Close()
	got := r.all()
	if len(got) != 1 || got[0].End != results.EndSubmitted {
		t.Fatalf("results %+v, want the graded one alone", got)
	}
}
