package adapter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/fakedriver"
	"github.com/agentpen/agentpen/store"
)

// fakePool brings up, on the fake runtime, a campaign of one workspace
// and a pool of n, and journals it attested (the fake runs no probes).
func fakePool(t testing.TB, a *Adapter, root *store.Root, id string, n int) *store.Campaign {
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

// TestRefillLetsClaimsIn: a claim that comes while a refill makes a
// workspace shares the refill's hold of the campaign's lock (hold.go):
// it is bound and journalled while the refill's create is in flight, and
// the refill makes one more for it; the refill judges its slots without
// the lock and journals the verdict under it; and when the journal took
// anything but claims meanwhile (here a note), it judges them again
// holding the lock.
func TestRefillLetsClaimsIn(t *testing.T) {
	for _, meanwhile := range []bool{false, true} {
		t.Run(fmt.Sprint("note meanwhile ", meanwhile), func(t *testing.T) {
			d := fakedriver.New(map[string]string{"img": fakeImage})
			a, root := fakeEngine(t, d, t.TempDir())
			c := fakePool(t, a, root, fmt.Sprint("refill-", meanwhile), 4)
			for i := range 2 {
				if _, err := a.Claim(t.Context(), c, "software/median", fmt.Sprint("before", i), AttestOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			locks, err := a.Locks()
			if err != nil {
				t.Fatal(err)
			}
			locked := func() bool {
				l, err := locks.Campaign(t.Context(), c.Key, 0)
				if err != nil {
					return true
				}
				l.Unlock()
				return false
			}
			var claimErr error
			creates := 0
			d.CreateFunc = func(ctx context.Context, o *driver.Object) (string, error) {
				if o.Kind == campaign.KindContainer {
					if creates++; creates == 1 {
						// The claim ends while the refill's create is in
						// flight: it does not wait for it.
						done := make(chan struct{})
						go func() {
							defer close(done)
							_, claimErr = a.Claim(context.Background(), c, "software/median", "during", AttestOptions{})
						}()
						select {
						case <-done:
						case <-time.After(10 * time.Second):
							t.Error("the claim waited for the refill's create")
							<-done
						}
					}
				}
				return d.Runtime.Create(o)
			}
			var execLocked []bool
			var mu sync.Mutex
			d.ExecFunc = func(ctx context.Context, id string, cmd []string, opts driver.ExecOptions) (driver.ExecResult, error) {
				mu.Lock()
				defer mu.Unlock()
				l := locked()
				if !l && meanwhile && !slices.Contains(execLocked, false) {
					note(t, a, c)
				}
				execLocked = append(execLocked, l)
				return driver.ExecResult{ExitCode: -1}, errors.New("fakedriver: no process runs here")
			}
			// The fake runs no probes: the verdict fails, either way.
			if _, err := a.Refill(t.Context(), c, AttestOptions{}); err == nil {
				t.Error("a refill whose probes failed: no error")
			}
			if claimErr != nil {
				t.Fatalf("the claim during the refill: %v", claimErr)
			}
			recs, _, err := c.Records()
			if err != nil {
				t.Fatal(err)
			}
			var order []string
			for _, r := range recs {
				switch {
				case r.Op == campaign.OpClaim && r.Attempt == "during":
					order = append(order, "claim")
				case r.Op == campaign.OpIntent && r.Kind == campaign.KindContainer && r.Labels[campaign.LabelPoolSlot] >= "4":
					// The refill's (the bring-up made slots 0 to 3).
					order = append(order, "intent "+r.Labels[campaign.LabelPoolSlot])
				}
			}
			if !slices.Equal(order, []string{"intent 4", "claim", "intent 5", "intent 6"}) {
				t.Errorf("journal order %v: the claim did not come between the refill's first two", order)
			}
			if len(execLocked) == 0 || execLocked[0] {
				t.Fatalf("the probes ran holding the lock: %v", execLocked)
			}
			again := slices.Contains(execLocked, true)
			if again != meanwhile {
				t.Errorf("probes under the lock: %v (note meanwhile %v)", execLocked, meanwhile)
			}
		})
	}
}

// note journals a note in c, holding its lock.
func note(t *testing.T, a *Adapter, c *store.Campaign) {
	t.Helper()
	lock, err := a.lockCampaign(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	j, err := a.openJournal(c)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if err := j.Append(campaign.Record{Op: campaign.OpNote, Note: "meanwhile"}); err != nil {
		t.Fatal(err)
	}
}

// TestRefillLetsAClaimBurstGoFirst: a refill that comes while a burst's
// claims are under way takes the lock once they are served, not between
// two of their batches (with the lock's queue alone, it was ahead of the
// second batch).
func TestRefillLetsAClaimBurstGoFirst(t *testing.T) {
	d := fakedriver.New(map[string]string{"img": fakeImage})
	a, root := fakeEngine(t, d, t.TempDir())
	c := fakePool(t, a, root, "yield", 4)
	locks, err := a.Locks()
	if err != nil {
		t.Fatal(err)
	}
	held, err := locks.Campaign(t.Context(), c.Key, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	claim := func(attempt string) {
		wg.Go(func() {
			if _, err := a.Claim(context.Background(), c, "software/median", attempt, AttestOptions{}); err != nil {
				t.Errorf("claim %s: %v", attempt, err)
			}
		})
	}
	// The second claim comes while the first one's batch journals it:
	// it leads the next batch.
	a.Journalled = func(_ string, r campaign.Record) {
		if r.Op == campaign.OpClaim && r.Attempt == "first" {
			claim("second")
			queued(t, a, c.Key, 1)
		}
	}
	claim("first")
	queued(t, a, c.Key, 0)
	wg.Go(func() { a.Refill(context.Background(), c, AttestOptions{}) })
	time.Sleep(50 * time.Millisecond) // the refill waits for its turn
	held.Unlock()
	wg.Wait()
	recs, _, err := c.Records()
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, r := range recs {
		switch {
		case r.Op == campaign.OpClaim:
			order = append(order, r.Attempt)
		case r.Op == campaign.OpIntent && r.Labels[campaign.LabelPoolSlot] >= "4":
			order = append(order, "refill")
		}
	}
	if len(order) < 3 || !slices.Equal(order[:3], []string{"first", "second", "refill"}) {
		t.Errorf("journal order %v: the refill came between the burst's claims", order)
	}
}

// TestSharedHoldLetsATakerAloneIn: once a taker of the lock alone (a
// removal, say) waits for a shared hold, a sharer that comes after it
// does not join the hold: it waits until the taker alone had the lock,
// so a stream of claims and refills cannot starve a removal.
func TestSharedHoldLetsATakerAloneIn(t *testing.T) {
	d := fakedriver.New(map[string]string{"img": fakeImage})
	a, root := fakeEngine(t, d, t.TempDir())
	c := fakePool(t, a, root, "alone", 1)
	first, err := a.shareHold(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	joined, err := a.shareHold(t.Context(), c)
	if err != nil || joined != first {
		t.Fatalf("a second sharer did not join the hold: %v", err)
	}
	a.leaveHold(c.Key, joined)
	var mu sync.Mutex
	var order []string
	mark := func(s string) {
		mu.Lock()
		order = append(order, s)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		lock, err := a.lockCampaign(t.Context(), c)
		if err != nil {
			t.Error(err)
			return
		}
		mark("alone")
		lock.Unlock()
	})
	for {
		a.holdsMu.Lock()
		waiting := a.holds[c.Key].alone
		a.holdsMu.Unlock()
		if waiting == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	wg.Go(func() {
		h, err := a.shareHold(t.Context(), c)
		if err != nil {
			t.Error(err)
			return
		}
		mark("sharer")
		a.leaveHold(c.Key, h)
	})
	time.Sleep(50 * time.Millisecond) // the sharer's turn to join, were it given one
	mark("first leaves")
	a.leaveHold(c.Key, first)
	wg.Wait()
	if !slices.Equal(order, []string{"first leaves", "alone", "sharer"}) {
		t.Errorf("order %v, want the taker alone before the later sharer", order)
	}
}

// hookedBind is the fake driver with a hook run before each bind.
type hookedBind struct {
	*fakedriver.Driver
	hook func(task string)
}

func (h hookedBind) Bind(ctx context.Context, w driver.Workspace, task string) error {
	h.hook(task)
	return h.Driver.Bind(ctx, w, task)
}

// TestClaimAfterAFailedVerdictIsRefused: a warm claim sharing a refill's hold
// is decided on a ready campaign, and the refill's failing verdict (which
// fails the campaign closed) is journalled while the claim binds: the
// claim is still answered bound, and its record follows the failure.
func TestClaimAfterAFailedVerdictIsRefused(t *testing.T) {
	fd := fakedriver.New(map[string]string{"img": fakeImage})
	a, root := fakeEngine(t, fd, t.TempDir())
	c := fakePool(t, a, root, "failclosed", 4)
	failedJournalled := func() bool {
		recs, _, err := c.Records()
		if err != nil {
			return false
		}
		for _, r := range recs {
			if r.Op == campaign.OpAttested && r.Status != campaign.AttestOK {
				return true
			}
		}
		return false
	}
	for i := range 2 {
		if _, err := a.Claim(t.Context(), c, "software/median", string(rune('a'+i)), AttestOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	a.Driver = hookedBind{fd, func(task string) {
		deadline := time.Now().Add(20 * time.Second)
		for !failedJournalled() && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}}
	type ans struct {
		cl  Claimed
		err error
	}
	got := make(chan ans, 1)
	creates := 0
	fd.CreateFunc = func(ctx context.Context, o *driver.Object) (string, error) {
		if o.Kind == campaign.KindContainer {
			if creates++; creates == 1 {
				go func() {
					cl, err := a.Claim(context.Background(), c, "software/median", "during", AttestOptions{})
					got <- ans{cl, err}
				}()
				time.Sleep(100 * time.Millisecond) // the claim joins the refill's hold
			}
		}
		return fd.Runtime.Create(o)
	}
	if _, err := a.Refill(t.Context(), c, AttestOptions{}); err == nil {
		t.Fatal("the fake's refill verdict should fail")
	}
	r := <-got
	recs, _, _ := c.Records()
	failedAt, claimAt := -1, -1
	for i, rec := range recs {
		if rec.Op == campaign.OpAttested && rec.Status != campaign.AttestOK && failedAt < 0 {
			failedAt = i
		}
		if rec.Op == campaign.OpClaim && rec.Attempt == "during" {
			claimAt = i
		}
	}
	st, _ := c.Read()
	t.Logf("claim answer: err=%v slot=%d; journal: failed verdict at %d, claim at %d; status now %s", r.err, r.cl.Slot, failedAt, claimAt, st.Status)
	if r.err == nil && claimAt > failedAt && failedAt >= 0 {
		t.Fatalf("a workspace was handed out (slot %d) and its claim journalled AFTER the campaign was failed closed (record %d after %d)", r.cl.Slot, claimAt, failedAt)
	}
}
