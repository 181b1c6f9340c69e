package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/cleanup"
	"github.com/danielgtaylor/huma/v2"
	"github.com/go-chi/chi/v5"
)

// Config configures a Server. Its fields are read once, by New.
type Config struct {
	// Adapter brings campaigns up, attests and removes them (required).
	Adapter *adapter.Adapter
	// Token is the bearer token every route but /healthz and the episode
	// proxy's requires (required; at least 16 bytes).
	Token []byte
	// Key derives the workspaces' capabilities (required; KeyBytes; see
	// LoadKey).
	Key []byte
	// PublicURL is the scheme, host and port clients reach the service at
	// ("http://127.0.0.1:8700"); workspace base_urls are PublicURL +
	// "/episode/<capability>". Empty: base_url is the path alone (a unix
	// socket listener has no URL an OpenEnv client can dial).
	PublicURL string
	// Logger receives access logs and events; nil discards them. Tokens,
	// keys, capabilities and task ids never reach it.
	Logger *slog.Logger
	// Attest configures the attestation run at create and by the attest
	// route.
	Attest adapter.AttestOptions
	// Version is the OpenAPI document's info.version ("" means "dev").
	Version string
	// ShutdownGrace bounds how long Close lets API operations in flight
	// finish before cancelling them (a cancelled bring-up rolls back);
	// zero means DefaultShutdownGrace.
	ShutdownGrace time.Duration
}

// DefaultShutdownGrace is Config.ShutdownGrace when zero.
const DefaultShutdownGrace = 30 * time.Second

// minTokenBytes is the shortest bearer token New accepts.
const minTokenBytes = 16

// backend is what the service calls on the adapter.
type backend interface {
	BringUpAttested(ctx context.Context, spec campaign.CampaignSpec, opts adapter.AttestOptions) (*adapter.Campaign, *attest.Report, error)
	Attest(ctx context.Context, campaignID string, opts adapter.AttestOptions) (*attest.Report, error)
	Cleanup(ctx context.Context, campaignID string) (*cleanup.Report, error)
	Load(campaignID string) (*adapter.Campaign, error)
	Campaigns() ([]adapter.CampaignState, error)
	State(campaignID string) (adapter.CampaignState, error)
	CampaignDir(campaignID string) string
}

var _ backend = (*adapter.Adapter)(nil)

// Campaign states a CampaignView reports. Creating and deleting are this
// service's operations in progress; every other state is read from the
// campaign's files (journal, attestation.json) on each request, so a
// campaign that another process (agentpen up, down, attest) changed reads
// as it is.
const (
	// StateCreating: this service is bringing it up and attesting it.
	StateCreating = "creating"
	// StateReady: its latest generation is up, nothing of it was removed,
	// and its latest attestation (if any) passed: its workspaces are
	// served.
	StateReady = "ready"
	// StateAttestationFailed: up, but its latest attestation failed; its
	// workspaces are not served until one passes (POST .../attestation),
	// and DELETE removes it.
	StateAttestationFailed = "attestation_failed"
	// StateStartingOrFailed: resources live, but its latest generation
	// never reached ready and nothing removed them: a bring-up that was
	// killed, or one still running in another process. DELETE removes it.
	StateStartingOrFailed = "starting_or_failed"
	// StateDeleting: this service is removing it.
	StateDeleting = "deleting"
	// StateCleanupFailed: a removal that was not verified or did not
	// finish (its process was killed); resources may remain. DELETE
	// again retries.
	StateCleanupFailed = "cleanup_failed"
	// StateRemoved: nothing its journal records is live, and no cleanup
	// since its latest generation began failed.
	StateRemoved = "removed"
	// StateUnusable: its journal is corrupt, or its state directory or
	// journal is owned or writable by another user. Nothing is done with
	// it (no workspace served, DELETE refused) until an operator repairs
	// it; the view's error says why.
	StateUnusable = "unusable"
)

// Why a campaign's workspaces stop being served.
var (
	errRevoked     = errors.New("the workspace was removed")
	errNotAttested = errors.New("the campaign failed its attestation")
	errShutdown    = errors.New("the service is shutting down")
)

