package launcher

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/api"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/store"
	"github.com/danielgtaylor/huma/v2"
)

// Campaigns' lifetimes. A create through the API gets the spec's
// ttl_seconds and idle_timeout_seconds, or the service's defaults
// (Config.Lifetime), within its maxima; PATCH changes them. The service
// keeps, for each campaign of its state root that is up and has a
// lifetime (its own, and those agentpen up made that asked for one), one
// timer on its clock at the next moment campaign.Lifecycle.Due may say
// yes (schedule); then the campaign is removed as DELETE removes it
// (expire), reason ttl or idle, reading deleting meanwhile. A rescan of
// the state root every Config.RescanInterval finds the campaigns other
// processes made.

// DefaultRescanInterval is Config.RescanInterval when zero.
const DefaultRescanInterval = 5 * time.Second

func lifetimeView(l campaign.Lifetime) *api.LifetimeView {
	if l.IsZero() {
		return nil
	}
	v := &api.LifetimeView{AcceptedAt: l.Accepted.UTC(), TTLSeconds: int(l.TTL / time.Second), IdleTimeoutSeconds: int(l.Idle / time.Second),
		LauncherTimeoutSeconds: int(l.Launcher / time.Second)}
	if exp := l.Expires(); !exp.IsZero() {
		exp = exp.UTC()
		v.ExpiresAt = &exp
	}
	return v
}

// planLifetime gives a create's plan its lifetime: the spec's, the
// service's defaults for what it leaves 0, within its maxima, counted
// from accepted.
func (s *Server) planLifetime(p *campaign.Plan, accepted time.Time) error {
	pol := s.cfg.Lifetime
	if p.Spec.IdleTimeoutSeconds == 0 && slices.ContainsFunc(p.Agents, func(a campaign.AgentPlan) bool { return !a.NeedsKey }) {
		// A workspace that runs its own command stamps no workbench
		// socket: its activity is not seen, so it gets no idle timeout
		// it did not ask for.
		pol.DefaultIdle, pol.MaxIdle = 0, 0
	}
	ttl, idle, err := pol.Apply("ttl_seconds", p.Spec.TTLSeconds, "idle_timeout_seconds", p.Spec.IdleTimeoutSeconds)
	if err != nil {
		return specProblem(err)
	}
	p.Lifetime = campaign.Lifetime{Accepted: accepted, TTL: ttl, Idle: idle, Launcher: p.Lifetime.Launcher}
	return nil
}

type patchInput struct {
	ID   string `path:"id" doc:"Campaign id"`
	Body struct {
		TTLSeconds         *int `json:"ttl_seconds,omitempty" minimum:"0" maximum:"2592000" doc:"The new time to live, counted from the create's acceptance (0: none, where the service allows it)"`
		IdleTimeoutSeconds *int `json:"idle_timeout_seconds,omitempty" minimum:"0" maximum:"2592000" doc:"The new idle timeout (0: none, where the service allows it)"`
		// LauncherTimeoutSeconds ties the campaign to its launcher (0:
		// unties it).
		LauncherTimeoutSeconds *int `json:"launcher_timeout_seconds,omitempty" minimum:"0" maximum:"2592000" doc:"The new launcher timeout: remove the campaign once the launcher that created it has held no event stream of it and sent no keepalive for this long (0: not tied to its launcher)"`
	}
}

// registerLifetime registers PATCH /v1/campaigns/{id}.
func (s *Server) registerLifetime(hapi huma.API) {
	huma.Register(hapi, huma.Operation{
		OperationID: "patchCampaign", Method: http.MethodPatch, Path: "/v1/campaigns/{id}", Tags: []string{"campaigns"},
		Summary: "Change a campaign's lifetime: ttl_seconds (from its create's acceptance), idle_timeout_seconds and launcher_timeout_seconds",
		Description: "Any of the fields may be given; the others are kept. The values are bounded as the spec's are, and by the " +
			"service's maxima; a ttl whose deadline has passed is refused (DELETE removes a campaign). Only a campaign " +
			"that is up (ready or attestation_failed) has its lifetime changed (409 otherwise). The answer is the " +
			"campaign, with its new lifetime; the change is journalled and in its events.",
		Errors: []int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusNotFound, http.StatusConflict, http.StatusInternalServerError, http.StatusServiceUnavailable},
	}, s.patchCampaign)
}

