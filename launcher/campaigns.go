package launcher

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/api"
	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/cleanup"
	"github.com/agentpen/agentpen/store"
)

// entry is what the service holds of one campaign beside its files: its
// operation in progress and its published workspaces. Entries are never
// dropped, so every operation on an id locks the same op.
type entry struct {
	id string
	// op serialises this service's operations on the campaign (create,
	// attest, delete); claims share it (they exclude those, not each
	// other: the adapter serves them in batches). The adapter also holds
	// the campaign's lock, across processes.
	op sync.RWMutex

	// Guarded by Server.mu.
	// busy is StatusCreating or StatusDeleting while this service runs
	// one (and busying is true).
	busy    campaign.Status
	busying bool
	// owner is the launcher a create in progress is for (Plan.Owner),
	// until its begin record says so.
	owner  string
	seq    uint64 // bumped when an operation ends: a read of the files begun before is stale
	camp   *adapter.Campaign
	routes []*route
	// wake is closed (and dropped) when the adapter journals a record of
	// the campaign or an operation on it ends: its event streams read the
	// journal again (journalWake).
	wake chan struct{}
	// timer stops the campaign's lifetime timer (schedule), set for the
	// generation whose instance is timerFor.
	timer    func() bool
	timerFor string
	// refilling is true while a refill of its pool runs (kickRefill).
	refilling bool
	// streams are the event streams of it its launcher holds open, seen
	// when it last saw its launcher otherwise (a stream closed, a
	// keepalive; from the moment the generation seenFor, its instance,
	// was first scheduled in this service): tether.go.
	streams int
	seen    time.Time
	seenFor string
}

// Load reads every campaign of the state root (agentpen serve does at
// start) and reconciles it with its journal (adapter.Reconcile): a
// bring-up that did not finish is rolled back, a removal that did not
// finish is finished, a campaign whose lifetime is over is removed, each
// in the background (reconcileParallelism at once), the campaign reading
// deleting until it is done, each action logged and in its events; the
// directory of a campaign whose journal holds no generation is removed
// once nothing on the daemon carries its id (adapter.DiscardEmpty), and
// those creates killed before their first record left at once
// (adapter.SweepCreates). The rest is served again: a ready campaign's
// workspaces with the same capabilities as before a restart, and a
// campaign with a lifetime gets its timer. Then the state root is
// rescanned every RescanInterval for campaigns other processes make.
func (s *Server) Load() error {
	if n, err := s.be.SweepCreates(context.Background(), s.root); n > 0 || err != nil {
		s.log.Info("removed the directories of creates killed before their first journal record", "removed", n, "err", err)
	}
	list, err := s.root.List()
	if err != nil {
		return err
	}
	now := s.clock.Now()
	var todo []string
	var empty []store.Listing
	for _, l := range list {
		if l.Err != nil {
			s.log.Warn("campaign unusable: left alone", "campaign", l.ID, "err", l.Err)
			continue
		}
		if l.State.Status == campaign.StatusEmpty {
			empty = append(empty, l)
			continue
		}
		var last time.Time
		if l.State.Status.Up() && l.State.Lifetime.Idle > 0 {
			if c, err := s.root.Open(l.ID); err == nil {
				last, _ = s.be.LastActivity(c)
				c.Close()
			}
		}
		if l.State.ReconcileReason(now, last) != "" {
			s.begin(s.entry(l.ID), campaign.StatusDeleting)
			todo = append(todo, l.ID)
			continue
		}
		v, _ := s.render(l.ID, s.snapshotOf(l.ID, l.State, l.Err), s.seqOf(l.ID), true)
		switch v.State {
		case campaign.StatusReady.String(), campaign.StatusRemoved.String():
		default:
			s.log.Warn("campaign not served", "campaign", l.ID, "generation", v.Generation, "state", v.State)
		}
		if l.State.Status.Up() {
			s.schedule(l.ID)
		}
	}
	sem := make(chan struct{}, reconcileParallelism)
	for _, id := range todo {
		go func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			s.reconcile(id)
		}()
	}
	for _, l := range empty {
		go func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			s.discardEmpty(l)
		}()
	}
	s.rescanLoop()
	return nil
}

