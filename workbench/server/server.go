package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/agentpen/agentpen/internal/httpserve"

	"github.com/agentpen/agentpen/internal/conntrack"
	"github.com/agentpen/agentpen/workbench/episode"
	"github.com/agentpen/agentpen/workbench/gate"
	"github.com/go-chi/chi/v5"
)

// Env is the environment the server drives: one per WebSocket session and one
// per stateless HTTP call. *episode.Environment implements it.
type Env interface {
	// Reset starts a new episode and returns its first observation.
	Reset(ctx context.Context, opts episode.ResetOptions) (episode.Observation, error)
	// Step runs one action.
	Step(ctx context.Context, a episode.Action) (episode.Observation, error)
	// State returns the episode's id and step count.
	State() episode.State
	// Close releases everything the environment holds. The server calls it
	// exactly once per environment.
	Close() error
}

// Factory builds a fresh Env.
type Factory func() (Env, error)

// Defaults of Config's zero values.
const (
	DefaultMaxSessions = 8
	DefaultMaxHTTPEnvs = 32
	// MaxFrameBytes is the largest WebSocket message a client may send
	// (uvicorn's ws_max_size).
	MaxFrameBytes = 16 << 20
)

// Config configures a Server. Fields may not change after New.
type Config struct {
	// Factory builds environments. Required.
	Factory Factory
	// FactoryName names the factory in FACTORY_ERROR messages; empty means
	// "Environment".
	FactoryName string
	// MaxSessions caps concurrent WebSocket sessions, counting sessions whose
	// environment is still being built; 0 means DefaultMaxSessions.
	MaxSessions int
	// MaxHTTPEnvs caps environments held at once by stateless HTTP calls;
	// further calls wait. 0 means DefaultMaxHTTPEnvs.
	MaxHTTPEnvs int
	// IdleTimeout reaps a WebSocket session that has had no reset or step for
	// this long and closes its socket; 0 means sessions are never reaped.
	IdleTimeout time.Duration
	// Metadata is served at GET /metadata. The six OpenEnv keys (name,
	// description, readme_content, version, author, documentation_url) are
	// always present; a missing one is null. Other keys pass through.
	Metadata map[string]any
	// EpisodeUID reports whether a uid belongs to episode code (the uid
	// sandbox's range). When it is nil no connection is refused for who
	// its peer is: without the sandbox, episode code has no uid of its own
	// to tell it by.
	EpisodeUID func(uid uint32) bool
	// MaxConns caps the connections open at once (Serve's gate, package
	// gate); 0 means gate.DefaultMaxConns, or half the process's
	// RLIMIT_NOFILE when that is less.
	MaxConns int
	// MaxConnsPerPeer caps the connections open at once from one peer
	// (a uid when local, an address when remote); 0 means
	// 2*MaxSessions+MaxHTTPEnvs, at least gate.DefaultMaxPerPeer, so one
	// trainer can always fill every session and HTTP slot.
	MaxConnsPerPeer int
	// Logger receives one line per session start and end, and every
	// internal error. Nil discards.
	Logger *slog.Logger
	// Activity, when set, is called at each reset and step the server
	// serves (WebSocket, HTTP, MCP or the play page), before it runs:
	// episode traffic, which SocketActivity records where agentpen reads
	// it. It must return quickly.
	Activity func()
	// Tools are the tools /mcp lists and calls (episode.Config.Tools);
	// none means /mcp lists none.
	Tools []episode.ToolSpec
	// Version is the server's version in MCP's initialize answer.
	Version string
}

// Server serves Config.Factory's environments over HTTP and WebSocket.
type Server struct {
	cfg     Config
	log     *slog.Logger
	gate    *gate.Gate
	handler http.Handler
	httpSem chan struct{}
	mcp     *standardMCP // the standard MCP protocol on /mcp
	rpc     rpcSessions  // OpenEnv's HTTP MCP sessions (openenv/session/create)
	web     webPlay      // the play page's shared environment

	// readTimeout bounds reading a request, headers and body (not a
	// WebSocket, whose deadlines end at the upgrade); idleTimeout closes
	// a keep-alive connection with no request. Set by New; tests lower
	// them.
	readTimeout, idleTimeout time.Duration
	// clock runs the sessions' idle timers (wallClock; tests set a fake
	// one before serving).
	clock clock

	mu       sync.Mutex
	closing  bool
	conns    conntrack.Tracker // open HTTP connections (not hijacked), for shutdown
	sessions int               // WebSocket slots in use, placeholders included
	cancels  map[uint64]context.CancelFunc
	nextID   uint64
	wg       sync.WaitGroup // every tracked session and HTTP env call
}

