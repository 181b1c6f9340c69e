package adapter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/cleanup"
	"github.com/agentpen/agentpen/store"
)

// A campaign's pool (campaign.CampaignSpec.Pool) is workspaces made
// ahead of their task, attested, and handed out by Claim: a claim binds a
// task to the lowest ready slot (its bind file, then campaign.OpClaim in
// the journal), under the campaign's lock (a hold of it shared with the
// other claims and the refills of this process: hold.go), so a claim racing a removal
// (down, DELETE, an expiry) either binds before it begins (and the
// removal takes the workspace with the rest) or finds the campaign not up
// and binds nothing. A slot is claimed once; nothing is recycled. Refill
// makes the pool whole again: each workspace created under the lock in a
// hold of its own, started and awaited without it, then attested (only
// its new slots are probed: claimed workspaces may be grading), the
// verdict journalled under the lock again (Refill says when the judging
// is done without it).

// ErrNoPool is returned (wrapped) by Claim for a campaign whose spec asks
// for no pool.
var ErrNoPool = errors.New("the campaign has no pool")

// ErrTaskClaimed is returned (wrapped) by Claim when the task and
// attempt are bound to a pooled workspace of the campaign already; it is
// an ErrConflict.
var ErrTaskClaimed error = kindError{"task and attempt already claimed", ErrConflict}

// Claimed is the answer of a claim.
type Claimed struct {
	// Workspace is the workspace bound to the task (Pooled).
	Workspace Workspace
	// Warm: it came from the pool; false: the pool was drained and it
	// was made, awaited and attested for this claim (a cold create).
	Warm bool
	// Slot is its pool slot; At when the claim was journalled.
	Slot int
	At   time.Time
}

// Claim binds task (and attempt, "" for none) to a ready pooled
// workspace of the campaign c, or, when the pool is drained, to one made
// for it at once (Warm false). The task is checked for its syntax only:
// the caller validates it against the catalogue. The campaign must be
// ready (ErrNotUp otherwise, naming why); opts attest a cold one.
//
// Claims of one campaign in this process that come together are served
// together (claims.go): one hold of the lock, one read of the state, one
// synced append of their records. A claim the drained pool cannot serve
// warm makes its cold workspace holding the lock alone.
func (a *Adapter) Claim(ctx context.Context, c *store.Campaign, task, attempt string, opts AttestOptions) (Claimed, error) {
	if err := campaign.CheckTaskID("task_id", task); err != nil {
		return Claimed{}, err
	}
	if attempt != "" {
		if err := campaign.CheckID("attempt_id", attempt); err != nil {
			return Claimed{}, err
		}
	}
	res := a.claimWarm(ctx, c, task, attempt)
	if !res.drained {
		return res.cl, res.err
	}
	return a.claimCold(ctx, c, task, attempt, opts)
}

// claimCold is a claim the drained pool could not serve: it takes the
// lock alone, and binds the task to a ready slot (one a refill made
// meanwhile: Warm) or to one it makes, awaits and attests for it.
func (a *Adapter) claimCold(ctx context.Context, c *store.Campaign, task, attempt string, opts AttestOptions) (Claimed, error) {
	lock, err := a.lockCampaign(ctx, c)
	if err != nil {
		return Claimed{}, err
	}
	defer lock.Unlock()
	st, err := a.claimable(c)
	if err != nil {
		return Claimed{}, err
	}
	if err := claimedAlready(c, st, task, attempt); err != nil {
		return Claimed{}, err
	}
	j, err := a.openJournal(c)
	if err != nil {
		return Claimed{}, err
	}
	defer j.Close()
	ready := st.PoolReady()
	warm := len(ready) > 0
	if !warm {
		a.log().Info("pool drained: a cold create for the claim", "campaign", c.ID)
		slots, err := a.growPool(ctx, c, j, st, 1, true)
		if err != nil {
			return Claimed{}, err
		}
		if err := a.attestSlots(ctx, c, j, slots, opts); err != nil {
			return Claimed{}, err
		}
		if st, err = a.claimable(c); err != nil {
			return Claimed{}, err
		}
		if ready = st.PoolReady(); len(ready) == 0 {
			return Claimed{}, fmt.Errorf("campaign %s: the workspace made for the claim did not attest: %w", c.ID, ErrNotUp)
		}
	}
	bound, err := a.bindSlots(ctx, c, j, st, []campaign.Slot{ready[0]}, []claimReq{{task: task, attempt: attempt}})
	if err != nil {
		return Claimed{}, err
	}
	if bound[0].err != nil {
		return Claimed{}, bound[0].err
	}
	cl := bound[0].cl
	cl.Warm = warm
	a.log().Info("pool: claimed", "campaign", c.ID, "slot", cl.Slot, "agent", cl.Workspace.AgentID, "warm", warm)
	return cl, nil
}