func (s *Server) patchCampaign(ctx context.Context, in *patchInput) (*campaignOutput, error) {
	if err := campaign.CheckID("id", in.ID); err != nil {
		return nil, pathProblem(err)
	}
	id, b := in.ID, in.Body
	if b.TTLSeconds == nil && b.IdleTimeoutSeconds == nil && b.LauncherTimeoutSeconds == nil {
		return nil, problem(http.StatusBadRequest, "nothing to change: give ttl_seconds, idle_timeout_seconds, launcher_timeout_seconds or several")
	}
	orZero := func(p *int) int {
		if p == nil {
			return 0
		}
		return *p
	}
	if err := errors.Join(campaign.CheckLifetime("ttl_seconds", orZero(b.TTLSeconds), "idle_timeout_seconds", orZero(b.IdleTimeoutSeconds)),
		campaign.CheckLauncherTimeout("launcher_timeout_seconds", orZero(b.LauncherTimeoutSeconds))); err != nil {
		return nil, specProblem(err)
	}
	ctx, e, snap, release, err := s.operate(ctx, id, "patch")
	if err != nil {
		return nil, err
	}
	defer release()
	if snap.err != nil {
		return nil, unusableProblem(id, snap)
	}
	if !snap.status().Up() {
		return nil, problem(http.StatusConflict, fmt.Sprintf("campaign %q is %s: only a campaign that is up has its lifetime changed (GET /v1/campaigns/%s says more)", id, snap.status(), id))
	}
	if b.LauncherTimeoutSeconds != nil && *b.LauncherTimeoutSeconds > 0 && snap.st.Latest().Owner == "" {
		return nil, specProblem(&campaign.ValidationError{Field: "launcher_timeout_seconds", Value: fmt.Sprint(*b.LauncherTimeoutSeconds),
			Msg: "the campaign has no launcher (agentpen up made it): nothing could keep it alive"})
	}
	l := snap.st.Lifetime
	if l.Accepted.IsZero() {
		l.Accepted = snap.st.Latest().Started // a campaign that had none: from its bring-up
	}
	if b.TTLSeconds != nil {
		l.TTL = time.Duration(*b.TTLSeconds) * time.Second
	}
	if b.IdleTimeoutSeconds != nil {
		l.Idle = time.Duration(*b.IdleTimeoutSeconds) * time.Second
	}
	if b.LauncherTimeoutSeconds != nil {
		l.Launcher = time.Duration(*b.LauncherTimeoutSeconds) * time.Second
	}
	if err := s.cfg.Lifetime.Check("ttl_seconds", l.TTL, "idle_timeout_seconds", l.Idle); err != nil {
		return nil, specProblem(err)
	}
	if exp := l.Expires(); b.TTLSeconds != nil && !exp.IsZero() && !exp.After(s.clock.Now()) {
		return nil, specProblem(&campaign.ValidationError{Field: "ttl_seconds", Value: fmt.Sprint(*b.TTLSeconds),
			Msg: fmt.Sprintf("the campaign's create was accepted at %s: that deadline has passed (DELETE removes it)", l.Accepted.UTC().Format(time.RFC3339))})
	}
	c, err := s.root.Open(id)
	if err != nil {
		return nil, campaignProblem(id, "patch", err)
	}
	defer c.Close()
	if err := s.be.SetLifetime(ctx, c, l); err != nil {
		return nil, campaignProblem(id, "patch", err)
	}
	s.mu.Lock()
	e.seq++
	if b.LauncherTimeoutSeconds != nil {
		e.seen = s.clock.Now() // a launcher that ties it is there
	}
	s.mu.Unlock()
	s.schedule(id)
	v, err := s.view(id)
	if err != nil {
		return nil, campaignProblem(id, "patch", err)
	}
	s.log.Info("lifetime", "campaign", id, "lifetime", l.String(), "request_id", RequestID(ctx))
	return &campaignOutput{Location: "/v1/campaigns/" + id, Body: v}, nil
}

