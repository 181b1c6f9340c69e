package adapter

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/store"
	"golang.org/x/sync/errgroup"
)

// ErrConflict is the kind of error (wrapped) when the daemon already holds
// resources of the campaign id (a twin campaign under another state root,
// or an earlier generation not cleaned up): nothing is created.
var ErrConflict = errors.New("conflict")

// ErrCampaignExists is returned (wrapped) by BringUp when the campaign's
// journal has a generation that is not verified removed. It is an
// ErrConflict, and reads "already exists" after the campaign's id.
var ErrCampaignExists error = kindError{"already exists", ErrConflict}

// kindError is a sentinel that is also a more general kind.
type kindError struct {
	msg  string
	kind error
}

func (e kindError) Error() string { return e.msg }
func (e kindError) Unwrap() error { return e.kind }

// BringUp brings up a validated plan (campaign.Validate's; the bring-up
// binds it to its generation): holding the campaign's lock, it refuses a
// campaign id that already has live resources (in this state root's
// journal or on the daemon, whatever the state root), starts a new
// generation with a fresh instance nonce, journals and creates the
// campaign's network, server and workspaces, and waits until each is
// ready. On any failure (including ctx cancellation) it removes what it
// created through the cleanup path (by exact id, with proof, verified)
// and writes the cleanup report; the error names the failing resource and
// says whether the rollback was verified.
func (a *Adapter) BringUp(ctx context.Context, root *store.Root, p *campaign.Plan) (*Campaign, error) {
	c, _, _, err := a.bringUp(ctx, root, p, nil)
	return c, err
}

// BringUpAttested is BringUp, then Attest of the new generation under the
// same hold of the campaign's lock: no other agentpen (a down, another
// attestation) acts on the campaign between its readiness and its
// report. The journal says campaign.OpAttesting (ready, its verdict
// pending) before the attestation and campaign.OpAttested once its
// report is written, so a bring-up killed in between reads as not up
// rather than ready and unattested. An attestation that cannot run (or
// is interrupted) is returned as the error, with the campaign up and
// pending; one that ran returns its report (and its path), failed or not.
// Either way the caller decides what to do with a campaign that did not
// attest: Up is the policy agentpen's commands and service use.
func (a *Adapter) BringUpAttested(ctx context.Context, root *store.Root, p *campaign.Plan, opts AttestOptions) (*Campaign, *attest.Report, string, error) {
	return a.bringUp(ctx, root, p, &opts)
}

