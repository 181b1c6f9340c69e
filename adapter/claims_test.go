package adapter

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/fakedriver"
	"github.com/agentpen/agentpen/store"
)

// fakePool brings up, on the fake runtime, a campaign of one workspace
// and a pool of n, and journals it attested (the fake runs no probes).
func fakePool(t *testing.T, a *Adapter, root *store.Root, id string, n int) *store.Campaign {
	t.Helper()
	spec := campaign.CampaignSpec{CampaignID: id, Server: campaign.ServerSpec{Image: fakeImage}, Pool: n}
	spec.Workspaces = append(spec.Workspaces, campaign.WorkspaceSpec{TaskID: "software/median", Image: fakeImage})
	opts, err := root.PlanOptions()
	if err != nil {
		t.Fatal(err)
	}
	p, err := campaign.Validate(spec, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.BringUp(t.Context(), root, p); err != nil {
		t.Fatal(err)
	}
	c, err := root.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	j, err := a.openJournal(c)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if err := j.Append(campaign.Record{Op: campaign.OpAttested, Gen: 1, Status: campaign.AttestOK, Report: "r", Digest: "d"}); err != nil {
		t.Fatal(err)
	}
	return c
}

// queued waits until n claims of key wait in its queue while one more
// leads (blocked on the lock).
func queued(t *testing.T, a *Adapter, key string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		a.claimsMu.Lock()
		got, leading := 0, false
		if q := a.claims[key]; q != nil {
			got, leading = len(q.waiting), q.leading
		}
		a.claimsMu.Unlock()
		if leading && got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d claims queued, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestClaimBurst: claims that come while the campaign's lock is held
// (here by the test, as a removal or another process would) are served
// in one batch once it is free: each bound to a slot of its own, their
// records journalled in one write (one time, consecutive), a task and
// attempt asked twice in the burst bound once and refused once, and a
// claim whose request ended while it waited bound nothing.
func TestClaimBurst(t *testing.T) {
	d := fakedriver.New(map[string]string{"img": fakeImage})
	a, root := fakeEngine(t, d, t.TempDir())
	c := fakePool(t, a, root, "burst", 16)
	locks, err := a.Locks()
	if err != nil {
		t.Fatal(err)
	}
	held, err := locks.Campaign(t.Context(), c.Key, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	const n = 12
	type answer struct {
		cl  Claimed
		err error
	}
	answers := make([]answer, n+2)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			cl, err := a.Claim(t.Context(), c, "software/median", fmt.Sprint("a", i), AttestOptions{})
			answers[i] = answer{cl, err}
		})
		queued(t, a, c.Key, i) // in order: the first leads
	}
	wg.Go(func() { // the same task and attempt as the first
		cl, err := a.Claim(t.Context(), c, "software/median", "a0", AttestOptions{})
		answers[n] = answer{cl, err}
	})
	queued(t, a, c.Key, n)
	ctx, cancel := context.WithCancel(t.Context())
	wg.Go(func() {
		cl, err := a.Claim(ctx, c, "software/median", "gone", AttestOptions{})
		answers[n+1] = answer{cl, err}
	})
	queued(t, a, c.Key, n+1)
	cancel()
	queued(t, a, c.Key, n)
	held.Unlock()
	wg.Wait()

	slots := map[int]bool{}
	for i, ans := range answers[:n] {
		if ans.err != nil {
			t.Fatalf("claim %d: %v", i, ans.err)
		}
		if !ans.cl.Warm || slots[ans.cl.Slot] || ans.cl.Workspace.TaskID != "software/median" {
			t.Errorf("claim %d: %+v (slot taken before: %v)", i, ans.cl, slots[ans.cl.Slot])
		}
		slots[ans.cl.Slot] = true
	}
	if !errors.Is(answers[n].err, ErrTaskClaimed) {
		t.Errorf("the same task and attempt in the burst: %v, want ErrTaskClaimed", answers[n].err)
	}
	if !errors.Is(answers[n+1].err, context.Canceled) {
		t.Errorf("the claim whose request ended: %v, want context.Canceled", answers[n+1].err)
	}
	recs, _, err := c.Records()
	if err != nil {
		t.Fatal(err)
	}
	var claims []campaign.Record
	for _, r := range recs {
		if r.Op == campaign.OpClaim {
			claims = append(claims, r)
		}
	}
	if len(claims) != n {
		t.Fatalf("%d claims journalled, want %d", len(claims), n)
	}
	for i, r := range claims {
		if r.Attempt != fmt.Sprint("a", i) {
			t.Errorf("claim record %d: attempt %q, want the claims' order", i, r.Attempt)
		}
		if r.Seq != claims[0].Seq+i || !r.Time.Equal(claims[0].Time) {
			t.Errorf("claim record %d: seq %d at %v; the first %d at %v: not one batch", i, r.Seq, r.Time, claims[0].Seq, claims[0].Time)
		}
	}
	st, err := c.Read()
	if err != nil {
		t.Fatal(err)
	}
	if got := len(st.PoolReady()); got != 16-n {
		t.Errorf("%d slots ready after the burst, want %d", got, 16-n)
	}
	// The queue is idle: the next claim leads at once.
	if _, err := a.Claim(t.Context(), c, "software/median", "after", AttestOptions{}); err != nil {
		t.Fatalf("a claim after the burst: %v", err)
	}
}