// claimedAlready refuses a task and attempt bound to a slot of st's pool
// (ErrTaskClaimed).
func claimedAlready(c *store.Campaign, st store.State, task, attempt string) error {
	for _, s := range st.Pool {
		if s.Claim != nil && s.Claim.TaskID == task && s.Claim.AttemptID == attempt {
			// The task is not named: the error is logged, and task ids
			// stay out of logs (the caller knows what it asked for).
			return fmt.Errorf("campaign %s: %w (pool slot %d): give each claim of one task an attempt_id of its own", c.ID, ErrTaskClaimed, s.N)
		}
	}
	return nil
}

// bindSlots binds each claim reqs[i] to the ready slot slots[i] of c
// (state st), holding the campaign's lock: each slot's bind file, then
// the claims of every slot bound in one synced append. A slot whose bind
// fails answers its claim with the error (its record is not written);
// an error of the whole (the plan, the append) is returned alone.
func (a *Adapter) bindSlots(ctx context.Context, c *store.Campaign, j *campaign.Journal, st store.State, slots []campaign.Slot, reqs []claimReq) ([]claimResult, error) {
	// The plan of st's generation (ready: claimable), with these slots
	// alone: each is found, and its uid block set, below.
	p, err := planOf(c, st.Latest())
	if err != nil {
		return nil, err
	}
	nums := make([]int, len(slots))
	for i, s := range slots {
		nums[i] = s.N
	}
	if err := p.AddPool(nums); err != nil {
		return nil, err
	}
	live := st.Latest().Live()
	out := make([]claimResult, len(slots))
	var recs []campaign.Record
	var bound []int
	for i, slot := range slots {
		k := slices.IndexFunc(p.Agents, func(ag campaign.AgentPlan) bool {
			return ag.Pool && ag.Index == len(p.Spec.Workspaces)+slot.N
		})
		if k < 0 {
			return nil, fmt.Errorf("campaign %s: pool slot %d: not in its plan", c.ID, slot.N)
		}
		base := 0
		for _, r := range live {
			if r.Kind == campaign.KindContainer && r.ID == slot.ContainerID {
				base, _ = campaign.ParseUIDBlock(r.Labels[campaign.LabelUIDBlock])
			}
		}
		p.SetUIDBlock(k, base)
		ag := p.Agents[k]
		h, err := a.Driver.Workspace(ag, live)
		if err == nil {
			err = a.Driver.Bind(ctx, h, reqs[i].task)
		}
		if err != nil {
			out[i].err = fmt.Errorf("campaign %s: pool slot %d: %w", c.ID, slot.N, err)
			continue
		}
		out[i].cl = Claimed{Workspace: workspace(ag, reqs[i].task, h), Warm: true, Slot: slot.N}
		recs = append(recs, campaign.Record{Op: campaign.OpClaim, Gen: st.Latest().N, Kind: campaign.KindContainer, Role: campaign.RoleWork, Name: slot.Name, ID: slot.ContainerID, Task: reqs[i].task, Attempt: reqs[i].attempt})
		bound = append(bound, i)
	}
	// A refill sharing the hold may have failed the campaign closed
	// since st was read: its claims are then refused, as the bind files
	// of a failed append are left (below).
	turn := a.decideTurn(c.Key)
	turn.Lock()
	defer turn.Unlock()
	if err := stillReady(c); err != nil {
		return nil, err
	}
	if err := j.AppendAll(recs); err != nil {
		// The files are written and the journal says nothing: the slots
		// are bound but handed out to no one (a later claim of one fails
		// to write its file, which is there already).
		return nil, fmt.Errorf("journal the claims: %w", err)
	}
	now := time.Now()
	for _, i := range bound {
		out[i].cl.At = now
	}
	return out, nil
}

// claimable reads c's state and refuses a campaign that is not ready or
// has no pool.
func (a *Adapter) claimable(c *store.Campaign) (store.State, error) {
	st, err := a.readState(c)
	if err != nil {
		return st, fmt.Errorf("campaign %q: %w", c.ID, err)
	}
	if err := notReady(c, st); err != nil {
		return st, err
	}
	spec, err := c.Spec(st.Latest().N)
	if err != nil {
		return st, err
	}
	if spec.Pool == 0 {
		return st, fmt.Errorf("campaign %s: %w (its spec's pool is 0)", c.ID, ErrNoPool)
	}
	return st, nil
}

