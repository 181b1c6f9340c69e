package docker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/adapter/docker"
	"github.com/agentpen/agentpen/adapter/drivertest"
	"github.com/agentpen/agentpen/campaign"
)

// poolHarness is a harness on the real daemon with the grader's key.
func poolHarness(t *testing.T) (*drivertest.Harness, func(string) campaign.CampaignSpec) {
	d, cli := realDocker(t)
	img := imageID(t, cli, workbenchImage)
	getenv := func(k string) string {
		if k == campaign.DefaultAPIKeyEnv {
			return "pool-key-5c0e7a91d2b84f63a1e0"
		}
		return ""
	}
	h := drivertest.NewHarness(t, &adapter.Adapter{Driver: d, Getenv: getenv, ReadyTimeout: 60 * time.Second}, t.TempDir())
	spec := func(id string) campaign.CampaignSpec {
		s := workbenchSpec(id, img, e2eTasks[:1])
		s.Pool = 4
		t.Cleanup(func() { forceRemove(cli, id) })
		return s
	}
	return h, spec
}

// resetOn posts an HTTP reset with body on the workspace's socket and
// returns what it answered.
func resetOn(t *testing.T, ws adapter.Workspace, body string) string {
	t.Helper()
	hc := docker.UnixHTTPClient(ws.Socket, 30*time.Second)
	defer hc.CloseIdleConnections()
	resp, err := hc.Post("http://workbench/reset", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return fmt.Sprintf("%d %s", resp.StatusCode, b)
}

// TestPoolClaims claims 64 workspaces in a row while the pool refills
// (as agentpen serve does, in the background): each is a workspace no
// other claim got, bound to its claim's task (a reset naming another is
// refused), every one attested, and nothing is left after the removal.
func TestPoolClaims(t *testing.T) {
	h, spec := poolHarness(t)
	ctx := t.Context()
	id := uniqueCampaign(t)
	_, rep, err := h.BringUpAttested(ctx, spec(id), adapter.AttestOptions{})
	if err != nil || !rep.OK {
		t.Fatalf("bring-up: %v (ok %v, failed %v)", err, rep != nil && rep.OK, rep)
	}
	st, err := h.State(id)
	if err != nil || len(st.PoolReady()) != 4 {
		t.Fatalf("after bring-up: %d ready pool slots (%v), want 4", len(st.PoolReady()), err)
	}
	// A pooled workspace is not handed out with the campaign.
	if c, err := h.Load(id); err != nil || len(c.Workspaces) != 1 {
		t.Fatalf("Load: %v workspaces, %v; want the spec's one", c, err)
	}

	stop := make(chan struct{})
	var refills sync.WaitGroup
	refills.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := h.Refill(ctx, id); err != nil {
				t.Errorf("refill: %v", err)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	const n = 64
	type got struct {
		task string
		cl   adapter.Claimed
	}
	var claims []got
	seen := map[string]bool{}
	warm := 0
	for i := range n {
		task := e2eTasks[i%len(e2eTasks)]
		cl, err := h.Claim(ctx, id, task, fmt.Sprint("c", i))
		if err != nil {
			close(stop)
			refills.Wait()
			t.Fatalf("claim %d: %v", i, err)
		}
		ws := cl.Workspace
		if seen[ws.ContainerID] || seen[ws.AgentID] || seen[filepath.Dir(ws.Socket)] {
			t.Fatalf("claim %d got %s again", i, ws.AgentID)
		}
		seen[ws.ContainerID], seen[ws.AgentID], seen[filepath.Dir(ws.Socket)] = true, true, true
		if !ws.Pooled || ws.TaskID != task {
			t.Fatalf("claim %d: %+v", i, ws)
		}
		if cl.Warm {
			warm++
		}
		claims = append(claims, got{task, cl})
	}
	close(stop)
	refills.Wait()
	t.Logf("%d claims: %d warm, %d cold", n, warm, n-warm)
	if warm <= 4 {
		// The claims took tens of seconds; a refill takes one or two.
		t.Errorf("%d warm claims: only the bring-up's pool was claimed warm, no refill got a turn", warm)
	}
	if _, err := h.Claim(ctx, id, claims[0].task, "c0"); !errors.Is(err, adapter.ErrTaskClaimed) {
		t.Errorf("a task and attempt claimed twice: %v, want adapter.ErrTaskClaimed", err)
	}

	// Every claimed workspace was attested before it was handed out, the
	// journal binds each to its task, and each serves that task alone.
	st, err = h.State(id)
	if err != nil || st.Status != campaign.StatusReady {
		t.Fatalf("state %v: %v", st.Status, err)
	}
	bySlot := map[int]campaign.Slot{}
	for _, s := range st.Pool {
		bySlot[s.N] = s
	}
	for i, c := range claims {
		s := bySlot[c.cl.Slot]
		if !s.Attested || s.Claim == nil || s.Claim.TaskID != c.task || s.Claim.AttemptID != fmt.Sprint("c", i) || s.ContainerID != c.cl.Workspace.ContainerID {
			t.Errorf("claim %d: slot %+v (claim %+v), want attested and bound to %s", i, s, s.Claim, c.task)
		}
		other := e2eTasks[(i+1)%len(e2eTasks)]
		if got := resetOn(t, c.cl.Workspace, `{"task_id":"`+other+`"}`); !strings.Contains(got, "bound to its task") {
			t.Errorf("claim %d: a reset naming %s answered %.200s, want refused", i, other, got)
		}
		if got := resetOn(t, c.cl.Workspace, `{}`); !strings.Contains(got, `"task_id":"`+c.task+`"`) {
			t.Errorf("claim %d: a bare reset answered %.200s, want %s", i, got, c.task)
		}
	}
	// The proxy's view (Load) serves the claimed workspaces, bound alike.
	lc, err := h.Load(id)
	if err != nil || len(lc.Workspaces) != 1+n {
		t.Fatalf("Load after the claims: %d workspaces (%v), want %d", len(lc.Workspaces), err, 1+n)
	}
	// The whole campaign attests: claimed workspaces have their bind
	// file, unclaimed ones none.
	full, err := h.Attest(ctx, id, adapter.AttestOptions{})
	if err != nil || !full.OK {
		t.Fatalf("attestation after the claims: %v, failed %v", err, full.FailedChecks)
	}
	rep2, err := h.Cleanup(ctx, id)
	if err != nil || !rep2.OK {
		t.Fatalf("cleanup: %v %+v", err, rep2)
	}
	_, cli := realDocker(t)
	if cs, ns := owned(t, cli, id); len(cs)+len(ns) != 0 {
		t.Fatalf("left after the removal: %v %v", cs, ns)
	}
}

// TestPoolClaimRaces races a claim against a removal (down, DELETE) and
// against an expiry: each ends in one answer (bound before the removal,
// and removed with it; or refused as not up) and nothing is left.
func TestPoolClaimRaces(t *testing.T) {
	h, spec := poolHarness(t)
	_, cli := realDocker(t)
	for _, how := range []string{"delete", "ttl"} {
		t.Run(how, func(t *testing.T) {
			ctx := t.Context()
			id := uniqueCampaign(t)
			s := spec(id)
			s.TTLSeconds = 60
			if _, rep, err := h.BringUpAttested(ctx, s, adapter.AttestOptions{}); err != nil || !rep.OK {
				t.Fatalf("bring-up: %v %v", err, rep.FailureLines())
			}
			var wg sync.WaitGroup
			var cl adapter.Claimed
			var claimErr, removeErr error
			wg.Go(func() { cl, claimErr = h.Claim(ctx, id, e2eTasks[1], "race") })
			wg.Go(func() {
				if how == "delete" {
					_, removeErr = h.Cleanup(ctx, id)
					return
				}
				res, err := h.Expire(ctx, id, time.Now().Add(time.Hour))
				if err == nil && (res.Reason != campaign.ReasonTTL || res.Report == nil || !res.Report.OK) {
					err = fmt.Errorf("expiry: %+v", res)
				}
				removeErr = err
			})
			wg.Wait()
			if removeErr != nil {
				t.Fatalf("removal: %v", removeErr)
			}
			switch {
			case claimErr == nil:
				t.Logf("the claim won: %s bound, then removed with the campaign", cl.Workspace.AgentID)
			case errors.Is(claimErr, adapter.ErrNotUp):
				t.Logf("the removal won: %v", claimErr)
			default:
				t.Fatalf("claim: %v, want bound or refused as not up", claimErr)
			}
			st, err := h.State(id)
			if err != nil || st.Status != campaign.StatusRemoved || len(st.Live()) != 0 {
				t.Fatalf("after the race: %v, %d live (%v)", st.Status, len(st.Live()), err)
			}
			if claimErr == nil && st.Pool[cl.Slot].Claim == nil {
				t.Error("a claim answered yet not journalled")
			}
			if _, err := h.Claim(context.Background(), id, e2eTasks[2], "late"); !errors.Is(err, adapter.ErrNotUp) {
				t.Errorf("a claim after the removal: %v, want adapter.ErrNotUp", err)
			}
			if cs, ns := owned(t, cli, id); len(cs)+len(ns) != 0 {
				t.Fatalf("left after the race: %v %v", cs, ns)
			}
		})
	}
}