// discardEmpty removes the directory of a campaign whose journal holds no
// generation (adapter.DiscardEmpty), or logs why it stays.
func (s *Server) discardEmpty(l store.Listing) {
	sctx, done, err := s.startOp()
	if err != nil {
		return
	}
	defer done()
	start := time.Now()
	removed, err := s.be.DiscardEmpty(sctx, s.root, l, false)
	outcome := "left as it is"
	switch {
	case errors.Is(err, store.ErrLocked):
		outcome, err = "in flight in another process: left to it", nil
	case removed:
		outcome = "empty (its journal holds no generation): its directory removed"
	case err != nil:
		outcome = "empty (its journal holds no generation): its directory kept"
	}
	s.logOp(context.Background(), "reconcile", l.ID, outcome, start, err)
}

// reconcileParallelism bounds the reconciliations Load runs at once.
const reconcileParallelism = 4

// reconcile reconciles one campaign Load marked deleting: it removes it
// as its journal says (adapter.Reconcile), unless another process holds
// it (a bring-up or a removal in flight there), and then serves it if it
// is up.
func (s *Server) reconcile(id string) {
	e := s.entry(id)
	sctx, done, err := s.startOp()
	if err != nil {
		s.end(e)
		return
	}
	defer done()
	e.op.Lock()
	defer e.op.Unlock()
	start := time.Now()
	c, err := s.root.Open(id)
	if err != nil {
		s.end(e)
		s.logOp(context.Background(), "reconcile", id, "failed", start, err)
		return
	}
	defer c.Close()
	res, err := s.be.Reconcile(sctx, c, adapter.ReconcileOptions{Now: s.clock.Now()})
	s.end(e)
	outcome := "left as it is"
	switch {
	case errors.Is(err, store.ErrLocked):
		outcome, err = "in flight in another process: left to it", nil
	case res.Report != nil:
		outcome = fmt.Sprintf("%s: removed, cleanup %s", res.Reason, res.Report.Status)
	case err != nil:
		outcome = "failed"
	}
	s.logOp(context.Background(), "reconcile", id, outcome, start, err)
	s.view(id)
	s.schedule(id)
}

// entry returns the campaign's entry, made when missing.
func (s *Server) entry(id string) *entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.entryLocked(id)
}

// entryLocked is entry with s.mu held.
func (s *Server) entryLocked(id string) *entry {
	e := s.campaigns[id]
	if e == nil {
		e = &entry{id: id}
		s.campaigns[id] = e
	}
	return e
}

// operate begins an operation on the campaign id for what ("attest",
// "patch"): it counts in the service's operations (opContext), holds the
// campaign's op lock, and reads its files afresh; release ends it. The
// error is the problem to answer.
func (s *Server) operate(ctx context.Context, id, what string) (context.Context, *entry, snapshot, func(), error) {
	return s.operateOn(ctx, id, what, false)
}

// operateShared is operate holding the op lock shared with other
// shared operations (claims) and no other, and reading the campaign's
// journal alone: its snapshot has no reports (a claim needs the state;
// reading the attestation of a large pool per claim cost a burst's
// claims more than the engine's batch).
func (s *Server) operateShared(ctx context.Context, id, what string) (context.Context, *entry, snapshot, func(), error) {
	return s.operateOn(ctx, id, what, true)
}

func (s *Server) operateOn(ctx context.Context, id, what string, shared bool) (context.Context, *entry, snapshot, func(), error) {
	ctx, done, err := s.opContext(ctx)
	if err != nil {
		return nil, nil, snapshot{}, nil, operationProblem(what, err)
	}
	e := s.entry(id)
	lock, unlock := e.op.Lock, e.op.Unlock
	if shared {
		lock, unlock = e.op.RLock, e.op.RUnlock
	}
	lock()
	release := func() { unlock(); done() }
	read := s.read
	if shared {
		read = s.readState
	}
	snap, err := read(id)
	if err == nil && hidden(ctx, snap) {
		err = fmt.Errorf("campaign %q: %w", id, store.ErrNoCampaign)
	}
	if err != nil {
		release()
		return nil, nil, snapshot{}, nil, campaignProblem(id, what, err)
	}
	return ctx, e, snap, release, nil
}

// seqOf is the campaign's operation count, read before its files.
func (s *Server) seqOf(id string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.campaigns[id]; e != nil {
		return e.seq
	}
	return 0
}

// begin marks this service's operation on e (StatusCreating or
// StatusDeleting); end clears it, and makes reads of the files begun
// before it stale.
func (s *Server) begin(e *entry, op campaign.Status) {
	s.mu.Lock()
	e.busy, e.busying = op, true
	s.gaugesLocked()
	s.mu.Unlock()
}