// notReady refuses a campaign (c, its state st) that is not ready.
func notReady(c *store.Campaign, st store.State) error {
	if st.Status == campaign.StatusReady {
		return nil
	}
	why := st.Reason(c.ID)
	if why == "" {
		why = "its latest attestation failed"
	}
	return &notUpError{fmt.Sprintf("campaign %s is %s: %s; nothing was claimed", c.ID, st.Status, why)}
}

// stillReady refuses a campaign that claimable let through and that is
// no longer ready: in the same hold of the lock, its journal took only
// this process's records since (claims, and a refill's: a failed verdict
// fails it closed), which change neither its runtime nor its spec.
func stillReady(c *store.Campaign) error {
	st, err := c.Read()
	if err != nil {
		return fmt.Errorf("campaign %q: %w", c.ID, err)
	}
	return notReady(c, st)
}

// Bounds of a refill (issue 41): a hold of the campaign's lock (shared
// with this process's claims: hold.go; a taker of the lock alone waits
// for it) makes refillPerHold workspaces; one Refill makes at most
// refillCap (the service refills again until the pool is whole).
const (
	refillPerHold = 1
	refillCap     = 8
)

// Refill makes c's pool whole again, up to refillCap workspaces: as many
// pooled workspaces as its spec's pool is short of ready ones, each
// created and journalled in a hold of the campaign's lock of its own
// (which this process's claims share: they do not wait for its daemon
// calls), started and awaited without it, then
// attested (those slots alone): judged without the lock, and the verdict
// journalled under it when the journal holds nothing but claims since
// the judging read it (judged again under the lock otherwise). It
// returns how many slots it made (0 for a campaign that is not ready or
// has no pool, and no error). A slot that does not come up stays
// journalled, unattested and never claimed, until the campaign is
// removed.
func (a *Adapter) Refill(ctx context.Context, c *store.Campaign, opts AttestOptions) (int, error) {
	// Each hold's workspaces are started and awaited, without the lock,
	// as soon as they are made: an attestation meanwhile (a cold claim's)
	// observes every container of the campaign, and one left made and not
	// started until the last hold would fail it.
	type started struct {
		up, failed []poolSlot
		err        error
	}
	res := make(chan started, refillCap)
	holds, made := 0, 0
	var stop error
	for made < refillCap {
		slots, err := a.refillHold(ctx, c, made)
		if err != nil {
			stop = err
			break
		}
		if len(slots) == 0 {
			break
		}
		made += len(slots)
		holds++
		go func() {
			up, failed, err := a.startSlots(ctx, c, slots)
			res <- started{up, failed, err}
		}()
	}
	var up, failed []poolSlot
	var errs []error
	for range holds {
		r := <-res
		up, failed = append(up, r.up...), append(failed, r.failed...)
		if r.err != nil {
			errs = append(errs, r.err)
		}
	}
	if len(failed) > 0 {
		if err := a.dropFailed(ctx, c, failed); err != nil {
			errs = append(errs, err)
		}
	}
	if stop != nil {
		if holds == 0 {
			return 0, stop
		}
		a.log().Warn("pool: refill stopped", "campaign", c.ID, "made", made, "err", stop)
	}
	if len(up) == 0 {
		return 0, errors.Join(errs...)
	}
	return len(up), a.attestRefill(ctx, c, up, opts)
}

// refillHold makes, in a shared hold of c's lock, up to refillPerHold
// pooled workspaces of the pool's shortfall beyond the ones the refill
// made already; none, and no error, for a campaign that is not ready,
// has no pool or is whole.
func (a *Adapter) refillHold(ctx context.Context, c *store.Campaign, made int) (slots []poolSlot, err error) {
	err = a.inRefillHold(ctx, c, func(h *sharedHold) error {
		slots, err = a.growHeld(ctx, c, h, made)
		return err
	})
	return slots, err
}

// growHeld is refillHold's work, with h held.
func (a *Adapter) growHeld(ctx context.Context, c *store.Campaign, h *sharedHold, made int) ([]poolSlot, error) {
	st, err := a.claimable(c)
	if errors.Is(err, ErrNotUp) || errors.Is(err, ErrNoPool) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	spec, err := c.Spec(st.Latest().N)
	if err != nil {
		return nil, err
	}
	need := min(spec.Pool-len(st.PoolReady())-made, refillPerHold)
	if need <= 0 {
		return nil, nil
	}
	return a.growPool(ctx, c, h.j, st, need, false)
}