func (a *Adapter) bringUp(ctx context.Context, root *store.Root, p *campaign.Plan, attestOpts *AttestOptions) (*Campaign, *attest.Report, string, error) {
	if !p.Keyed {
		return nil, nil, "", errors.New("the plan's agent ids are not keyed: validate the spec with the state root's plan options (store.Root.PlanOptions)")
	}
	if p.Owner != "" {
		// A begin record naming no launcher would make the journal corrupt.
		if err := campaign.CheckOwner("owner", p.Owner); err != nil {
			return nil, nil, "", err
		}
	}
	if err := a.Prepare(ctx, p); err != nil {
		return nil, nil, "", err
	}
	// The lock first: a new campaign's directory is made and put in
	// place under it (store.Root.Create).
	lock, err := a.lockKey(ctx, campaign.Key(p.CampaignID))
	if err != nil {
		return nil, nil, "", err
	}
	defer lock.Unlock()
	sc, err := root.Create(p.CampaignID)
	if err != nil {
		return nil, nil, "", err
	}
	defer sc.Close()
	gen, err := nextGeneration(sc)
	if err != nil {
		return nil, nil, "", err
	}
	if err := a.refuseLabelled(ctx, p.CampaignID); err != nil {
		return nil, nil, "", err
	}
	p.Bind(gen, campaign.NewInstance())
	// The pool's first slots come up, and are attested, with the rest.
	if err := p.AddPool(seq(0, p.Spec.Pool)); err != nil {
		return nil, nil, "", err
	}
	j, err := a.openJournal(sc)
	if err != nil {
		return nil, nil, "", err
	}
	defer j.Close()
	if err := sc.WriteSpec(gen, p.Spec); err != nil {
		return nil, nil, "", err
	}
	if err := sc.WriteDaemon(gen, a.Driver.Info().Runtime); err != nil {
		return nil, nil, "", err
	}
	if err := j.Append(campaign.Record{Op: campaign.OpBegin, Gen: gen, Instance: p.Instance, Images: p.Images, Owner: p.Owner,
		Note: fmt.Sprintf("bring-up started: %d workspaces, egress %s", len(p.Agents), p.Egress)}); err != nil {
		return nil, nil, "", err
	}
	if !p.Lifetime.IsZero() {
		if p.Lifetime.Accepted.IsZero() {
			p.Lifetime.Accepted = time.Now()
		}
		if err := j.Append(p.Lifetime.Record(gen)); err != nil {
			return nil, nil, "", err
		}
	}
	b := &bringUp{a: a, j: j, p: p, failed: map[string]failedCreate{}}
	c := &Campaign{Plan: p, Dir: sc.Path}
	if err := b.create(ctx, c, true, seq(0, len(p.Agents)), true); err != nil {
		a.log().Warn("bring-up failed; rolling back", "campaign", p.CampaignID, "generation", gen, "err", err)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		rep := a.cleanupJournal(rctx, sc, j, cleanupOptions{gen: gen, failed: b.failedCreates(), reason: campaign.ReasonRollback})
		path, rbErr := a.finishReport(rctx, sc, j, &rep)
		err = fmt.Errorf("%w; rolled back: cleanup %s (%s)", err, rep.Status, path)
		return nil, nil, "", errors.Join(err, rbErr, j.Append(campaign.Record{Op: campaign.OpRolledBack, Gen: gen, Note: err.Error()}))
	}
	a.log().Info("campaign ready", "campaign", p.CampaignID, "generation", gen, "topology", p.Topology, "networks", len(c.NetworkIDs), "workspaces", len(c.Workspaces))
	// A pooled workspace is handed out by a claim only, never with the
	// campaign.
	c.Workspaces = slices.DeleteFunc(c.Workspaces, func(w Workspace) bool { return w.Pooled })
	if attestOpts == nil {
		// Every id is journalled already; the record only marks the
		// moment, so a failure to write it is logged rather than undoing
		// a ready campaign.
		if err := j.Append(campaign.Record{Op: campaign.OpReady, Gen: gen}); err != nil {
			a.log().Warn("journal the campaign's readiness", "campaign", p.CampaignID, "err", err)
		}
		return c, nil, "", nil
	}
	// Ready and attesting in one record: never a moment when the journal
	// says ready without saying the verdict is pending.
	if err := j.Append(campaign.Record{Op: campaign.OpAttesting, Gen: gen}); err != nil {
		return c, nil, "", err
	}
	if a.Progress != nil {
		a.Progress(Progress{CampaignID: p.CampaignID, Step: StepAttesting})
	}
	_, _, rep, path, err := a.attest(ctx, sc, j, *attestOpts, false)
	return c, rep, path, err
}

// nextGeneration reads the campaign's journal (if any) and returns the
// number of the next generation, refusing while an earlier one has
// resources not verified removed.
func nextGeneration(c *store.Campaign) (int, error) {
	recs, _, err := c.Records()
	if errors.Is(err, fs.ErrNotExist) {
		return 1, nil
	}
	if err != nil {
		return 0, err
	}
	next := 1
	for _, g := range campaign.Generations(recs) {
		if live := g.Live(); len(live) > 0 {
			return 0, fmt.Errorf("campaign %q %w: its generation %d has %d resources not verified removed (journal in %s); run agentpen down %s first",
				c.ID, ErrCampaignExists, g.N, len(live), c.Path, c.ID)
		}
		next = max(next, g.N+1)
	}
	return next, nil
}

// refuseLabelled refuses a campaign id that the daemon already has
// resources of, whatever state root made them, and names them.
func (a *Adapter) refuseLabelled(ctx context.Context, campaignID string) error {
	found, err := a.Driver.List(ctx, campaign.LabelCampaign+"="+campaignID)
	if err != nil {
		return err
	}
	if len(found) == 0 {
		return nil
	}
	var names []string
	for _, f := range found {
		names = append(names, fmt.Sprintf("%s %s (%s)", f.Kind, f.Name, short(f.ID)))
	}
	return fmt.Errorf("campaign %q: %w: the daemon already has resources labelled with this campaign id (another state root's campaign, or resources no journal here accounts for: see agentpen orphans): %s",
		campaignID, ErrConflict, strings.Join(names, ", "))
}

