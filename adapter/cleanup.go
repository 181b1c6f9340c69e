package adapter

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/cleanup"
	"github.com/agentpen/agentpen/custody"
	"github.com/agentpen/agentpen/internal/cli"
	"github.com/agentpen/agentpen/store"
	"golang.org/x/sync/errgroup"
)

// Cleanup defaults.
const (
	// DefaultCleanupTimeout bounds one cleanup, retries of transient daemon
	// errors included.
	DefaultCleanupTimeout = 2 * time.Minute
	// DefaultRemoveParallelism bounds concurrent container removals.
	DefaultRemoveParallelism = 8
	// resolveSettle is how long after its intent a create that was never
	// recorded can still be completed by the daemon: until then "no such
	// container" is not a definitive answer.
	resolveSettle = 10 * time.Second
)

// ErrNotOwned is returned (wrapped) when a journalled id names a resource
// whose io.agentpen.* labels do not match the journal's intent: it is left
// alone.
var ErrNotOwned = errors.New("labels do not prove ownership")

// ErrNotVerified is returned (wrapped) by Cleanup and Verify when the
// report's status is not verified.
var ErrNotVerified = errors.New("cleanup not verified")

// cleanupOptions scope one cleanup.
type cleanupOptions struct {
	// readOnly observes and verifies, and removes nothing.
	readOnly bool
	// gen limits removal to one generation (a bring-up's rollback); 0
	// means every generation.
	gen int
	// failed are the failed creates of this process's bring-up, by name,
	// for resolving them (see resolveContainer).
	failed map[string]failedCreate
	// reason is why the campaign is removed (campaign.RemovalReasons).
	reason string
}

// Cleanup removes, by exact id, everything the campaign's journal records
// and has not removed (resolving first every intent whose create outcome
// was never recorded, by exact name and the create's secret label),
// re-inspects each id, lists what still carries the campaign's labels
// (never taken for the campaign's: a look-alike is reported, not removed), writes the report as a new
// file of the campaign and journals its verdict, holding the campaign's
// lock, after collecting the workspaces' last episode results
// (ResultsCollector). reason says why (campaign.RemovalReasons; the
// journal records it). It returns the report and its path; the error wraps
// ErrNotVerified when the report is not verified.
func (a *Adapter) Cleanup(ctx context.Context, c *store.Campaign, reason string) (*cleanup.Report, string, error) {
	lock, err := a.lockCampaign(ctx, c)
	if err != nil {
		return nil, "", err
	}
	defer lock.Unlock()
	j, err := a.openJournal(c)
	if err != nil {
		return nil, "", err
	}
	defer j.Close()
	// The episode results still in the run directories go to the
	// campaign's results file before the directories go.
	if _, err := a.CollectResults(c); err != nil {
		a.log().Warn("results: not collected before removal", "campaign", c.ID, "err", err)
	}
	rep := a.cleanupJournal(ctx, c, j, cleanupOptions{reason: reason})
	path, err := a.finishReport(ctx, c, j, &rep)
	return &rep, path, err
}

// Verify is Cleanup without removal: every id the journal ever recorded
// must be absent and nothing may carry the campaign's labels. It writes
// nothing, not even the cut of a torn journal tail (it reads past it).
func (a *Adapter) Verify(ctx context.Context, c *store.Campaign) (*cleanup.Report, error) {
	lock, err := a.lockCampaign(ctx, c)
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	if _, err := a.readState(c); err != nil {
		return nil, err
	}
	rep := a.cleanupJournal(ctx, c, nil, cleanupOptions{readOnly: true})
	if !rep.OK {
		return &rep, notVerified(&rep)
	}
	return &rep, nil
}