// Server is the launcher API: campaigns over HTTP, and the episode proxy
// to their workspaces. Build it with New, serve Handler, end with Close.
type Server struct {
	cfg     Config
	be      backend
	log     *slog.Logger
	metrics *metrics
	api     huma.API
	router  chi.Router

	// ctx is the parent of every operation's context: Close cancels it
	// once the grace has passed.
	ctx    context.Context
	cancel context.CancelFunc
	ops    sync.WaitGroup // API operations that create, attest or remove
	relays sync.WaitGroup // proxy sessions and requests
	once   sync.Once

	mu        sync.Mutex
	closed    bool
	campaigns map[string]*entry
	routes    map[[32]byte]*route
}

// entry is what the service holds of one campaign beside its files: its
// operation in progress and its published workspaces. Entries are never
// dropped, so every operation on an id locks the same op.
type entry struct {
	id string
	// op serialises this service's operations on the campaign (create,
	// attest, delete); the adapter also holds the campaign's flock,
	// across processes.
	op sync.Mutex

	// Guarded by Server.mu.
	busy   string // StateCreating or StateDeleting while this service runs one
	seq    uint64 // bumped when an operation ends: a read of the files begun before is stale
	camp   *adapter.Campaign
	routes []*route
}

// New validates cfg and builds the service's router and OpenAPI document.
// It loads nothing: call Load to serve the campaigns already up in the
// state root.
func New(cfg Config) (*Server, error) {
	if cfg.Adapter == nil {
		return nil, errors.New("api: Config.Adapter is required")
	}
	return newServer(cfg, cfg.Adapter)
}