// checkKey refuses a campaign whose default grader or episode servers need
// the API key when agentpen's environment does not hold it (they would
// refuse to start, after everything was created), holds a placeholder, or
// holds one shorter than the policy's minimum (apikey.Policy: the same
// policy the attestation applies). The message never holds the value and
// ends with how to make a key.
func (a *Adapter) checkKey(p *campaign.Plan) error {
	needs := p.Server.NeedsKey
	for _, ag := range p.Agents {
		needs = needs || ag.NeedsKey
	}
	if !needs {
		return nil
	}
	name := p.Server.Spec.APIKeyEnv
	policy := a.keyPolicy()
	st := policy.Check(a.getenv(name))
	if st.OK() {
		return nil
	}
	return &campaign.ValidationError{Field: "server.api_key_env", Msg: policy.Refusal(name, st)}
}

// bringUp is one bring-up (or a pool's growth) in progress: its journal,
// its bound plan, and the creates that failed (for the rollback to
// resolve).
type bringUp struct {
	a        *Adapter
	j        *campaign.Journal
	p        *campaign.Plan
	progress *progress

	mu     sync.Mutex
	failed map[string]failedCreate
}

func (b *bringUp) failedCreates() map[string]failedCreate {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]failedCreate, len(b.failed))
	for k, v := range b.failed {
		out[k] = v
	}
	return out
}

// record journals r in this bring-up's generation.
func (b *bringUp) record(r campaign.Record) error {
	r.Gen = b.p.Generation
	return b.j.Append(r)
}

// create makes what the driver lays out for the plan's workspaces agents
// (and, with campaignToo, the campaign's own objects and its server),
// journalling each, and (with ready) waits until every container is
// ready. Each workspace gets a uid block first. The shared objects come
// first, stage by stage; then the server and the workspaces share one
// bound of Parallelism creates and starts at once: the server takes the
// first slot, and each container's readiness is awaited, holding no
// slot, from the moment it started, while the others are still being
// made. The first failure cancels everything not yet begun and is the
// error returned. It fills c's NetworkIDs, ServerID and Workspaces.
func (b *bringUp) create(ctx context.Context, c *Campaign, campaignToo bool, agents []int, ready bool) error {
	a, p := b.a, b.p
	limit := a.parallelism()
	bases, claim, err := a.claimUIDBlocks(ctx, len(agents))
	if err != nil {
		return err
	}
	defer claim.release()
	for k, i := range agents {
		p.SetUIDBlock(i, bases[k])
	}
	secrets := map[string]string{}
	for _, k := range p.Server.Spec.SecretEnv {
		if v := a.getenv(k); v != "" {
			secrets[k] = v
		}
	}
	l, err := a.Driver.Layout(ctx, driver.BringUp{Plan: p, Agents: agents, Campaign: campaignToo,
		APIKey: a.getenv(p.Server.Spec.APIKeyEnv), Secrets: secrets, Lock: a.lockName})
	if err != nil {
		return err
	}
	done := func() {}
	if l.Done != nil {
		done = sync.OnceFunc(l.Done)
	}
	defer done()
	totals := map[string]int{campaign.RoleWork: len(l.Workspaces)}
	if l.Server != nil {
		totals[campaign.RoleServer] = 1
	}
	for _, stage := range l.Shared {
		for _, o := range stage {
			if reported(o) {
				totals[o.Role]++
			}
		}
	}
	b.progress = a.newProgress(p.CampaignID, totals)

	for _, stage := range l.Shared {
		if err := b.makeShared(ctx, stage, limit); err != nil {
			return err
		}
	}
	done()
	for _, stage := range l.Shared {
		for _, o := range stage {
			if o.Role == campaign.RoleNetwork {
				c.NetworkIDs = append(c.NetworkIDs, o.ID)
			}
		}
	}

	ctx, ff := newFailFast(ctx)
	defer ff.cancel()
	fail := ff.fail
	sem := make(chan struct{}, limit)
	acquire := func() error {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := ctx.Err(); err != nil {
			<-sem
			return err
		}
		return nil
	}
	var g errgroup.Group
	// The server, in the first slot.
	if l.Server != nil {
		if err := acquire(); err != nil {
			return err
		}
		g.Go(func() error {
			err := b.makeUnit(ctx, l.Server, nil, nil)
			c.ServerID = l.Server.Main.ID
			if err != nil {
				// Failed before the slot is given back: nothing waiting
				// for it begins.
				err = fail(err)
			}
			<-sem
			if err != nil {
				return err
			}
			if ready {
				if err := b.ready(ctx, l.Server.Main); err != nil {
					return fail(err)
				}
			}
			return nil
		})
	}
	// The workspaces.
	c.Workspaces = make([]Workspace, len(l.Workspaces))
	for k, u := range l.Workspaces {
		g.Go(func() error {
			if err := acquire(); err != nil {
				return err
			}
			ag := p.Agents[u.Agent]
			var bind func(context.Context, driver.Workspace) error
			// A launcher's own command gets no binding (the task id is
			// never put where code the workbench does not sandbox could
			// read it); a pooled workspace is bound at its claim.
			if ag.NeedsKey && !ag.Pool {
				bind = func(ctx context.Context, h driver.Workspace) error { return a.Driver.Bind(ctx, h, ag.Spec.TaskID) }
			}
			err := b.makeUnit(ctx, u, bind, func(h driver.Workspace) { c.Workspaces[k] = workspace(ag, ag.Spec.TaskID, h) })
			if err != nil {
				err = fail(err)
			}
			<-sem
			if err != nil {
				return err
			}
			if ready {
				if err := b.ready(ctx, u.Main); err != nil {
					return fail(err)
				}
			}
			return nil
		})
	}
	return ff.err(g.Wait())
}