// dropFailed removes a refill's slots that did not come up (dropSlots),
// in a shared hold of c's lock.
func (a *Adapter) dropFailed(ctx context.Context, c *store.Campaign, failed []poolSlot) error {
	return a.inRefillHold(ctx, c, func(h *sharedHold) error { return a.dropSlots(ctx, c, h.j, failed) })
}

// inRefillHold runs fn in the refill's turn and a shared hold of c's
// lock, after the claims waiting for it (claims go first).
func (a *Adapter) inRefillHold(ctx context.Context, c *store.Campaign, fn func(h *sharedHold) error) error {
	a.claimsIdle(ctx, c.Key)
	turn := a.refillTurn(c.Key)
	turn.Lock()
	defer turn.Unlock()
	h, err := a.shareHold(ctx, c)
	if err != nil {
		return err
	}
	defer a.leaveHold(c.Key, h)
	return fn(h)
}

// attestRefill attests the slots a refill made and started. It judges
// them on the journal as it reads it without the lock, then, holding the
// lock, journals the verdict when the journal holds nothing since but
// claims (which bind ready slots: neither the ones judged nor a
// container the judging observed changes), or judges again under the
// lock when it holds anything else (a removal, another attestation).
func (a *Adapter) attestRefill(ctx context.Context, c *store.Campaign, slots []poolSlot, opts AttestOptions) error {
	if len(slots) == 0 {
		return nil
	}
	scope := make([]int, 0, len(slots))
	for _, s := range slots {
		scope = append(scope, s.n)
	}
	recs, _, rerr := c.Records()
	var rep *attest.Report
	if rerr == nil {
		st := store.State{Lifecycle: campaign.Fold(recs)}
		if st.Status == campaign.StatusReady {
			var err error
			if _, _, rep, err = a.judge(ctx, c, st, opts, scope); err != nil {
				rep = nil
			}
		}
	}
	return a.inRefillHold(ctx, c, func(h *sharedHold) error {
		st, err := a.claimable(c)
		if err != nil {
			return fmt.Errorf("pool refill of %s: %w", c.ID, err)
		}
		j := h.j
		if rep != nil {
			now, _, err := c.Records()
			if err == nil && onlyClaimsSince(recs, now) {
				return a.verdict(ctx, c, j, st.Latest().N, rep)
			}
		}
		return a.attestSlots(ctx, c, j, slots, opts)
	})
}

// onlyClaimsSince reports whether now is before followed by claim
// records alone.
func onlyClaimsSince(before, now []campaign.Record) bool {
	if len(now) < len(before) || len(before) == 0 || now[len(before)-1].Seq != before[len(before)-1].Seq {
		return false
	}
	for _, r := range now[len(before):] {
		if r.Op != campaign.OpClaim {
			return false
		}
	}
	return true
}

// poolSlot is a pooled workspace a refill created.
type poolSlot struct {
	n  int
	ws Workspace
	// main is its container, made and not yet started.
	main *driver.Object
	// made are its journalled resources, in the order they were made.
	made []campaign.Resource
}

// growPool journals and creates n new pooled workspaces of c (its state
// st), holding the campaign's lock; with start it also starts them and
// awaits their readiness (a claim's cold create). It returns them.
func (a *Adapter) growPool(ctx context.Context, c *store.Campaign, j *campaign.Journal, st store.State, n int, start bool) ([]poolSlot, error) {
	lc, err := a.Load(c)
	if err != nil {
		return nil, err
	}
	p := lc.Plan
	first := st.NextPoolSlot()
	if first+n > campaign.MaxPoolSlots {
		return nil, fmt.Errorf("campaign %s: its pool has made %d workspaces, the most one generation may (%d)", c.ID, first, campaign.MaxPoolSlots)
	}
	nums := seq(first, first+n)
	if err := p.AddPool(nums); err != nil {
		return nil, err
	}
	agents := seq(len(p.Agents)-n, len(p.Agents))
	bases, claim, err := a.claimUIDBlocks(ctx, n)
	if err != nil {
		return nil, err
	}
	defer claim.release()
	for k, i := range agents {
		p.SetUIDBlock(i, bases[k])
	}
	l, err := a.Driver.Layout(ctx, driver.BringUp{Plan: p, Agents: agents, APIKey: a.getenv(p.Server.Spec.APIKeyEnv), Lock: a.lockName})
	if err != nil {
		return nil, err
	}
	if l.Done != nil {
		defer l.Done()
	}
	b := &bringUp{a: a, j: j, p: p, failed: map[string]failedCreate{}, progress: a.newProgress(p.CampaignID, map[string]int{campaign.RoleWork: n})}
	out := make([]poolSlot, 0, n)
	for k, u := range l.Workspaces {
		for _, o := range u.Objects() {
			if err := b.make(ctx, o); err != nil {
				return out, err
			}
		}
		var live []campaign.Resource
		for _, o := range u.Objects() {
			live = append(live, o.Resource(p.Generation))
		}
		ag := p.Agents[u.Agent]
		h, err := a.Driver.Workspace(ag, live)
		if err != nil {
			return out, err
		}
		out = append(out, poolSlot{n: nums[k], main: u.Main, ws: workspace(ag, "", h), made: live})
	}
	if !start {
		return out, nil
	}
	up, failed, err := a.startSlots(ctx, c, out)
	if derr := a.dropSlots(ctx, c, j, failed); derr != nil {
		err = errors.Join(err, derr)
	}
	return up, err
}