func newServer(cfg Config, be backend) (*Server, error) {
	if len(cfg.Token) < minTokenBytes {
		return nil, fmt.Errorf("api: the bearer token must hold at least %d bytes", minTokenBytes)
	}
	if len(cfg.Key) != KeyBytes {
		return nil, fmt.Errorf("api: the server key must hold %d bytes", KeyBytes)
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = DefaultShutdownGrace
	}
	cfg.PublicURL = strings.TrimRight(cfg.PublicURL, "/")
	s := &Server{
		cfg:       cfg,
		be:        be,
		log:       cfg.Logger,
		metrics:   newMetrics(),
		campaigns: map[string]*entry{},
		routes:    map[[32]byte]*route{},
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.router, s.api = s.buildRouter()
	return s, nil
}

// Handler is the service's HTTP handler: the API, /healthz, /metrics and
// the episode proxy.
func (s *Server) Handler() http.Handler { return s.router }

// OpenAPI returns the service's OpenAPI document.
func (s *Server) OpenAPI() *huma.OpenAPI { return s.api.OpenAPI() }

// Load reads every campaign of the state root (as agentpen serve does at
// start) and serves the workspaces of those that are ready, with the same
// capabilities as before a restart; it logs the campaigns that need a
// DELETE (a bring-up or a removal that did not finish, a failed
// attestation).
func (s *Server) Load() error {
	states, err := s.be.Campaigns()
	if err != nil {
		return err
	}
	for _, st := range states {
		v, _ := s.render(st.CampaignID, s.snapshotOf(st), s.seqOf(st.CampaignID), true)
		switch v.State {
		case StateReady, StateRemoved:
		default:
			s.log.Warn("campaign not served", "campaign", st.CampaignID, "generation", v.Generation, "state", v.State)
		}
	}
	return nil
}

// entry returns the campaign's entry, made when missing.
func (s *Server) entry(id string) *entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.campaigns[id]
	if e == nil {
		e = &entry{id: id}
		s.campaigns[id] = e
	}
	return e
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

// begin marks this service's operation on e (StateCreating or
// StateDeleting); end clears it, and makes reads of the files begun
// before it stale.
func (s *Server) begin(e *entry, state string) {
	s.mu.Lock()
	e.busy = state
	s.gaugesLocked()
	s.mu.Unlock()
}

func (s *Server) end(e *entry) {
	s.mu.Lock()
	e.busy = ""
	e.seq++
	s.gaugesLocked()
	s.mu.Unlock()
}

// snapshot is one read of a campaign's files: its journal's state, the
// latest generation's attestation and cleanup reports (nil: none), and
// the state they say.
type snapshot struct {
	st      adapter.CampaignState
	att     *attest.Report
	cleanup *cleanup.Report
	// cleanupGen is the generation of the stored cleanup report when it
	// is not the latest's (0: none or the latest's).
	cleanupGen int
	state      string
}

// read reads the campaign's files; the error wraps adapter.ErrNoCampaign
// when the state root has no journal of it.
func (s *Server) read(id string) (snapshot, error) {
	st, err := s.be.State(id)
	if err != nil && st.Err == nil {
		return snapshot{}, err
	}
	return s.snapshotOf(st), nil
}

// snapshotOf reads the reports of the campaign whose journal state st is.
func (s *Server) snapshotOf(st adapter.CampaignState) snapshot {
	if st.Dir == "" {
		st.Dir = s.be.CampaignDir(st.CampaignID)
	}
	snap := snapshot{st: st}
	if st.Err != nil {
		// Nothing of a campaign whose state cannot be trusted is read.
		snap.state = StateUnusable
		return snap
	}
	g := st.Latest()
	snap.att = st.LatestAttestation()
	var rep cleanup.Report
	var of reportGeneration
	if path := filepath.Join(st.Dir, adapter.CleanupReportFile); readJSON(path, &rep) == nil && readJSON(path, &of) == nil {
		if gen := of.generation(); gen == g.N && of.instance(gen) == g.Instance {
			snap.cleanup = &rep
		} else {
			snap.cleanupGen = gen
		}
	}
	snap.state = stateOf(st, snap.att)
	return snap
}

// reportGeneration is which generation a stored cleanup.json was made
// for: its own top-level "generation" when the report has one, else the
// newest of the generations it lists (a cleanup covers every generation
// of the journal it read). It is decoded apart from the report, which is
// served as it is.
type reportGeneration struct {
	Generation  int                      `json:"generation"`
	Generations []cleanup.GenerationInfo `json:"generations"`
}

func (r *reportGeneration) generation() int {
	if r.Generation > 0 {
		return r.Generation
	}
	n := 0
	for _, g := range r.Generations {
		n = max(n, g.N)
	}
	return n
}

// instance is the nonce the report lists for generation n ("" for none).
func (r *reportGeneration) instance(n int) string {
	for _, g := range r.Generations {
		if g.N == n {
			return g.Instance
		}
	}
	return ""
}

// readJSON decodes the JSON file at path into v.
func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// stateOf names a campaign's state from its journal (st) and its latest
// generation's attestation (nil: none).
func stateOf(st adapter.CampaignState, att *attest.Report) string {
	g := st.Latest()
	// The reader resets LastCleanup when a generation begins: a cleanup
	// it holds is of the latest generation.
	cleanedSince := st.LastCleanup != ""
	switch {
	case cleanedSince && st.LastCleanup != string(cleanup.Verified):
		return StateCleanupFailed
	case len(st.Live()) == 0:
		return StateRemoved
	case !st.Ready, st.AttestPending:
		// Never ready, or killed (or still running elsewhere) between its
		// readiness and its attestation's verdict.
		return StateStartingOrFailed
	case cleanedSince, st.RemovalStarted, len(g.Live()) < len(g.Resources), len(st.Live()) > len(g.Live()):
		// A removal began and did not finish, or an earlier generation
		// is still live: nothing to serve.
		return StateCleanupFailed
	case att != nil && !att.OK:
		return StateAttestationFailed
	}
	return StateReady
}

// view reads the campaign's files afresh and renders it, reconciling the
// proxy with them; the error wraps adapter.ErrNoCampaign when the state
// root has no journal of it (and this service is not creating it).
func (s *Server) view(id string) (CampaignView, error) {
	for try := 0; ; try++ {
		seq := s.seqOf(id)
		snap, err := s.read(id)
		if errors.Is(err, adapter.ErrNoCampaign) {
			s.mu.Lock()
			e := s.campaigns[id]
			creating := e != nil && e.busy == StateCreating
			s.mu.Unlock()
			if creating {
				return CampaignView{CampaignID: id, State: StateCreating, StateDir: s.be.CampaignDir(id), Workspaces: []WorkspaceView{}}, nil
			}
		}
		if err != nil {
			return CampaignView{}, err
		}
		// An operation that ended during the read makes it stale: read
		// again (it changed the files), a few times at most.
		if v, fresh := s.render(id, snap, seq, try < 3); fresh || try >= 3 {
			return v, nil
		}
	}
}

// render turns a snapshot into the campaign's view. An operation of this
// service in progress names the state; otherwise, with reconcile, the
// proxy is made to agree with the files: a ready campaign's workspaces
// are published (loading it when this service does not hold it), any
// other's revoked. When an operation ended after the snapshot was read
// (seq), nothing is changed and fresh is false.
func (s *Server) render(id string, snap snapshot, seq uint64, reconcile bool) (v CampaignView, fresh bool) {
	g := snap.st.Latest()
	state := snap.state
	var loaded *adapter.Campaign
	if state == StateReady && reconcile && !s.published(id, g.Instance) {
		c, err := s.be.Load(id)
		if err != nil {
			// The journal says up, yet it cannot be served (its spec or
			// journal unreadable): nothing to hand out; DELETE removes it.
			s.log.Warn("campaign cannot be served", "campaign", id, "err", err)
			state = StateStartingOrFailed
		}
		loaded = c
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.campaigns[id]
	fresh = e == nil || e.seq == seq
	switch {
	case e != nil && e.busy != "":
		state = e.busy
	case !reconcile || !fresh:
	case state == StateReady:
		if e == nil {
			e = &entry{id: id}
			s.campaigns[id] = e
		}
		if e.camp == nil || e.camp.Plan.Instance != g.Instance {
			s.revokeLocked(e, errRevoked)
			if loaded != nil {
				s.publishLocked(e, loaded)
			}
		}
	case e != nil && e.camp != nil:
		cause := errRevoked
		if state == StateAttestationFailed {
			cause = errNotAttested
		}
		s.revokeLocked(e, cause)
	}
	v = CampaignView{CampaignID: id, Generation: g.N, State: state, StateDir: snap.st.Dir, Workspaces: []WorkspaceView{}}
	if snap.st.Err != nil {
		v.Error = snap.st.Err.Error()
	}
	if snap.att != nil {
		v.Attestation = &ReportRef{OK: snap.att.OK, Path: filepath.Join(v.StateDir, attest.FileName)}
	}
	if snap.cleanup != nil {
		v.Cleanup = &ReportRef{OK: snap.cleanup.OK, Status: string(snap.cleanup.Status), Path: filepath.Join(v.StateDir, adapter.CleanupReportFile)}
	}
	if state != StateReady || e == nil || e.camp == nil || e.camp.Plan.Instance != g.Instance {
		return v, fresh // no base_url to hand out
	}
	p := e.camp.Plan
	for i, ws := range e.camp.Workspaces {
		v.Workspaces = append(v.Workspaces, WorkspaceView{
			Index: i, AgentID: ws.AgentID, TaskID: p.Agents[i].Spec.TaskID,
			BaseURL: s.cfg.PublicURL + episodePrefix + "/" + capability(s.cfg.Key, p.CampaignID, p.Instance, ws.AgentID),
		})
	}
	return v, fresh
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
	for i, ws := range c.Workspaces {
		ag := c.Plan.Agents[i]
		capab := capability(s.cfg.Key, c.Plan.CampaignID, c.Plan.Instance, ws.AgentID)
		rt := newRoute(c.Plan.CampaignID, ws.AgentID, ag.Spec.TaskID, ws.Socket, capab)
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
		if e.busy != "" || e.camp != nil {
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

// Close ends the service's own work and leaves every campaign up and
// journalled: it ends the proxy's sessions (close 1001) and requests,
// refuses new operations, lets the ones in flight finish for
// ShutdownGrace (or until ctx is done), then cancels them (a bring-up
// then rolls back by exact id) and waits for them. Call it after
// http.Server.Shutdown has stopped the listeners. A second call returns
// at once.
func (s *Server) Close(ctx context.Context) error {
	first := false
	s.once.Do(func() { first = true })
	if !first {
		return nil
	}
	s.mu.Lock()
	s.closed = true
	for _, rt := range s.routes {
		rt.shutdown()
	}
	s.mu.Unlock()
	s.relays.Wait()
	done := make(chan struct{})
	go func() { s.ops.Wait(); close(done) }()
	grace := time.NewTimer(s.cfg.ShutdownGrace)
	defer grace.Stop()
	var err error
	select {
	case <-done:
	case <-grace.C:
		s.log.Warn("operations still running after the grace; cancelling them")
	case <-ctx.Done():
		err = ctx.Err()
	}
	s.cancel()
	<-done
	return err
}

// CleanupAll removes every campaign of the state root that is not
// removed already (agentpen serve --cleanup-on-exit): the ready ones and
// every one with anything live in its journal, by exact id, verified. The
// error names each campaign whose cleanup was not verified.
func (s *Server) CleanupAll(ctx context.Context) error {
	states, err := s.be.Campaigns()
	if err != nil {
		return err
	}
	var errs []error
	for _, st := range states {
		if s.snapshotOf(st).state == StateRemoved {
			continue
		}
		if st.Err != nil {
			// Its files cannot be trusted to say what is ours: left alone,
			// and the exit says so (not as bad input: the service's).
			s.log.Warn("campaign left alone on exit: unusable", "campaign", st.CampaignID, "err", st.Err)
			errs = append(errs, fmt.Errorf("campaign %s is unusable, left alone: %v", st.CampaignID, st.Err))
			continue
		}
		rep, err := s.remove(ctx, s.entry(st.CampaignID))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		s.log.Info("campaign removed on exit", "campaign", st.CampaignID, "cleanup", rep.Status)
	}
	return errors.Join(errs...)
}

// remove removes the campaign by exact id from its journal
// (adapter.Cleanup, as agentpen down), whatever its state, its workspaces
// revoked first; a campaign whose files say it is removed already, with
// its latest generation's cleanup verified, is not touched again and that
// report is returned. The error says the cleanup was not verified
// (adapter.ErrNotVerified, with the report) or why there is no report;
// it names the campaign once.
func (s *Server) remove(ctx context.Context, e *entry) (*cleanup.Report, error) {
	e.op.Lock()
	defer e.op.Unlock()
	snap, err := s.read(e.id)
	if err != nil {
		return nil, err
	}
	if snap.state == StateRemoved && snap.cleanup != nil && snap.cleanup.OK {
		return snap.cleanup, nil
	}
	if snap.st.Err != nil {
		return nil, fmt.Errorf("campaign %q is %w, nothing was removed: %w", e.id, errUnusable, snap.st.Err)
	}
	s.begin(e, StateDeleting)
	s.mu.Lock()
	s.revokeLocked(e, errRevoked)
	s.mu.Unlock()
	start := time.Now()
	rep, err := s.be.Cleanup(ctx, e.id)
	s.end(e)
	status := "error"
	if rep != nil {
		status = string(rep.Status)
	}
	s.metrics.cleanup.WithLabelValues(status).Observe(time.Since(start).Seconds())
	switch {
	case rep == nil && errors.Is(err, adapter.ErrLocked):
		return nil, fmt.Errorf("campaign %q: %w", e.id, err)
	case rep == nil:
		return nil, err
	case !rep.OK:
		return rep, fmt.Errorf("campaign %q: %w: %s (report %s)", e.id, adapter.ErrNotVerified, strings.Join(rep.FailedChecks, ", "), s.cleanupPath(e.id))
	case err != nil:
		return rep, fmt.Errorf("campaign %q: cleanup verified, but: %w", e.id, err)
	}
	return rep, nil
}