// New validates cfg and returns a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Factory == nil {
		return nil, errors.New("server: Config.Factory is required")
	}
	if cfg.MaxSessions < 0 {
		return nil, fmt.Errorf("server: Config.MaxSessions %d: must not be negative", cfg.MaxSessions)
	}
	if cfg.MaxHTTPEnvs < 0 {
		return nil, fmt.Errorf("server: Config.MaxHTTPEnvs %d: must not be negative", cfg.MaxHTTPEnvs)
	}
	if cfg.MaxConns < 0 || cfg.MaxConnsPerPeer < 0 {
		return nil, fmt.Errorf("server: Config.MaxConns %d, MaxConnsPerPeer %d: must not be negative", cfg.MaxConns, cfg.MaxConnsPerPeer)
	}
	if cfg.IdleTimeout < 0 {
		return nil, fmt.Errorf("server: Config.IdleTimeout %v: must not be negative", cfg.IdleTimeout)
	}
	if cfg.MaxSessions == 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.MaxHTTPEnvs == 0 {
		cfg.MaxHTTPEnvs = DefaultMaxHTTPEnvs
	}
	if cfg.MaxConnsPerPeer == 0 {
		cfg.MaxConnsPerPeer = max(gate.DefaultMaxPerPeer, 2*cfg.MaxSessions+cfg.MaxHTTPEnvs)
	}
	if cfg.FactoryName == "" {
		cfg.FactoryName = "Environment"
	}
	s := &Server{
		cfg:     cfg,
		log:     cfg.Logger,
		httpSem: make(chan struct{}, cfg.MaxHTTPEnvs),
		cancels: map[uint64]context.CancelFunc{},

		readTimeout: defaultReadTimeout,
		idleTimeout: defaultIdleTimeout,
		clock:       wallClock{},
	}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	g, err := gate.New(gate.Config{EpisodeUID: cfg.EpisodeUID, MaxConns: cfg.MaxConns, MaxPerPeer: cfg.MaxConnsPerPeer, Logger: s.log})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s.gate = g
	s.mcp = s.newStandardMCP()
	s.handler = s.routes()
	return s, nil
}

// Handler returns the server's routes. Serve uses it behind its gate;
// mounted elsewhere (an httptest.Server in tests) it refuses no peer.
func (s *Server) Handler() http.Handler { return s.handler }

// Gate returns the gate Serve puts in front of every listener.
func (s *Server) Gate() *gate.Gate { return s.gate }

func (s *Server) routes() http.Handler {
	r := chi.NewRouter()
	r.Post("/reset", s.handleReset)
	r.Post("/step", s.handleStep)
	r.Get("/state", s.handleState)
	r.Get("/schema", s.handleSchema)
	r.Get("/metadata", s.handleMetadata)
	r.Get("/health", s.handleHealth)
	r.Get("/ws", s.handleWS)
	// /mcp: the standard protocol (an initialize, or a request of a
	// session it made) and OpenEnv's dialect on one path.
	r.Post("/mcp", s.handleMCP)
	r.Get("/mcp", s.handleMCP)
	r.Delete("/mcp", s.handleMCP)
	s.webRoutes(r)
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]string{"detail": "Not Found"})
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"detail": "Method Not Allowed"})
	})
	return r
}

// ErrShuttingDown is what an environment user gets from the server once
// Shutdown has begun.
var ErrShuttingDown = errors.New("server: shutting down")

// track registers one user of an environment (a WebSocket session or an
// HTTP call) so Shutdown can cancel it and wait for it. The returned done
// must be called when the user has closed its environment.
func (s *Server) track(cancel context.CancelFunc) (done func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return nil, ErrShuttingDown
	}
	id := s.nextID
	s.nextID++
	s.cancels[id] = cancel
	s.wg.Add(1)
	return func() {
		s.mu.Lock()
		delete(s.cancels, id)
		s.mu.Unlock()
		s.wg.Done()
	}, nil
}

// reserve takes a WebSocket slot; it reports the slots in use when none is
// free.
func (s *Server) reserve() (release func(), active int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sessions >= s.cfg.MaxSessions {
		return nil, s.sessions, false
	}
	s.sessions++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.sessions--
			s.mu.Unlock()
		})
	}, s.sessions, true
}

// ActiveSessions reports the WebSocket slots in use, sessions still being
// built included.
func (s *Server) ActiveSessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions
}

// Shutdown cancels every session and HTTP environment call, and waits until
// each has closed its environment or ctx is done. New sessions and calls are
// refused from the first call on. It does not close listeners; Serve does.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	for _, cancel := range s.cancels {
		cancel()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("server: shutdown: waiting for sessions to close: %w", ctx.Err())
	}
}

// ShutdownTimeout bounds how long Serve waits for sessions and requests once
// its context is done.
const ShutdownTimeout = 20 * time.Second

// Bounds on a client's HTTP connection: reading one request (a stalled
// body is answered 408 and its connection closed), and a keep-alive
// connection without a request.
const (
	defaultReadTimeout = 2 * time.Minute
	defaultIdleTimeout = 2 * time.Minute
)

// Serve serves on every listener, behind the server's gate (Gate), until
// ctx is done, then stops accepting, closes every session (each closing
// its environment) and returns nil once everything has finished, or an
// error if that takes longer than ShutdownTimeout. Serve closes the
// listeners.
func (s *Server) Serve(ctx context.Context, listeners ...net.Listener) error {
	hs := &http.Server{
		Handler:           s.handler,
		ConnState:         s.conns.ConnState,
		ReadHeaderTimeout: 30 * time.Second,
		ReadTimeout:       s.readTimeout,
		IdleTimeout:       s.idleTimeout,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	return httpserve.Serve(ctx, hs, listeners, httpserve.Options{
		Name: "server", Log: s.log, Wrap: s.gate.Listener, ShutdownTimeout: ShutdownTimeout,
		// Sessions first: http.Server.Shutdown neither tracks nor cancels
		// hijacked WebSocket connections, and it would wait for in-flight
		// HTTP calls that only Shutdown cancels.
		StopFirst: true,
		Stop: func(ctx context.Context) error {
			s.log.Info("shutting down", "sessions", s.ActiveSessions())
			return s.Shutdown(ctx)
		},
		// What is left are requests still being read, which would hold up
		// http.Server.Shutdown until readTimeout, past the bound.
		Cut: s.conns.CutReads,
	})
}