// schedule reads the campaign's files and, when it is up with a
// lifetime, removes it now if it is due (its ttl or idle timeout, or its
// launcher gone: tether.go), warns of its next removal when that is
// near (warn), and sets its timer for the next moment either may be
// (replacing any other). A campaign that is not up loses its timer.
func (s *Server) schedule(id string) {
	snap, err := s.read(id)
	if err != nil || snap.err != nil {
		return
	}
	var last time.Time
	if snap.st.Status.Up() && snap.st.Lifetime.Idle > 0 {
		if c, err := s.root.Open(id); err == nil {
			last, _ = s.be.LastActivity(c)
			c.Close()
		}
	}
	now := s.clock.Now()
	reason, next := snap.st.Due(now, last)
	_, warn, warnNext := snap.st.Warning(now, last, s.expiryWarning())
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	e := s.entryLocked(id)
	if e.timer != nil {
		e.timer()
		e.timer = nil
	}
	g := snap.st.Latest()
	e.timerFor = g.Instance
	if e.seenFor != g.Instance {
		// This service sees the generation's launcher from now on.
		e.seen, e.seenFor = now, g.Instance
	}
	gone, goneNext := snap.st.LauncherGone(now, e.launcherSeenLocked(now))
	if reason == "" && gone {
		reason = campaign.ReasonLauncherGone
	}
	if reason != "" {
		go s.expire(id)
		return
	}
	if warn {
		go s.warn(id)
	}
	for _, t := range []time.Time{warnNext, goneNext} {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if !next.IsZero() {
		// Run by the clock itself (a fake one runs it within Advance): it
		// only reads files and sets the next timer, or starts expire or
		// warn.
		e.timer = s.clock.AfterFunc(next.Sub(now), func() { s.schedule(id) })
	}
}

// expiryWarning is how long before a removal its warning comes (0:
// never).
func (s *Server) expiryWarning() time.Duration {
	switch w := s.cfg.ExpiryWarning; {
	case w < 0:
		return 0
	case w == 0:
		return DefaultExpiryWarning
	default:
		return w
	}
}

// warn journals the warning of the campaign's next removal when it is
// due (decided again under its lock: adapter.Warn), which its event
// streams then tell, and schedules it again.
func (s *Server) warn(id string) {
	sctx, done, err := s.startOp()
	if err != nil {
		return
	}
	defer done()
	c, err := s.root.Open(id)
	if err != nil {
		return
	}
	defer c.Close()
	e, due, err := s.be.Warn(sctx, c, s.clock.Now(), s.expiryWarning())
	if err != nil {
		// Held by another process, or the journal would not take it:
		// asked again later, not at once.
		s.log.Warn("expiry warning not journalled", "campaign", id, "err", err)
		s.retryLater(id)
		return
	}
	if due {
		s.log.Info("expiring", "campaign", id, "reason", e.Reason, "deadline", e.Deadline.UTC())
	}
	s.schedule(id)
}

// retryLater schedules the campaign again after a rescan interval.
func (s *Server) retryLater(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	e := s.entryLocked(id)
	if e.timer != nil {
		e.timer()
	}
	e.timer = s.clock.AfterFunc(s.rescanInterval(), func() { s.schedule(id) })
}

// expire removes the campaign, as DELETE does, when its lifetime is over
// (decided again under its lock: an extension or a reset may have come
// meanwhile, and then it is scheduled again).
func (s *Server) expire(id string) {
	sctx, done, err := s.startOp()
	if err != nil {
		return
	}
	defer done()
	e := s.entry(id)
	e.op.Lock()
	defer e.op.Unlock()
	c, err := s.root.Open(id)
	if err != nil {
		return
	}
	defer c.Close()
	start := time.Now()
	s.begin(e, campaign.StatusDeleting)
	s.mu.Lock()
	s.revokeLocked(e, errRevoked)
	s.mu.Unlock()
	now := s.clock.Now()
	res, err := s.be.Reconcile(sctx, c, adapter.ReconcileOptions{Now: now, ExpiryOnly: true, LockWait: store.DefaultLockWait, LauncherSeen: s.launcherSeen(id, now)})
	s.end(e)
	if res.Reason == "" && err == nil {
		// Not over after all: served again, and a new timer.
		s.view(id)
		s.schedule(id)
		return
	}
	outcome := "failed"
	if res.Report != nil {
		outcome = string(res.Report.Status)
		s.metrics.cleanup.WithLabelValues(outcome).Observe(time.Since(start).Seconds())
	}
	if errors.Is(err, store.ErrLocked) {
		// Another process holds it for longer than the wait: served
		// again meanwhile, and asked again later.
		s.view(id)
		s.retryLater(id)
	}
	s.logOp(context.Background(), "expire", id, outcome+" ("+res.Reason+")", start, err)
}

func (s *Server) rescanInterval() time.Duration {
	if s.cfg.RescanInterval > 0 {
		return s.cfg.RescanInterval
	}
	return DefaultRescanInterval
}

// rescanLoop rescans the state root every rescanInterval until Close.
func (s *Server) rescanLoop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.rescanStop = s.clock.AfterFunc(s.rescanInterval(), func() {
		s.rescan()
		s.rescanLoop()
	})
}

// rescan gives a timer to every campaign of the state root that is up
// with a lifetime and has none for its generation yet (one another
// process made), and drops the timers of those that are no longer up.
func (s *Server) rescan() {
	list, err := s.root.List()
	if err != nil {
		return
	}
	for _, l := range list {
		if l.Err != nil {
			continue
		}
		up := l.State.Status.Up() && !l.State.Lifetime.IsZero()
		s.mu.Lock()
		e := s.campaigns[l.ID]
		scheduled := e != nil && e.timerFor == l.State.Latest().Instance && e.timer != nil
		busy := e != nil && e.busying
		if !up && e != nil && e.timer != nil && !busy {
			e.timer()
			e.timer = nil
		}
		s.mu.Unlock()
		if up && !scheduled && !busy {
			s.schedule(l.ID)
		}
	}
}

// stopTimersLocked stops every timer (Close). s.mu is held.
func (s *Server) stopTimersLocked() {
	if s.rescanStop != nil {
		s.rescanStop()
	}
	for _, e := range s.campaigns {
		if e.timer != nil {
			e.timer()
			e.timer = nil
		}
	}
}