// startSlots starts the slots and awaits each one's readiness; it
// returns those that came up, and an error only when none did.
func (a *Adapter) startSlots(ctx context.Context, c *store.Campaign, slots []poolSlot) (up, failed []poolSlot, err error) {
	b := &bringUp{a: a, progress: a.newProgress(c.ID, nil)}
	type result struct {
		s   poolSlot
		err error
	}
	res := make(chan result, len(slots))
	for _, s := range slots {
		go func() {
			err := b.start(ctx, s.main)
			if err == nil {
				err = b.ready(ctx, s.main)
			}
			res <- result{s, err}
		}()
	}
	var errs []error
	for range slots {
		r := <-res
		if r.err != nil {
			a.log().Warn("pool: a workspace did not come up; it is removed", "campaign", c.ID, "slot", r.s.n, "err", r.err)
			errs = append(errs, r.err)
			failed = append(failed, r.s)
			continue
		}
		up = append(up, r.s)
	}
	if len(up) == 0 && len(errs) > 0 {
		return nil, failed, fmt.Errorf("pool of %s: %w", c.ID, errors.Join(errs...))
	}
	return up, failed, nil
}

// dropSlots removes the pooled workspaces that did not come up, by their
// journalled ids (their container first), with j held: left made and not
// running, the campaign's next attestation would find a container of it
// not running and fail the whole campaign closed. A slot removed is no
// longer the pool's, and a later refill makes another.
func (a *Adapter) dropSlots(ctx context.Context, c *store.Campaign, j *campaign.Journal, failed []poolSlot) error {
	var errs []error
	sem := make(chan struct{}, 1)
	for _, s := range failed {
		for _, r := range slices.Backward(s.made) {
			if r.ID == "" {
				continue
			}
			if o := a.remove(ctx, j, r, sem, false, []int{s.n}); o.After.State != cleanup.Absent {
				errs = append(errs, fmt.Errorf("pool of %s: slot %d's %s %s was not removed: %s %s", c.ID, s.n, r.Kind, short(r.ID), o.Decision.Action, o.Error))
			}
		}
	}
	return errors.Join(errs...)
}

// attestSlots attests the pooled workspaces slots made (the daemon's
// view of every container, the probes of those slots alone), holding the
// campaign's lock, and journals the verdict with their slot numbers: an
// ok verdict makes them claimable, a failed one fails the campaign
// closed (campaign.Fold).
func (a *Adapter) attestSlots(ctx context.Context, c *store.Campaign, j *campaign.Journal, slots []poolSlot, opts AttestOptions) error {
	if len(slots) == 0 {
		return nil
	}
	st, err := a.readState(c)
	if err != nil {
		return err
	}
	scope := make([]int, 0, len(slots))
	for _, s := range slots {
		scope = append(scope, s.n)
	}
	_, _, rep, err := a.judge(ctx, c, st, opts, scope)
	if err != nil {
		return err
	}
	return a.verdict(ctx, c, j, st.Latest().N, rep)
}

// verdict writes and journals the attestation rep of the pool's new
// slots (generation gen), holding the campaign's lock; a failed one
// fails the campaign closed, and is the error.
func (a *Adapter) verdict(ctx context.Context, c *store.Campaign, j *campaign.Journal, gen int, rep *attest.Report) error {
	turn := a.decideTurn(c.Key)
	turn.Lock()
	defer turn.Unlock()
	if _, err := a.writeAttestation(ctx, c, j, gen, rep); err != nil {
		return err
	}
	if !rep.OK {
		return fmt.Errorf("campaign %s: the pool's new workspaces did not attest (%v): the campaign is failed closed", c.ID, rep.FailedChecks)
	}
	return nil
}

// seq is the ints from first up to (not including) end.
func seq(first, end int) []int {
	var out []int
	for i := first; i < end; i++ {
		out = append(out, i)
	}
	return out
}
