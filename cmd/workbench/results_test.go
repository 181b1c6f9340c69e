package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentpen/agentpen/internal/testkit/oracle"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/internal/testkit/workbenchtest"
	"github.com/agentpen/agentpen/workbench/client"
	"github.com/agentpen/agentpen/workbench/results"
)

// TestServeResultsFile: with --results-file, an oracle episode played
// over the WebSocket leaves one record with the reward the client saw,
// and the next episode, cut short when its session closes, one more
// saying so; the file is 0600.
func TestServeResultsFile(t *testing.T) {
	s := startServe(t, "--results-file", "{{RUNDIR}}/"+results.FileName)
	path := filepath.Join(filepath.Dir(s.Socket), results.FileName)
	const task = "logs/error_count@1"
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	w := workbenchtest.Dial(t, ctx, s.URL)
	first, err := w.Reset(ctx, client.ResetOptions{TaskID: task})
	if err != nil {
		t.Fatal(err)
	}
	firstID, _ := w.State(ctx)
	var reward float64
	step := func(tool string, args map[string]any) (oracle.Result, error) {
		r, err := w.Step(ctx, tool, workbenchtest.Args(args))
		if err != nil {
			return oracle.Result{}, err
		}
		reward = r.Reward
		return oracle.Result{Output: r.Observation.Output, Error: r.Observation.Error, Done: r.Done, Reward: r.Reward}, nil
	}
	if _, err := oracle.PlayTask(task, first.Observation.Task, step); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Reset(ctx, client.ResetOptions{TaskID: task}); err != nil {
		t.Fatal(err)
	}
	secondID, _ := w.State(ctx)
	w.Close()

	var recs []results.Record
	testenv.WaitFor(t, "two records in the results file", func() bool {
		f, err := os.Open(path)
		if err != nil {
			return false
		}
		defer f.Close()
		got, _, refused, err := results.Read(f, 0)
		if err != nil || len(refused) != 0 {
			t.Fatalf("read: %v, refused %v", err, refused)
		}
		recs = got
		return len(recs) >= 2
	})
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2: %+v", len(recs), recs)
	}
	a, b := recs[0], recs[1]
	if a.EpisodeID != firstID.EpisodeID || a.TaskID != task || a.End != results.EndSubmitted || a.Reward != 1 || a.Reward != reward {
		t.Errorf("the oracle episode's record: %+v (client saw reward %v)", a, reward)
	}
	if b.EpisodeID != secondID.EpisodeID || b.End != results.EndClosed || b.Steps != 0 {
		t.Errorf("the closed episode's record: %+v", b)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the results file: %v %v, want mode 0600", fi.Mode(), err)
	}
}
