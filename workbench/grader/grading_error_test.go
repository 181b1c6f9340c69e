package grader

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/sandboxtest"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/workbench/episode"
	"github.com/agentpen/agentpen/workbench/results"
	"github.com/agentpen/agentpen/workbench/tasks"
)

// garbageGrader is the grader service, but for route, which it answers
// 200 with body.
func garbageGrader(t *testing.T, route, body string) string {
	t.Helper()
	srv, err := NewServer(ServerConfig{Key: testKey, Catalogue: &countingCatalogue{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	h := srv.Handler()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == route {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(body))
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs.URL
}

// leakyMedian is a right median() that leaves the arguments of every
// hidden case (none of the examples) in /tmp and /dev/shm, which no
// digest covers: where the agent's next run_python would find them.
func leakyMedian(t *testing.T) string {
	t.Helper()
	task, err := tasks.Build("software/median")
	if err != nil {
		t.Fatal(err)
	}
	var visible [][]any
	for _, c := range task.Visible {
		visible = append(visible, c.Args)
	}
	b, _ := json.Marshal(visible)
	return fmt.Sprintf(`import json
VISIBLE = json.loads(%q)
def median(values):
    if [values] not in VISIBLE:
        for path in ("/tmp/leak.txt", "/dev/shm/leak.txt"):
            with open(path, "a") as f:
                f.write("LEAK " + json.dumps(values) + "\n")
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) %% 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2
`, b)
}

// TestGraderGarbageVoids: a grader that answers a submitted answer's
// grading with something that is not an answer (a page, a credit out of
// range, a verdict without its reason, inputs that are not argument
// lists) voids the episode: it ends without a reward, its record says
// error (grader_failed) and nothing of what the grader or the cases
// said, a step after it is refused, nothing the hidden cases wrote is
// readable, and the next reset works. It used to be a refusal that kept
// the episode running, the hidden cases' leftovers in its /tmp.
func TestGraderGarbageVoids(t *testing.T) {
	testenv.RequireRoot(t)
	for _, tt := range []struct {
		name, route, body, task string
	}{
		{"judge_page", RouteJudge, "<html><script>alert(1)</script></html>", "software/median"},
		{"judge_credit", RouteJudge, `{"credit": 7, "reason": "all pass"}`, "software/median"},
		{"judge_no_reason", RouteJudge, `{"credit": 1}`, "software/median"},
		{"cases_not_lists", RouteCases, `{"inputs": [1, "two"]}`, "software/median"},
		{"score_page", RouteScore, "<html></html>", "logs/error_count"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewClient(ClientConfig{URL: garbageGrader(t, tt.route, tt.body), Key: testKey, Attempts: 1})
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var recs []results.Record
			env, err := episode.New(episode.Config{Grader: c, Sandbox: sandboxtest.Shared(t), OnEnd: func(r results.Record) {
				mu.Lock()
				defer mu.Unlock()
				recs = append(recs, r)
			}})
			if err != nil {
				t.Fatal(err)
			}
			defer env.Close()
			r := &episodeRun{t: t, env: env}
			if _, err := env.Reset(context.Background(), episode.ResetOptions{TaskID: tt.task}); err != nil {
				t.Fatal(err)
			}
			if tt.task == "software/median" {
				r.step("write_file", map[string]any{"path": "solution.py", "content": leakyMedian(t)})
			}
			s := r.step("submit", map[string]any{"answer": "7"})
			if !s.Done || s.Reward != 0 || !strings.Contains(s.Error, results.ReasonGrader) || strings.Contains(s.Output+s.Error, "LEAK") || strings.Contains(s.Error, "alert") {
				t.Fatalf("the submit: %+v, want the episode ended without a reward, saying %s", s, results.ReasonGrader)
			}
			mu.Lock()
			got := append([]results.Record(nil), recs...)
			mu.Unlock()
			if len(got) != 1 || got[0].End != results.EndError || got[0].Reason != results.ReasonGrader || got[0].Reward != 0 {
				t.Fatalf("records %+v, want the episode's, end error, reason %s", got, results.ReasonGrader)
			}
			if line, err := got[0].Marshal(); err != nil || strings.Contains(string(line), "LEAK") || strings.Contains(string(line), "alert") {
				t.Fatalf("the record: %s %v", line, err)
			}
			after := r.step("run_python", map[string]any{"code": "print(open('/tmp/leak.txt').read())"})
			if !after.Done || !strings.Contains(after.Error, "refused") || strings.Contains(after.Output, "LEAK") {
				t.Fatalf("a step after it: %+v, want it refused", after)
			}
			if _, err := env.Reset(context.Background(), episode.ResetOptions{TaskID: tt.task}); err != nil {
				t.Fatalf("the next reset: %v", err)
			}
			look := r.step("run_python", map[string]any{"code": "import os; print(os.listdir('/tmp'), os.listdir('/dev/shm'), 'listed')"})
			if !strings.Contains(look.Output, "[] [] listed") {
				t.Fatalf("the next episode finds: %s", look.Output)
			}
		})
	}
}