// openJournal opens the campaign's journal for appending, logging a torn
// final line it cut (the journal records the cut too).
func (a *Adapter) openJournal(c *store.Campaign) (*campaign.Journal, error) {
	if err := a.onThisRuntime(c); err != nil {
		return nil, err
	}
	j, err := c.OpenJournal()
	if err != nil {
		return nil, err
	}
	if t := j.Cut(); t != nil {
		a.log().Warn("journal: cut "+t.String(), "journal", j.Path())
	}
	if a.Journalled != nil {
		id := c.ID
		j.Observe(func(r campaign.Record) { a.Journalled(id, r) })
	}
	return j, nil
}

// readState reads the campaign's state, logging a torn final line it
// ignored.
func (a *Adapter) readState(c *store.Campaign) (store.State, error) {
	st, err := c.Read()
	if st.Torn != nil && err == nil {
		a.log().Warn("journal: ignoring "+st.Torn.String()+"; the next agentpen down or up of the campaign cuts it", "journal", c.JournalPath())
	}
	if err == nil {
		err = a.runtimeOf(c, st.Generations)
	}
	return st, err
}

// ErrOtherRuntime is returned (wrapped) for a campaign whose resources
// live on another runtime than this engine's driver: nothing of it is
// observed, removed or served (another runtime's ids mean nothing here,
// and "no such resource" would be taken for "removed").
var ErrOtherRuntime = errors.New("the campaign lives on another runtime")

// onThisRuntime refuses a campaign one of whose generations with
// resources not removed was brought up on another runtime than the
// driver's (the daemon record of its bring-up names it).
func (a *Adapter) onThisRuntime(c *store.Campaign) error {
	recs, _, err := c.Records()
	if err != nil {
		return nil // whoever reads the journal says what is wrong with it
	}
	return a.runtimeOf(c, campaign.Generations(recs))
}

// runtimeOf is onThisRuntime of the generations gens, c's journal's.
func (a *Adapter) runtimeOf(c *store.Campaign, gens []campaign.Generation) error {
	here := a.Driver.Info().Runtime
	for _, g := range gens {
		if len(g.Live()) == 0 {
			continue
		}
		rec, ok, err := c.Daemon(g.N)
		if err != nil || !ok || rec.ID == "" || rec.ID == here.ID {
			continue
		}
		return fmt.Errorf("campaign %s generation %d: %w: it was brought up on %s (%s), and this agentpen runs on %s (%s): run it against that runtime",
			c.ID, g.N, ErrOtherRuntime, rec.ID, rec.Endpoint, here.ID, here.Endpoint)
	}
	return nil
}

// finishReport writes the report as a new file of the campaign, signed
// beside it (naming the attestation of its generation it follows),
// journals its verdict and returns its path, and ErrNotVerified (wrapped)
// unless it is verified.
func (a *Adapter) finishReport(ctx context.Context, c *store.Campaign, j *campaign.Journal, rep *cleanup.Report) (string, error) {
	b, err := rep.Marshal()
	if err != nil {
		return "", fmt.Errorf("cleanup report: %w", err)
	}
	key, err := a.signingKey(c)
	if err != nil {
		return "", err
	}
	recs, _, err := c.Records()
	if err != nil {
		return "", err
	}
	var extra []custody.Subject
	if s, ok := custody.FollowedSubject(recs, rep.Generation); ok {
		extra = append(extra, s)
	}
	f, env, err := custody.WriteReport(ctx, c, key, custody.Cleanup, rep.Generation, b, extra...)
	if err != nil {
		return "", err
	}
	path := c.ReportPath(f.Name)
	if err := j.Append(campaign.Record{Op: campaign.OpCleanup, Status: string(rep.Status), Report: f.Name, Digest: f.Digest, Envelope: env}); err != nil {
		return path, err
	}
	if !rep.OK {
		return path, notVerified(rep)
	}
	return path, nil
}

// signingKey is the key the campaign's reports are signed with: the
// adapter's, else its state root's.
func (a *Adapter) signingKey(c *store.Campaign) (ed25519.PrivateKey, error) {
	if a.SigningKey != nil {
		return a.SigningKey, nil
	}
	return c.SigningKey()
}