// reported says whether Progress reports a shared object: one of a role
// of its own (an agent network), not what the server or a workspace
// stands on (the grader's socket directory).
func reported(o *driver.Object) bool {
	return o.Role != campaign.RoleServer && o.Role != campaign.RoleWork
}

// makeShared makes one stage of the campaign's shared objects, at most
// limit at once.
func (b *bringUp) makeShared(ctx context.Context, stage []*driver.Object, limit int) error {
	ctx, ff := newFailFast(ctx)
	defer ff.cancel()
	var g errgroup.Group
	g.SetLimit(limit)
	for _, o := range stage {
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := b.make(ctx, o); err != nil {
				return ff.fail(err)
			}
			if reported(o) {
				b.progress.step(Progress{Step: StepCreated, Role: o.Role, Kind: o.Kind, Name: o.Name, ID: o.ID})
			}
			return nil
		})
	}
	return ff.err(g.Wait())
}

// makeUnit makes a unit's objects in order and starts its main one. A
// workspace's (bind not nil) is handed the driver's handle on it twice:
// to bind, once what it needs exists and before its container is made
// (so no container of the campaign ever runs unbound), or right after its
// start where the runtime binds only a running container
// (Capabilities.BindAfterStart); and to describe it once its container
// exists.
func (b *bringUp) makeUnit(ctx context.Context, u *driver.Unit, bind func(context.Context, driver.Workspace) error, made func(driver.Workspace)) error {
	handle := func(objs []*driver.Object) (driver.Workspace, error) {
		var live []campaign.Resource
		for _, o := range objs {
			live = append(live, o.Resource(b.p.Generation))
		}
		return b.a.Driver.Workspace(b.p.Agents[u.Agent], live)
	}
	for _, o := range u.Needs {
		if err := b.make(ctx, o); err != nil {
			return err
		}
	}
	late := b.a.Driver.Info().BindAfterStart
	if bind != nil && !late {
		h, err := handle(u.Needs)
		if err != nil {
			return err
		}
		if err := bind(ctx, h); err != nil {
			return err
		}
	}
	if err := b.make(ctx, u.Main); err != nil {
		return err
	}
	var h driver.Workspace
	if made != nil || bind != nil && late {
		var err error
		if h, err = handle(u.Objects()); err != nil {
			return err
		}
	}
	if made != nil {
		made(h)
	}
	if err := b.start(ctx, u.Main); err != nil {
		return err
	}
	if bind != nil && late {
		// A running container is bound: within the time it has to be
		// ready (a pod that never runs is not waited for forever).
		ctx, cancel := context.WithTimeout(ctx, b.readyTimeout())
		defer cancel()
		return bind(ctx, h)
	}
	return nil
}

// start starts a made main object.
func (b *bringUp) start(ctx context.Context, o *driver.Object) error {
	if err := b.a.Driver.Start(ctx, o); err != nil {
		return err
	}
	b.progress.step(Progress{Step: StepCreated, Role: o.Role, Kind: o.Kind, Name: o.Name, ID: o.ID})
	return nil
}

