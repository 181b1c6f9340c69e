package adapter

import (
	"context"
	"fmt"
	"time"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/store"
)

// Warm claims of one campaign in this process are served in batches
// (issue 41): a claim that finds no batch under way leads one; claims
// that come while it runs queue, and the first of them leads the next
// batch, which takes them all. A batch holds the campaign's lock once:
// it reads the state once, hands each claim its own ready slot in the
// order they came, writes their bind files, and appends their claim
// records in one synced write; then it answers them. So a burst of n
// claims costs a few holds of the lock, not n, and what custody needs
// is unchanged: every claim is decided on the journal read under the
// lock and journalled under it, after its bind file. A claim the batch
// finds no ready slot for is answered drained and makes its cold
// workspace holding the lock alone (claimCold), behind the batch.

// claimReq is one claim's task and attempt.
type claimReq struct {
	task, attempt string
}

// claimResult answers a claim: bound (cl), refused (err), drained (no
// ready slot was left for it), or lead: the claim leads the next batch.
type claimResult struct {
	cl      Claimed
	err     error
	drained bool
	lead    bool
}

// queuedClaim is a claim waiting in its campaign's queue.
type queuedClaim struct {
	req  claimReq
	done chan claimResult // buffered: one answer
}

// claimQueue is one campaign's claims in this process.
type claimQueue struct {
	// leading: a batch is under way (its leader answers or hands the
	// lead on before it returns); idle is closed when it ends.
	leading bool
	idle    chan struct{}
	waiting []*queuedClaim
}

// refillYield bounds how long a refill lets the claims under way go
// first (claimsIdle), so that a stream of claims cannot starve it.
const refillYield = 250 * time.Millisecond

// claimsIdle returns once no batch of key's claims is under way in this
// process, refillYield at most, or when ctx ends: a refill takes the
// campaign's lock after the claims of a burst, not between them.
func (a *Adapter) claimsIdle(ctx context.Context, key string) {
	a.claimsMu.Lock()
	cq := a.claims[key]
	if cq == nil || !cq.leading {
		a.claimsMu.Unlock()
		return
	}
	idle := cq.idle
	a.claimsMu.Unlock()
	t := time.NewTimer(refillYield)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
	case <-ctx.Done():
	}
}

// claimWarm serves the claim in a batch of c's claims (see above).
func (a *Adapter) claimWarm(ctx context.Context, c *store.Campaign, task, attempt string) claimResult {
	q := &queuedClaim{req: claimReq{task: task, attempt: attempt}, done: make(chan claimResult, 1)}
	a.claimsMu.Lock()
	if a.claims == nil {
		a.claims = map[string]*claimQueue{}
	}
	cq := a.claims[c.Key]
	if cq == nil {
		cq = &claimQueue{}
		a.claims[c.Key] = cq
	}
	lead := !cq.leading
	if lead {
		cq.leading, cq.idle = true, make(chan struct{})
	} else {
		cq.waiting = append(cq.waiting, q)
	}
	a.claimsMu.Unlock()
	if !lead {
		var res claimResult
		select {
		case res = <-q.done:
		case <-ctx.Done():
			if a.dropClaim(c.Key, q) {
				return claimResult{err: ctx.Err()}
			}
			// A batch took it: its answer comes (a batch does not wait
			// for anything but the lock, which it holds).
			res = <-q.done
		}
		if !res.lead {
			return res
		}
	}
	return a.leadClaims(ctx, c, q)
}

// dropClaim takes q out of its queue; false when a batch took it first.
func (a *Adapter) dropClaim(key string, q *queuedClaim) bool {
	a.claimsMu.Lock()
	defer a.claimsMu.Unlock()
	cq := a.claims[key]
	for i, w := range cq.waiting {
		if w == q {
			cq.waiting = append(cq.waiting[:i], cq.waiting[i+1:]...)
			return true
		}
	}
	return false
}

// leadClaims runs a batch led by own: once the lock is held it takes
// every claim queued, serves them and own, answers them, and hands the
// lead to the first claim queued since (or ends the leading). It returns
// own's answer.
func (a *Adapter) leadClaims(ctx context.Context, c *store.Campaign, own *queuedClaim) claimResult {
	defer a.passLead(c.Key)
	h, err := a.shareHold(ctx, c)
	if err != nil {
		// Own's request is over; the claims queued are not: the next
		// leader takes the lock for them with its own request's.
		return claimResult{err: err}
	}
	a.claimsMu.Lock()
	cq := a.claims[c.Key]
	batch := append([]*queuedClaim{own}, cq.waiting...)
	cq.waiting = nil
	a.claimsMu.Unlock()
	reqs := make([]claimReq, len(batch))
	for i, q := range batch {
		reqs[i] = q.req
	}
	// The batch serves the claims queued as well as own: own's request
	// ending does not cut it short (it waits for nothing but its files
	// and the driver's bind).
	out := a.claimBatch(context.WithoutCancel(ctx), c, h.j, reqs)
	a.leaveHold(c.Key, h)
	for i, q := range batch[1:] {
		q.done <- out[i+1]
	}
	return out[0]
}

// passLead hands the lead of key's claims to the first one queued, or
// ends the leading when none is.
func (a *Adapter) passLead(key string) {
	a.claimsMu.Lock()
	defer a.claimsMu.Unlock()
	cq := a.claims[key]
	if len(cq.waiting) == 0 {
		cq.leading = false
		close(cq.idle)
		return
	}
	next := cq.waiting[0]
	cq.waiting = cq.waiting[1:]
	next.done <- claimResult{lead: true}
}

// claimBatch serves reqs, in order, in a hold of c's lock (its journal
// j): each gets a ready
// slot of its own and is bound to it, or is refused (a task and attempt
// bound already, in the journal or earlier in the batch), or is answered
// drained when no ready slot is left.
func (a *Adapter) claimBatch(ctx context.Context, c *store.Campaign, j *campaign.Journal, reqs []claimReq) []claimResult {
	out := make([]claimResult, len(reqs))
	fail := func(err error) []claimResult {
		for i := range out {
			out[i] = claimResult{err: err}
		}
		return out
	}
	st, err := a.claimable(c)
	if err != nil {
		return fail(err)
	}
	ready := st.PoolReady()
	taken := map[claimReq]bool{}
	var slots []campaign.Slot
	var served []int
	for i, r := range reqs {
		if err := claimedAlready(c, st, r.task, r.attempt); err != nil {
			out[i].err = err
			continue
		}
		if taken[r] {
			out[i].err = fmt.Errorf("campaign %s: %w (by a claim made at the same time): give each claim of one task an attempt_id of its own", c.ID, ErrTaskClaimed)
			continue
		}
		taken[r] = true
		if len(slots) == len(ready) {
			out[i].drained = true
			continue
		}
		slots = append(slots, ready[len(slots)])
		served = append(served, i)
	}
	if len(slots) == 0 {
		return out
	}
	sreqs := make([]claimReq, len(served))
	for k, i := range served {
		sreqs[k] = reqs[i]
	}
	bound, err := a.bindSlots(ctx, c, j, st, slots, sreqs)
	if err != nil {
		for _, i := range served {
			out[i].err = err
		}
		return out
	}
	for k, i := range served {
		out[i] = bound[k]
		if bound[k].err == nil {
			a.log().Info("pool: claimed", "campaign", c.ID, "slot", bound[k].cl.Slot, "agent", bound[k].cl.Workspace.AgentID, "warm", true)
		}
	}
	return out
}