// producer is the agentpen build running, for the reports.
func producer() campaign.Producer {
	v := cli.ReadVersion()
	return campaign.Producer{Name: "agentpen", Version: v.Version, Commit: v.Commit, Modified: v.Modified}
}

// notVerified is the error of a report that is not verified: its failed
// checks, at most three of them by name (the report has them all).
func notVerified(rep *cleanup.Report) error {
	checks := rep.FailedChecks
	more := ""
	if len(checks) > 3 {
		checks, more = checks[:3], fmt.Sprintf(" and %d more", len(checks)-3)
	}
	return fmt.Errorf("campaign %q: %w: %d failed checks: %s%s", rep.CampaignID, ErrNotVerified, len(rep.FailedChecks), strings.Join(checks, ", "), more)
}

// cleanupJournal is one cleanup (or verification) of the campaign c, whose
// journal j is open for appending (nil for a read-only verification); see
// Cleanup.
func (a *Adapter) cleanupJournal(ctx context.Context, c *store.Campaign, j *campaign.Journal, opt cleanupOptions) cleanup.Report {
	campaignID := c.ID
	timeout := a.CleanupTimeout
	if timeout <= 0 {
		timeout = DefaultCleanupTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	in := cleanup.Input{CampaignID: campaignID, ReadOnly: opt.readOnly, Reason: opt.reason, Started: time.Now(), Phases: map[string]time.Duration{}, Producer: producer()}
	phase := func(name string, start time.Time) { in.Phases[name] = time.Since(start) }
	recs, _, err := c.Records()
	if err != nil {
		in.ListError = "read journal: " + err.Error()
		in.Finished = time.Now()
		return cleanup.Build(in)
	}
	gens := campaign.Generations(recs)
	in.Generations = gens
	inScope := func(gen int) bool { return opt.gen == 0 || gen == opt.gen }

	if opt.readOnly {
		start := time.Now()
		for _, g := range gens {
			for _, r := range g.Resources {
				if r.ID == "" {
					if !r.Removed {
						in.Unresolved = append(in.Unresolved, cleanup.Unresolved{Resource: r, Reason: "its create was never recorded; agentpen down resolves it"})
					}
					continue
				}
				obs := a.observeRetry(ctx, r)
				in.Outcomes = append(in.Outcomes, cleanup.Outcome{Resource: r, Decision: cleanup.Decide(r, obs), After: obs})
			}
		}
		phase("observe", start)
	} else {
		start := time.Now()
		in.Unresolved = a.resolveIntents(ctx, j, gens, inScope, opt.failed)
		phase("resolve", start)
		if recs, _, err = c.Records(); err != nil {
			in.ListError = "read journal: " + err.Error()
		}
		gens = campaign.Generations(recs)
		in.Generations = gens
		var live []campaign.Resource
		for _, g := range gens {
			if inScope(g.N) {
				for _, r := range g.Live() {
					if r.ID != "" {
						live = append(live, r)
					}
				}
			}
		}
		start = time.Now()
		byRole := map[string]int{}
		for _, r := range live {
			byRole[r.Role]++
		}
		if len(live) > 0 || opt.reason == campaign.ReasonRollback {
			// Before the first removal: a down killed before it journals
			// one leaves a campaign that reads as being removed, not up.
			// Each removal is journalled on its own, so a failure here only
			// loses that early sign; it is logged. A rollback says why
			// also when its bring-up made nothing (killed before its first
			// create): the campaign reads removed, reason rollback.
			if err := j.Append(campaign.Record{Op: campaign.OpRemovalStarted, Reason: opt.reason}); err != nil {
				a.log().Warn("journal the start of a removal", "campaign", campaignID, "err", err)
			}
		}
		in.Outcomes = a.removeAll(ctx, j, live, a.newProgress(campaignID, byRole))
		phase("remove", start)
	}
	start := time.Now()
	var found []cleanup.Found
	err = a.retry(ctx, false, func() (err error) {
		found, err = a.Driver.List(ctx, campaign.LabelCampaign+"="+campaignID)
		return err
	})
	if err != nil {
		in.ListError = err.Error()
	}
	in.Labelled = found
	phase("verify", start)
	in.Finished = time.Now()
	return cleanup.Build(in)
}

// removeAll removes the given journalled resources kind by kind, in the
// driver's order (containers before what they stand on: run directories,
// then networks), each kind's concurrently. Each is observed,
// decided, acted on, re-inspected and, when the daemon says it is gone,
// journalled removed. At most removeParallelism removals are in
// flight at once; the observations, re-inspections and journal records
// around them take no slot (a slot is free for the next removal the
// moment the daemon answered one), and up to 4 times as many resources
// are observed ahead.
func (a *Adapter) removeAll(ctx context.Context, j *campaign.Journal, live []campaign.Resource, pr *progress) []cleanup.Outcome {
	var mu sync.Mutex
	var out []cleanup.Outcome
	kinds := a.Driver.Info().Kinds
	for _, kind := range kinds {
		var todo []campaign.Resource
		for i := len(live) - 1; i >= 0; i-- {
			if live[i].Kind == kind {
				todo = append(todo, live[i])
			}
		}
		// The server first: it is on every agent network, so its removal
		// is the longest, and every network's removal waits for it. It
		// holds a slot from the start.
		slices.SortStableFunc(todo, func(x, y campaign.Resource) int {
			return serverFirst(x) - serverFirst(y)
		})
		slots := make(chan struct{}, a.removeParallelism())
		g := new(errgroup.Group)
		g.SetLimit(4 * a.removeParallelism())
		for _, r := range todo {
			reserved := serverFirst(r) == 0
			if reserved {
				slots <- struct{}{}
			}
			g.Go(func() error {
				o := a.removeOne(ctx, j, r, slots, reserved)
				pr.step(Progress{Step: StepRemoved, Role: r.Role, Kind: r.Kind, Name: r.Name, ID: r.ID, Outcome: outcome(o)})
				mu.Lock()
				out = append(out, o)
				mu.Unlock()
				return nil
			})
		}
		g.Wait()
	}
	slices.SortStableFunc(out, func(x, y cleanup.Outcome) int {
		return slices.Index(kinds, x.Resource.Kind) - slices.Index(kinds, y.Resource.Kind)
	})
	return out
}

func serverFirst(r campaign.Resource) int {
	if r.Role == campaign.RoleServer {
		return 0
	}
	return 1
}

// removeOne observes r, decides, acts and re-inspects. The outcome's
// After is a fresh observation: "already gone" counts only after a second
// answer confirms it. The act takes a slot of slots (held already when
// reserved, and given back in every case).
func (a *Adapter) removeOne(ctx context.Context, j *campaign.Journal, r campaign.Resource, slots chan struct{}, reserved bool) cleanup.Outcome {
	return a.remove(ctx, j, r, slots, reserved, nil)
}

// remove is removeOne; drop, when set, is the pool slot whose workspace
// the removal drops (journalled with it: no removal of the campaign).
func (a *Adapter) remove(ctx context.Context, j *campaign.Journal, r campaign.Resource, slots chan struct{}, reserved bool, drop []int) cleanup.Outcome {
	o := cleanup.Outcome{Resource: r}
	obs := a.observeRetry(ctx, r)
	o.Decision = cleanup.Decide(r, obs)
	if reserved && o.Decision.Action != cleanup.Remove {
		<-slots
	}
	switch o.Decision.Action {
	case cleanup.Remove:
		if !reserved {
			slots <- struct{}{}
		}
		err := a.retry(ctx, true, func() error {
			err := a.Driver.Remove(ctx, r, obs)
			if errors.Is(err, driver.ErrChanged) {
				// Not as observed (relabelled, replaced): observed and
				// decided again; what is no longer ours is left alone.
				obs = a.observeRetry(ctx, r)
				if d := cleanup.Decide(r, obs); d.Action != cleanup.Remove {
					o.Decision = d
					return nil
				}
			}
			return err
		})
		if err != nil {
			o.Error = err.Error()
		}
		<-slots
		o.After = a.observeRetry(ctx, r)
		if o.Decision.Action != cleanup.Remove && o.Decision.Action != cleanup.AlreadyGone {
			a.log().Warn("left alone", "kind", r.Kind, "name", r.Name, "id", short(r.ID), "action", o.Decision.Action, "reason", o.Decision.Reason)
			return o
		}
	case cleanup.AlreadyGone:
		o.After = a.observeRetry(ctx, r)
	default:
		o.After = obs
		a.log().Warn("left alone", "kind", r.Kind, "name", r.Name, "id", short(r.ID), "action", o.Decision.Action, "reason", o.Decision.Reason)
		return o
	}
	if o.After.State != cleanup.Absent {
		a.log().Warn("still there after removal", "kind", r.Kind, "name", r.Name, "id", short(r.ID), "err", o.Error)
		return o
	}
	if err := j.Append(campaign.Record{Op: campaign.OpRemoved, Gen: r.Gen, Kind: r.Kind, Role: r.Role, Name: r.Name, ID: r.ID, Note: string(o.Decision.Action), Slots: drop}); err != nil {
		// The daemon says it is gone; the journal could not say so. The
		// next cleanup finds it absent again.
		o.Error = "journal: " + err.Error()
	}
	a.log().Info(verb(o.Decision.Action), "kind", r.Kind, "role", r.Role, "name", r.Name, "id", short(r.ID))
	return o
}

// outcome names what a teardown did with one resource, for Progress.
func outcome(o cleanup.Outcome) string {
	switch {
	case o.After.State != cleanup.Absent:
		return "left alone"
	case o.Decision.Action == cleanup.AlreadyGone:
		return "already gone"
	}
	return "removed"
}

func verb(a cleanup.Action) string {
	if a == cleanup.AlreadyGone {
		return "already gone"
	}
	return "removed"
}

// observeRetry observes r, retrying answers that are not definitive until
// ctx is done.
func (a *Adapter) observeRetry(ctx context.Context, r campaign.Resource) cleanup.Observation {
	delay := 50 * time.Millisecond
	for {
		obs := a.Driver.Observe(ctx, r)
		if obs.State != cleanup.Unknown || ctx.Err() != nil {
			return obs
		}
		select {
		case <-ctx.Done():
			return obs
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}

// retry calls fn until it succeeds or ctx is done; with goneIsDone, a
// NotFound also ends it successfully (the thing is gone: success for a
// removal). Every other error is taken for a transient one (a daemon
// restarting, a dropped connection, a precondition that failed: the next
// observation says what is there now): only a definitive answer ends the
// retries before the deadline.
func (a *Adapter) retry(ctx context.Context, goneIsDone bool, fn func() error) error {
	delay := 50 * time.Millisecond
	for {
		err := fn()
		if err == nil || goneIsDone && errors.Is(err, driver.ErrNotFound) {
			return nil
		}
		if errors.Is(err, driver.ErrHeld) {
			return err // definitive: left alone
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}

// VerifySignatures checks the campaign's signed reports as agentpen
// verify does (custody.Verify: signatures, subjects, the journal's
// chain), with the public half of the key its reports are signed with.
func (a *Adapter) VerifySignatures(ctx context.Context, c *store.Campaign) (*custody.Result, error) {
	key, err := a.signingKey(c)
	if err != nil {
		return nil, err
	}
	return custody.Verify(ctx, c, key.Public().(ed25519.PublicKey), custody.Options{}), nil
}
