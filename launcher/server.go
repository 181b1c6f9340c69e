package launcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/api"
	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/cleanup"
	"github.com/agentpen/agentpen/store"
	"github.com/danielgtaylor/huma/v2"
	"github.com/go-chi/chi/v5"
)

// Config configures a Server. Its fields are read once, by New.
type Config struct {
	// Adapter brings campaigns up, attests and removes them (required).
	// New sets its Journalled callback (calling the one it had first),
	// which wakes the event streams.
	Adapter *adapter.Adapter
	// Root is the state root the service serves (required; agentpen
	// serve holds its lock, store.Root.LockServe).
	Root *store.Root
	// Tokens are the bearer tokens every route but /healthz and the
	// episode proxy's requires, each with its launcher's name
	// (ParseTokens; at least one). A launcher sees and acts only on the
	// campaigns its token created; the operator's (OperatorName) on all.
	Tokens *Tokens
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
	// ResultsEvery is how often the episode results of the campaigns up
	// are collected from their workspaces; zero means
	// DefaultResultsEvery, negative never (a GET of the episodes still
	// collects).
	ResultsEvery time.Duration
	// APIKeyEnv is the variable of the service's environment holding the
	// grader's API key for a spec that names none (server.api_key_env is
	// then set to it, in the spec file too); empty means the spec's own
	// default (campaign.DefaultAPIKeyEnv). agentpen serve checks it at
	// start.
	APIKeyEnv string
	// Clock is the service's time for campaigns' lifetimes (their
	// deadlines and idle timeouts); nil means the wall clock. Tests drive
	// an internal/testkit/fakeclock.Clock.
	Clock Clock
	// Lifetime is the operator's lifetime policy: what a create that asks
	// for none gets, and the most one may ask for (agentpen serve's --ttl,
	// --max-ttl, --idle-timeout, --max-idle-timeout).
	Lifetime campaign.LifetimePolicy
	// RescanInterval is how often the state root is read for campaigns
	// other processes made with a lifetime (zero: DefaultRescanInterval).
	RescanInterval time.Duration
	// ExpiryWarning is how long before a ttl or idle removal the
	// campaign's events say it is expiring (at most half its limit
	// before; campaign.Lifecycle.Warning); zero means
	// DefaultExpiryWarning, negative never.
	ExpiryWarning time.Duration
}

// DefaultExpiryWarning is Config.ExpiryWarning when zero.
const DefaultExpiryWarning = time.Minute

// DefaultResultsEvery is Config.ResultsEvery when zero.
const DefaultResultsEvery = time.Second

// DefaultShutdownGrace is Config.ShutdownGrace when zero.
const DefaultShutdownGrace = 30 * time.Second

// backend is what the service calls on the engine (package adapter):
// the runtime's work, through its driver. What a campaign is, the service
// reads from the store itself.
type backend interface {
	Prepare(ctx context.Context, p *campaign.Plan) error
	PlanOptions(root *store.Root) (campaign.PlanOptions, error)
	SetLifetime(ctx context.Context, c *store.Campaign, l campaign.Lifetime) error
	Warn(ctx context.Context, c *store.Campaign, now time.Time, lead time.Duration) (campaign.Expiry, bool, error)
	LastActivity(c *store.Campaign) (time.Time, error)
	Reconcile(ctx context.Context, c *store.Campaign, opts adapter.ReconcileOptions) (adapter.Reconciled, error)
	DiscardEmpty(ctx context.Context, root *store.Root, l store.Listing, dryRun bool) (bool, error)
	SweepCreates(ctx context.Context, root *store.Root) (int, error)
	Up(ctx context.Context, root *store.Root, p *campaign.Plan, opts adapter.UpOptions) (*adapter.UpResult, error)
	Attest(ctx context.Context, c *store.Campaign, opts adapter.AttestOptions) (*attest.Report, string, error)
	Cleanup(ctx context.Context, c *store.Campaign, reason string) (*cleanup.Report, string, error)
	Load(c *store.Campaign) (*adapter.Campaign, error)
	Claim(ctx context.Context, c *store.Campaign, task, attempt string, opts adapter.AttestOptions) (adapter.Claimed, error)
	Refill(ctx context.Context, c *store.Campaign, opts adapter.AttestOptions) (int, error)
	CollectResults(c *store.Campaign) (adapter.Collected, error)
	Images(ctx context.Context) ([]api.Image, error)
	Dial(ctx context.Context, ws adapter.Workspace) (net.Conn, error)
}

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
	root    *store.Root
	log     *slog.Logger
	clock   Clock
	metrics *metrics
	hapi    huma.API
	router  chi.Router

	// ctx is the parent of every operation's context: Close cancels it
	// once the grace has passed.
	ctx    context.Context
	cancel context.CancelFunc
	ops    sync.WaitGroup // API operations that create, attest or remove
	relays sync.WaitGroup // proxy sessions and requests
	loops  sync.WaitGroup // the results collector, until closing
	once   sync.Once

	// closing is closed when Close begins: event streams end.
	closing chan struct{}

	mu         sync.Mutex
	closed     bool
	rescanStop func() bool
	campaigns  map[string]*entry
	routes     map[[32]byte]*route
}

// New validates cfg and builds the service's router and OpenAPI document.
// It loads nothing: call Load to serve the campaigns already up in the
// state root.
func New(cfg Config) (*Server, error) {
	if cfg.Adapter == nil {
		return nil, errors.New("api: Config.Adapter is required")
	}
	s, err := newServer(cfg, cfg.Adapter)
	if err != nil {
		return nil, err
	}
	// Event streams read a campaign's journal again as soon as the
	// adapter appends to it (and every eventsPoll in any case).
	prev := cfg.Adapter.Journalled
	cfg.Adapter.Journalled = func(id string, r campaign.Record) {
		if prev != nil {
			prev(id, r)
		}
		s.journalled(id, r)
	}
	return s, nil
}

var _ backend = (*adapter.Adapter)(nil)

func newServer(cfg Config, be backend) (*Server, error) {
	if cfg.Root == nil {
		return nil, errors.New("api: Config.Root is required")
	}
	if cfg.Tokens == nil || cfg.Tokens.Len() == 0 {
		return nil, errors.New("api: Config.Tokens is required (ParseTokens)")
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
		root:      cfg.Root,
		log:       cfg.Logger,
		metrics:   newMetrics(),
		campaigns: map[string]*entry{},
		routes:    map[[32]byte]*route{},
		closing:   make(chan struct{}),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.clock = cfg.Clock
	if s.clock == nil {
		s.clock = wallClock{}
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.router, s.hapi = s.buildRouter()
	if cfg.ResultsEvery == 0 {
		cfg.ResultsEvery = DefaultResultsEvery
	}
	if cfg.ResultsEvery > 0 {
		s.loops.Go(func() { s.collectLoop(cfg.ResultsEvery) })
	}
	return s, nil
}

// Handler is the service's HTTP handler: the API, /healthz, /metrics and
// the episode proxy.
func (s *Server) Handler() http.Handler { return s.router }

// OpenAPI returns the service's OpenAPI document.
func (s *Server) OpenAPI() *huma.OpenAPI { return s.hapi.OpenAPI() }

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
	close(s.closing)
	s.stopTimersLocked()
	for _, rt := range s.routes {
		rt.shutdown()
	}
	s.mu.Unlock()
	s.loops.Wait()
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
