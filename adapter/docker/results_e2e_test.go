package docker_test

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/adapter/drivertest"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/testlog"
	"github.com/agentpen/agentpen/workbench/results"
)

// TestResultsCollected (real daemon): oracle episodes played over two
// workspaces' sockets leave one result each, with the reward the client
// saw, collected into the campaign's results file once; lines planted in
// a run directory (a record of another task, an oversized line, garbage)
// and a results file replaced by a link are refused and logged, never
// stored; the episode played last is collected by the removal itself,
// and the results outlive the campaign.
func TestResultsCollected(t *testing.T) {
	d, cli := realDocker(t)
	img := imageID(t, cli, workbenchImage)
	id := uniqueCampaign(t)
	t.Cleanup(func() { forceRemove(cli, id) })
	var logs testlog.Buffer
	a := drivertest.NewHarness(t, &adapter.Adapter{Driver: d, Getenv: keyEnv, Logger: slog.New(slog.NewJSONHandler(&logs, nil))}, "")
	c, rep, err := a.BringUpAttested(t.Context(), workbenchSpec(id, img, e2eTasks[:2]), adapter.AttestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK {
		t.Fatalf("bring-up did not attest: %v", rep.FailureLines())
	}
	for _, w := range c.Workspaces {
		playOverSocket(t, w.Socket, w.TaskID)
	}
	sc, err := a.Root.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	rc := a.NewResultsCollector()
	got, err := rc.Collect(sc)
	if err != nil || got.New != 2 || len(got.Refused) != 0 {
		t.Fatalf("collect: %+v %v", got, err)
	}
	rs, err := sc.Results()
	if err != nil || len(rs) != 2 {
		t.Fatalf("results: %v %+v", err, rs)
	}
	// Each names the attestation its workspace ran under: the bring-up's.
	var attested string
	recs, _, err := sc.Records()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Op == campaign.OpAttested && r.Status == campaign.AttestOK {
			attested = r.Digest
		}
	}
	for i, r := range rs {
		w := c.Workspaces[r.Workspace]
		if r.Workspace != i || r.AgentID != w.AgentID || r.TaskID != w.TaskID || r.Reward != 1 || r.End != results.EndSubmitted || r.Generation != 1 ||
			attested == "" || r.Attestation != attested {
			t.Errorf("result %d: %+v (workspace %+v, attested %q)", i, r, w, attested)
		}
	}
	// adapter.Collected once: again, and by another collector, nothing new.
	for _, col := range []*adapter.ResultsCollector{rc, a.NewResultsCollector()} {
		if again, err := col.Collect(sc); err != nil || again.New != 0 {
			t.Fatalf("collected twice: %+v %v", again, err)
		}
	}

	// What the daemon's user (a container escape) can plant.
	forged := rs[0].Record
	forged.EpisodeID, forged.TaskID = "forged-episode-5c1e", e2eTasks[3]
	line, err := forged.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	planted := string(line) + `{"v":1,"episode_id":"` + strings.Repeat("x", 3*results.MaxLine) + "\"}\n" + "not json at all\n"
	f, err := os.OpenFile(filepath.Join(filepath.Dir(c.Workspaces[0].Socket), results.FileName), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(planted)
	f.Close()
	other := filepath.Join(filepath.Dir(c.Workspaces[1].Socket), results.FileName)
	if err := os.Remove(other); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", other); err != nil {
		t.Fatal(err)
	}
	got, err = rc.Collect(sc)
	if err != nil || got.New != 0 || len(got.Refused) != 4 {
		t.Fatalf("planted lines: %+v %v", got, err)
	}
	for _, r := range got.Refused {
		t.Logf("refused: workspace %d offset %d: %.120s", r.Workspace, r.Offset, r.Reason)
	}
	if n := strings.Count(logs.String(), `"msg":"results: a`); n != 4 {
		t.Errorf("%d refusals logged, want 4:\n%s", n, logs.String())
	}
	if strings.Contains(logs.String(), "forged-episode-5c1e") {
		t.Error("a refused record's content is in the log")
	}

	// One more episode; the removal collects it before the run
	// directories go, and the results stay.
	playOverSocket(t, c.Workspaces[0].Socket, c.Workspaces[0].TaskID)
	if _, err := a.Cleanup(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	rs, err = sc.Results()
	if err != nil || len(rs) != 3 || rs[2].Workspace != 0 || rs[2].Reward != 1 {
		t.Fatalf("after removal: %v %+v", err, rs)
	}
	for _, r := range rs {
		if r.EpisodeID == forged.EpisodeID {
			t.Fatalf("a forged record was stored: %+v", r)
		}
	}
}

// TestResultsCollectedAtExpiry (real daemon): an expiry (the ttl
// removal agentpen serve's timer and reconcile make) collects the last
// results before the run directories go, as a removal by down does, also
// those of a workspace claimed from the pool (under its own index and
// claimed task). Nothing collected the claimed workspace's results, and
// an expiry collected none.
func TestResultsCollectedAtExpiry(t *testing.T) {
	h, spec := poolHarness(t)
	ctx := t.Context()
	id := uniqueCampaign(t)
	s := spec(id)
	s.Pool, s.TTLSeconds = 1, 60
	if _, rep, err := h.BringUpAttested(ctx, s, adapter.AttestOptions{}); err != nil || !rep.OK {
		t.Fatalf("bring-up: %v %v", err, rep.FailureLines())
	}
	cl, err := h.Claim(ctx, id, e2eTasks[1], "")
	if err != nil {
		t.Fatal(err)
	}
	c, err := h.Load(id)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range c.Workspaces {
		playOverSocket(t, w.Socket, w.TaskID)
	}
	res, err := h.Expire(ctx, id, time.Now().Add(time.Hour))
	if err != nil || res.Reason != campaign.ReasonTTL {
		t.Fatalf("expiry: %+v %v", res, err)
	}
	st, err := h.State(id)
	if err != nil || st.Status != campaign.StatusRemoved {
		t.Fatalf("after the expiry: %v %v", st.Status, err)
	}
	sc, err := h.Root.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	rs, err := sc.Results()
	if err != nil {
		t.Fatal(err)
	}
	got := map[int]string{}
	for _, r := range rs {
		got[r.Workspace] = r.TaskID
	}
	want := map[int]string{0: e2eTasks[0], cl.Workspace.Index: e2eTasks[1]}
	if len(rs) != 2 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("results after the expiry: %+v, want one of each of %v", rs, want)
	}
}