func (s *Server) end(e *entry) {
	s.mu.Lock()
	e.busying = false
	e.seq++
	e.wakeLocked()
	s.gaugesLocked()
	s.mu.Unlock()
}

// snapshot is one read of a campaign's files: what its journal says,
// its latest generation's attestation and cleanup reports as the journal
// names them (nil: none), why it is unusable (err), and why a report the
// journal names cannot be read (reportErr: missing, or not what the
// journal recorded; the journal still says what the campaign is).
type snapshot struct {
	id        string
	dir       string
	st        store.State
	err       error
	reportErr error
	att       *attest.Report
	attPath   string
	cl        *cleanup.Report
	clPath    string
}

// status is the campaign's status as its files say.
func (snap snapshot) status() campaign.Status {
	if snap.err != nil {
		return campaign.StatusUnusable
	}
	return snap.st.Status
}

// read reads the campaign's files; the error wraps store.ErrNoCampaign
// when the state root has no journal of it (or is a bad id).
func (s *Server) read(id string) (snapshot, error) { return s.readWith(id, true) }

// readState is read without the reports: the snapshot's state alone.
func (s *Server) readState(id string) (snapshot, error) { return s.readWith(id, false) }

func (s *Server) readWith(id string, reports bool) (snapshot, error) {
	c, err := s.root.Open(id)
	if errors.Is(err, store.ErrNoCampaign) || errors.Is(err, campaign.ErrInvalid) {
		return snapshot{}, err
	}
	if err != nil {
		// Its directory cannot be trusted: listed, unusable.
		return snapshot{id: id, dir: s.root.CampaignDir(id), err: err}, nil
	}
	defer c.Close()
	st, err := c.Read()
	if !reports {
		return snapshot{id: c.ID, dir: c.Path, st: st, err: err}, nil
	}
	return s.readReports(c, st, err), nil
}

// snapshotOf is read for a campaign the root's List read.
func (s *Server) snapshotOf(id string, st store.State, err error) snapshot {
	if err != nil {
		return snapshot{id: id, dir: s.root.CampaignDir(id), st: st, err: err}
	}
	c, oerr := s.root.Open(id)
	if oerr != nil {
		return snapshot{id: id, dir: s.root.CampaignDir(id), st: st, err: oerr}
	}
	defer c.Close()
	return s.readReports(c, st, nil)
}

// readReports completes a snapshot with the reports the journal names.
// Nothing of a campaign whose state cannot be trusted is read.
func (s *Server) readReports(c *store.Campaign, st store.State, err error) snapshot {
	snap := snapshot{id: c.ID, dir: c.Path, st: st, err: err}
	if err != nil {
		return snap
	}
	var aerr, cerr error
	if snap.att, aerr = c.Attestation(st); snap.att != nil {
		snap.attPath = c.ReportPath(st.AttestationReport)
	}
	if snap.cl, cerr = c.Cleanup(st); snap.cl != nil {
		snap.clPath = c.ReportPath(st.CleanupReport)
	}
	snap.reportErr = errors.Join(aerr, cerr)
	return snap
}

// view reads the campaign's files afresh and renders it, reconciling the
// proxy with them; the error wraps store.ErrNoCampaign when the state
// root has no journal of it (and this service is not creating it).
func (s *Server) view(id string) (api.CampaignView, error) {
	for try := 0; ; try++ {
		seq := s.seqOf(id)
		snap, err := s.read(id)
		if errors.Is(err, store.ErrNoCampaign) {
			if owner, creating := s.creatingFor(id); creating {
				return s.creatingView(id, owner), nil
			}
		}
		if err != nil {
			return api.CampaignView{}, err
		}
		// An operation that ended during the read makes it stale: read
		// again (it changed the files), a few times at most.
		if v, fresh := s.render(id, snap, seq, try < 3); fresh || try >= 3 {
			return v, nil
		}
	}
}

// creatingView is a campaign this service is creating whose journal is
// not written yet.
func (s *Server) creatingView(id, owner string) api.CampaignView {
	return api.CampaignView{CampaignID: id, Owner: owner, State: campaign.StatusCreating.String(), StateDir: s.root.CampaignDir(id), Workspaces: []api.Workspace{}}
}