func (b *bringUp) readyTimeout() time.Duration {
	if b.a.ReadyTimeout <= 0 {
		return DefaultReadyTimeout
	}
	return b.a.ReadyTimeout
}

// ready awaits a started main object's readiness, within ReadyTimeout.
func (b *bringUp) ready(ctx context.Context, o *driver.Object) error {
	ctx, cancel := context.WithTimeout(ctx, b.readyTimeout())
	defer cancel()
	if err := b.a.Driver.Ready(ctx, o); err != nil {
		return err
	}
	b.progress.step(Progress{Step: StepReady, Role: o.Role, Kind: o.Kind, Name: o.Name, ID: o.ID})
	return nil
}

// make journals the intent of one object (with a secret of that create
// among its labels, recorded nowhere else), has the driver create it, and
// journals the id it answered. A create refused because the name is taken
// is journalled as never created and never adopted; any other failure is
// kept for the rollback to resolve (see resolveIntents).
func (b *bringUp) make(ctx context.Context, o *driver.Object) error {
	if o.Labels != nil {
		o.Labels = campaign.WithCreateLabel(o.Labels)
	}
	if err := b.record(campaign.Record{Op: campaign.OpIntent, Kind: o.Kind, Role: o.Role, Name: o.Name, Labels: o.Labels}); err != nil {
		return err
	}
	id, err := b.a.Driver.Create(ctx, o)
	if err != nil {
		return errors.Join(err, b.createFailed(o.Kind, o.Name, err))
	}
	o.ID = id
	return b.record(campaign.Record{Op: campaign.OpCreated, Kind: o.Kind, Role: o.Role, Name: o.Name, ID: id})
}

// failFast is the shared cancellation of a bring-up's concurrent steps:
// the first failure is kept and cancels the rest. Its context is cancelled
// plainly, never with a cause: a daemon call cut short must fail as
// cancelled (its create may still be carried out by the daemon, and the
// rollback resolves it), not carry the error that stopped the others.
// Go's HTTP client returns the context's cause, so with
// errgroup.WithContext a sibling's conflict passed for the daemon's answer
// to a create still in flight, which was then journalled as never created
// and leaked.
type failFast struct {
	cancel context.CancelFunc
	once   sync.Once
	first  error
}

func newFailFast(ctx context.Context) (context.Context, *failFast) {
	ctx, cancel := context.WithCancel(ctx)
	return ctx, &failFast{cancel: cancel}
}

// fail records err if it is the first failure, cancels the rest and
// returns err.
func (f *failFast) fail(err error) error {
	f.once.Do(func() { f.first = err })
	f.cancel()
	return err
}

// err is the first failure, else waitErr (what the steps returned, e.g.
// the caller's cancellation). Call it once every step has returned.
func (f *failFast) err(waitErr error) error {
	if f.first != nil {
		return f.first
	}
	return waitErr
}

// parallelism is Parallelism or its default.
func (a *Adapter) parallelism() int {
	switch {
	case a.Parallelism > 0:
		return a.Parallelism
	case a.Driver.Info().Parallelism > 0:
		return a.Driver.Info().Parallelism
	}
	return DefaultParallelism
}

// removeParallelism bounds the removals in flight at once: the driver's
// Capabilities.Parallelism, else DefaultRemoveParallelism.
func (a *Adapter) removeParallelism() int {
	if n := a.Driver.Info().Parallelism; n > 0 {
		return n
	}
	return DefaultRemoveParallelism
}

// createFailed journals a failed create. A name taken is definitive and
// resolved at once (never created by us); anything else is remembered for
// the rollback's resolution.
func (b *bringUp) createFailed(kind campaign.Kind, name string, err error) error {
	jerr := b.record(campaign.Record{Op: campaign.OpCreateFailed, Kind: kind, Name: name, Note: err.Error()})
	if errors.Is(err, driver.ErrNameTaken) {
		return errors.Join(jerr, b.record(campaign.Record{Op: campaign.OpRemoved, Kind: kind, Name: name, Note: "never created: the name is taken by another resource (conflict)"}))
	}
	b.mu.Lock()
	b.failed[name] = failedCreate{at: time.Now(), answered: driver.Answered(err)}
	b.mu.Unlock()
	return jerr
}
