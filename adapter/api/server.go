package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
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
	BringUp(ctx context.Context, spec campaign.CampaignSpec) (*adapter.Campaign, error)
	Attest(ctx context.Context, campaignID string, opts adapter.AttestOptions) (*attest.Report, error)
	Cleanup(ctx context.Context, campaignID string) (*cleanup.Report, error)
	Load(campaignID string) (*adapter.Campaign, error)
	Campaigns() ([]adapter.CampaignState, error)
	CampaignDir(campaignID string) string
}

var _ backend = (*adapter.Adapter)(nil)

// Campaign states a CampaignView reports.
const (
	StateCreating      = "creating"
	StateReady         = "ready"
	StateDeleting      = "deleting"
	StateCleanupFailed = "cleanup_failed"
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
	ops    sync.WaitGroup // API operations that create or remove
	relays sync.WaitGroup // proxy sessions and requests
	once   sync.Once

	mu        sync.Mutex
	closed    bool
	campaigns map[string]*entry
	routes    map[[32]byte]*route
}

// entry is one campaign the service holds.
type entry struct {
	id string
	// op serialises the operations on this campaign (create, attest,
	// delete); the adapter also holds the campaign's flock, across
	// processes.
	op sync.Mutex

	// Guarded by Server.mu.
	state   string
	camp    *adapter.Campaign
	routes  []*route
	attest  *ReportRef
	cleanup *ReportRef
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

// Load serves every campaign of the state root whose latest generation is
// up (as agentpen serve does at start), with the same capabilities as
// before a restart. A campaign that cannot be loaded is logged and
// skipped.
func (s *Server) Load() error {
	states, err := s.be.Campaigns()
	if err != nil {
		return err
	}
	for _, st := range states {
		if !st.Ready || len(st.Latest().Live()) == 0 {
			continue
		}
		if _, err := s.lookup(st.CampaignID); err != nil {
			s.log.Warn("campaign not served", "campaign", st.CampaignID, "err", err)
		}
	}
	return nil
}

// lookup returns the campaign's entry, loading a campaign that is up in
// the state root (made by agentpen up, or before a restart) when the
// service does not hold it.
func (s *Server) lookup(id string) (*entry, error) {
	s.mu.Lock()
	e, ok := s.campaigns[id]
	s.mu.Unlock()
	if ok {
		return e, nil
	}
	c, err := s.be.Load(id)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.campaigns[id]; ok {
		return e, nil // loaded meanwhile
	}
	e = &entry{id: id, state: StateReady, camp: c}
	s.campaigns[id] = e
	s.publishLocked(e)
	return e, nil
}

// publishLocked makes a ready campaign's workspaces reachable through the
// proxy. s.mu is held.
func (s *Server) publishLocked(e *entry) {
	c := e.camp
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
// their sessions and requests in flight. s.mu is held.
func (s *Server) revokeLocked(e *entry) {
	for _, rt := range e.routes {
		delete(s.routes, rt.key)
		rt.revoke()
	}
	e.routes = nil
	s.gaugesLocked()
}

func (s *Server) gaugesLocked() {
	s.metrics.campaigns.Set(float64(len(s.campaigns)))
	s.metrics.workspaces.Set(float64(len(s.routes)))
}

// startOp counts an API operation that creates or removes; it fails once
// the service is closing.
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

// CleanupAll removes every campaign the service holds (agentpen serve
// --cleanup-on-exit), by exact id, verified, and returns the ids whose
// cleanup was not verified in the error.
func (s *Server) CleanupAll(ctx context.Context) error {
	s.mu.Lock()
	var es []*entry
	for _, e := range s.campaigns {
		es = append(es, e)
	}
	s.mu.Unlock()
	slices.SortFunc(es, func(a, b *entry) int { return strings.Compare(a.id, b.id) })
	var errs []error
	for _, e := range es {
		rep, err := s.remove(ctx, e)
		if err != nil {
			errs = append(errs, fmt.Errorf("campaign %s: %w", e.id, err))
			continue
		}
		s.log.Info("campaign removed on exit", "campaign", e.id, "cleanup", rep.Status)
	}
	return errors.Join(errs...)
}

// remove revokes a campaign's workspaces and removes it by exact id
// (adapter.Cleanup). A verified cleanup drops the entry; any other leaves
// it as cleanup_failed, its workspaces still revoked. The report is
// returned with ErrNotVerified when it is not verified.
func (s *Server) remove(ctx context.Context, e *entry) (*cleanup.Report, error) {
	e.op.Lock()
	defer e.op.Unlock()
	s.mu.Lock()
	if s.campaigns[e.id] != e {
		s.mu.Unlock()
		return nil, fmt.Errorf("campaign %q: %w", e.id, adapter.ErrNoCampaign)
	}
	e.state = StateDeleting
	s.revokeLocked(e)
	s.mu.Unlock()
	start := time.Now()
	rep, err := s.be.Cleanup(ctx, e.id)
	status := "error"
	if rep != nil {
		status = string(rep.Status)
	}
	s.metrics.cleanup.WithLabelValues(status).Observe(time.Since(start).Seconds())
	s.mu.Lock()
	defer s.mu.Unlock()
	if rep != nil && rep.OK && err == nil {
		delete(s.campaigns, e.id)
		s.gaugesLocked()
		return rep, nil
	}
	e.state = StateCleanupFailed
	e.cleanup = &ReportRef{OK: false, Status: status, Path: s.cleanupPath(e.id)}
	if err == nil {
		err = adapter.ErrNotVerified
	}
	return rep, err
}