// render turns a snapshot into the campaign's view. An operation of this
// service in progress names the state; otherwise, with reconcile, the
// proxy is made to agree with the files: a ready campaign's workspaces
// are published (loading it when this service does not hold it), any
// other's revoked. When an operation ended after the snapshot was read
// (seq), nothing is changed and fresh is false.
func (s *Server) render(id string, snap snapshot, seq uint64, reconcile bool) (v api.CampaignView, fresh bool) {
	g := snap.st.Latest()
	status := snap.status()
	var loaded *adapter.Campaign
	if status == campaign.StatusReady && reconcile && !s.published(id, g.Instance) {
		c, err := s.load(id)
		if err != nil {
			// The journal says up, yet it cannot be served (its spec or
			// journal unreadable): nothing to hand out; DELETE removes it.
			s.log.Warn("campaign cannot be served", "campaign", id, "err", err)
			status = campaign.StatusStartingOrFailed
		}
		loaded = c
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.campaigns[id]
	fresh = e == nil || e.seq == seq
	switch {
	case e != nil && e.busying:
		status = e.busy
	case !reconcile || !fresh:
	case status == campaign.StatusReady:
		e = s.entryLocked(id)
		if e.camp == nil || e.camp.Plan.Instance != g.Instance {
			s.revokeLocked(e, errRevoked)
			if loaded != nil {
				s.publishLocked(e, loaded)
			}
		}
	case e != nil && e.camp != nil:
		cause := errRevoked
		if status == campaign.StatusAttestationFailed {
			cause = errNotAttested
		}
		s.revokeLocked(e, cause)
	}
	v = api.CampaignView{CampaignID: id, Owner: g.Owner, Generation: g.N, State: status.String(), StateDir: snap.dir, Workspaces: []api.Workspace{},
		Lifetime: lifetimeView(snap.st.Lifetime), RemovalReason: snap.st.LastRemoval, Pool: poolView(snap.st.Pool, status.Up())}
	if owner, ok := s.creatingForLocked(id); ok {
		v.Owner = owner // a new generation whose begin record is not written yet
	}
	if err := cmp.Or(snap.err, snap.reportErr); err != nil {
		v.Error = err.Error()
	}
	if snap.att != nil {
		v.Attestation = &api.ReportRef{OK: snap.att.OK, Path: snap.attPath}
	}
	if snap.cl != nil {
		v.Cleanup = &api.ReportRef{OK: snap.cl.OK, Status: string(snap.cl.Status), Path: snap.clPath}
	}
	if status != campaign.StatusReady || e == nil || e.camp == nil || e.camp.Plan.Instance != g.Instance {
		return v, fresh // no base_url to hand out
	}
	for _, w := range e.camp.Workspaces {
		ws := w.Workspace
		ws.Socket = "" // the service's host path: launchers use base_url
		ws.BaseURL = s.cfg.PublicURL + episodePrefix + "/" + capability(s.cfg.Key, e.camp.Plan.CampaignID, e.camp.Plan.Instance, ws.AgentID)
		v.Workspaces = append(v.Workspaces, ws)
	}
	return v, fresh
}

// load rebuilds a ready campaign for the proxy.
func (s *Server) load(id string) (*adapter.Campaign, error) {
	c, err := s.root.Open(id)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return s.be.Load(c)
}

// published reports whether the campaign's generation instance is served.
func (s *Server) published(id, instance string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.campaigns[id]
	return e != nil && e.camp != nil && e.camp.Plan.Instance == instance
}

// publishLocked makes a ready campaign's workspaces reachable through the
// proxy. s.mu is held.
func (s *Server) publishLocked(e *entry, c *adapter.Campaign) {
	e.camp = c
	for _, ws := range c.Workspaces {
		capab := capability(s.cfg.Key, c.Plan.CampaignID, c.Plan.Instance, ws.AgentID)
		rt := newRoute(c.Plan.CampaignID, ws.AgentID, ws.TaskID, s.dialer(ws), capab)
		s.routes[capKey(capab)] = rt
		e.routes = append(e.routes, rt)
	}
	s.gaugesLocked()
}

// revokeLocked removes a campaign's workspaces from the proxy and ends
// their sessions and requests in flight, with cause as the reason. s.mu
// is held.
func (s *Server) revokeLocked(e *entry, cause error) {
	for _, rt := range e.routes {
		delete(s.routes, rt.key)
		rt.revoke(cause)
	}
	e.routes, e.camp = nil, nil
	s.gaugesLocked()
}

func (s *Server) gaugesLocked() {
	n := 0
	for _, e := range s.campaigns {
		if e.busying || e.camp != nil {
			n++
		}
	}
	s.metrics.campaigns.Set(float64(n))
	s.metrics.workspaces.Set(float64(len(s.routes)))
}

// startOp counts an API operation that creates, attests or removes; it
// fails once the service is closing.
func (s *Server) startOp() (context.Context, func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, nil, errClosing
	}
	s.ops.Add(1)
	return s.ctx, s.ops.Done, nil
}

var errClosing = errors.New("the service is shutting down")

// errUnusable is the kind of every refusal to act on an unusable campaign.
var errUnusable = errors.New("unusable")

// CleanupAll removes every campaign of the state root that is not
// removed already (agentpen serve --cleanup-on-exit): the ready ones and
// every one with anything live in its journal, by exact id, verified. The
// error names each campaign whose cleanup was not verified.
func (s *Server) CleanupAll(ctx context.Context) error {
	list, err := s.root.List()
	if err != nil {
		return err
	}
	var errs []error
	for _, l := range list {
		if l.Err != nil {
			// Its files cannot be trusted to say what is ours: left alone,
			// and the exit says so (not as bad input: the service's).
			s.log.Warn("campaign left alone on exit: unusable", "campaign", l.ID, "err", l.Err)
			errs = append(errs, fmt.Errorf("campaign %s is unusable, left alone: %v", l.ID, l.Err))
			continue
		}
		if l.State.Status == campaign.StatusRemoved {
			continue
		}
		rep, err := s.remove(ctx, s.entry(l.ID), campaign.ReasonExit)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		s.log.Info("campaign removed on exit", "campaign", l.ID, "cleanup", rep.Status)
	}
	return errors.Join(errs...)
}

// remove removes the campaign by exact id from its journal
// (adapter.Cleanup, as agentpen down), whatever its state, its workspaces
// revoked first, reason saying why; a campaign whose files say it is
// removed already, with its latest generation's cleanup verified, is not
// touched again and that report is returned. The error says the cleanup
// was not verified (adapter.ErrNotVerified, with the report) or why there
// is no report; it names the campaign once.
func (s *Server) remove(ctx context.Context, e *entry, reason string) (*cleanup.Report, error) {
	e.op.Lock()
	defer e.op.Unlock()
	snap, err := s.read(e.id)
	if err != nil {
		return nil, err
	}
	if hidden(ctx, snap) {
		return nil, fmt.Errorf("campaign %q: %w", e.id, store.ErrNoCampaign)
	}
	if snap.status() == campaign.StatusRemoved && snap.cl != nil && snap.cl.OK {
		return snap.cl, nil
	}
	if snap.err != nil {
		return nil, fmt.Errorf("campaign %q is %w, nothing was removed: %w", e.id, errUnusable, snap.err)
	}
	c, err := s.root.Open(e.id)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	s.begin(e, campaign.StatusDeleting)
	s.mu.Lock()
	s.revokeLocked(e, errRevoked)
	s.mu.Unlock()
	start := time.Now()
	rep, path, err := s.be.Cleanup(ctx, c, reason)
	s.end(e)
	status := "error"
	if rep != nil {
		status = string(rep.Status)
	}
	s.metrics.cleanup.WithLabelValues(status).Observe(time.Since(start).Seconds())
	switch {
	case rep == nil && errors.Is(err, store.ErrLocked):
		return nil, fmt.Errorf("campaign %q: %w", e.id, err)
	case rep == nil:
		return nil, err
	case !rep.OK:
		return rep, fmt.Errorf("campaign %q: %w: %s (report %s)", e.id, adapter.ErrNotVerified, strings.Join(rep.FailedChecks, ", "), path)
	case err != nil:
		return rep, fmt.Errorf("campaign %q: cleanup verified, but: %w", e.id, err)
	}
	return rep, nil
}

// dialer reaches ws's episode server through the backend's driver.
func (s *Server) dialer(ws adapter.Workspace) func(context.Context) (net.Conn, error) {
	return func(ctx context.Context) (net.Conn, error) { return s.be.Dial(ctx, ws) }
}

// poolView counts a generation's pool slots by where each is (none
// refilling unless the campaign is up); nil for a generation without a
// pool.
func poolView(slots []campaign.Slot, up bool) *api.PoolView {
	if len(slots) == 0 {
		return nil
	}
	var v api.PoolView
	for _, sl := range slots {
		switch {
		case sl.Claim != nil:
			v.Claimed++
		case sl.Ready():
			v.Warm++
		case up && (sl.Live || sl.ContainerID == ""):
			v.Refilling++ // an intent not yet created, or created and not yet attested
		}
	}
	return &v
}
