package grader

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/agentpen/agentpen/internal/conntrack"
	"github.com/agentpen/agentpen/internal/httpserve"
	"github.com/agentpen/agentpen/workbench/episode"
	"github.com/agentpen/agentpen/workbench/gate"
	"github.com/agentpen/agentpen/workbench/tasks"
	"github.com/go-chi/chi/v5"
)

// KeyHeader is the request header that carries the API key.
const KeyHeader = "X-API-Key"

// DefaultKeyEnv names the environment variable the key is read from when
// no other name is configured.
const DefaultKeyEnv = "AGENTPEN_API_KEY"

// Routes of the grader service.
const (
	RouteHealth = "/health"
	RouteDocs   = "/docs"
	RouteScore  = "/v1/score"
	RouteCases  = "/v1/cases"
	RouteJudge  = "/v1/judge"
)

// Catalogue builds tasks with their answer keys. *tasks.Task values it
// returns are only read.
type Catalogue interface {
	Build(id string) (*tasks.Task, error)
}

// tasksCatalogue is package tasks as a Catalogue.
type tasksCatalogue struct{}

func (tasksCatalogue) Build(id string) (*tasks.Task, error) { return tasks.Build(id) }

// ServerConfig configures a Server. Fields may not change after
// NewServer.
type ServerConfig struct {
	// Key is the API key every protected route requires in KeyHeader.
	// Empty is refused by NewServer unless InsecureNoKey is set.
	Key string
	// InsecureNoKey lets an empty Key through: the protected routes then
	// need no key at all. For local tests only; false is the default.
	InsecureNoKey bool
	// Catalogue builds the tasks to grade; nil means package tasks.
	Catalogue Catalogue
	// EpisodeUID reports whether a uid belongs to episode code: Serve's
	// gate refuses such local peers at accept (a grader on the same host
	// as the episodes). Nil refuses none for who it is; remote peers (the
	// workspaces of a campaign) are only capped.
	EpisodeUID func(uid uint32) bool
	// MaxConns caps the connections open at once; 0 means
	// gate.DefaultMaxConns, or half the process's RLIMIT_NOFILE when that
	// is less.
	MaxConns int
	// MaxConnsPerPeer caps the connections open at once from one peer (an
	// episode server: its address when remote, its uid when local); 0
	// means gate.DefaultMaxPerPeer.
	MaxConnsPerPeer int
	// Logger receives one line per request (method, route pattern,
	// status, duration) and every internal error; never a header, a body
	// or a path as the client sent it. Nil discards.
	Logger *slog.Logger
}

// Server is the grader service: it holds the answer keys and grades for
// an episode server that does not (see the package doc).
type Server struct {
	cfg     ServerConfig
	keySum  [sha256.Size]byte
	log     *slog.Logger
	handler http.Handler
	gate    *gate.Gate

	conns  conntrack.Tracker // open connections, for shutdown
	counts counters          // protected routes' requests (counters.go)
}

// ErrNoKey is returned (wrapped) by NewServer for an empty key without
// InsecureNoKey.
var ErrNoKey = errors.New("no API key")

// NewServer validates cfg and returns a Server.
func NewServer(cfg ServerConfig) (*Server, error) {
	if cfg.Key == "" && !cfg.InsecureNoKey {
		return nil, fmt.Errorf("grader: ServerConfig.Key is empty: %w (set the key, or InsecureNoKey for local tests)", ErrNoKey)
	}
	if cfg.Catalogue == nil {
		cfg.Catalogue = tasksCatalogue{}
	}
	s := &Server{cfg: cfg, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s.keySum = sha256.Sum256([]byte(cfg.Key))
	g, err := gate.New(gate.Config{EpisodeUID: cfg.EpisodeUID, MaxConns: cfg.MaxConns, MaxPerPeer: cfg.MaxConnsPerPeer, Logger: s.log})
	if err != nil {
		return nil, fmt.Errorf("grader: %w", err)
	}
	s.gate = g
	s.handler = s.routes()
	return s, nil
}

// Handler returns the service's routes. Serve uses them behind its gate;
// mounted elsewhere (tests) they refuse no peer.
func (s *Server) Handler() http.Handler { return s.handler }

// Gate returns the gate Serve puts in front of every listener.
func (s *Server) Gate() *gate.Gate { return s.gate }

func (s *Server) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(s.logRequests)
	r.Get(RouteHealth, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "healthy"})
	})
	r.Get(RouteDocs, s.handleDocs)
	r.Group(func(r chi.Router) {
		r.Use(s.counts.arrive)
		r.Use(s.requireKey)
		r.Use(s.counts.authorize)
		r.Get(RouteCounters, s.handleCounters)
		r.Post(RouteScore, s.handleScore)
		r.Post(RouteCases, s.handleCases)
		r.Post(RouteJudge, s.handleJudge)
	})
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no such route; see GET /docs")
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "method not allowed on this route; see GET /docs")
	})
	return r
}

// docs is GET /docs's route list.
var docs = map[string]any{
	"service": "agentpen workbench grader",
	"auth":    "protected routes need the API key in the " + KeyHeader + " header; a missing or wrong key gets 401",
	"routes": []map[string]any{
		{"method": "GET", "path": RouteHealth, "auth": false, "does": "liveness: {\"status\":\"healthy\"}"},
		{"method": "GET", "path": RouteDocs, "auth": false, "does": "this list"},
		{"method": "POST", "path": RouteScore, "auth": true, "does": "grade a non-code answer: {task_id, answer} -> {credit, reason}"},
		{"method": "POST", "path": RouteCases, "auth": true, "does": "a code task's hidden case arguments: {task_id} -> {inputs: [[arg, ...], ...]}"},
		{"method": "POST", "path": RouteJudge, "auth": true, "does": "grade a code task: {task_id, visible_passed: [bool], hidden: [{value: V} or {}]} -> {credit, reason}"},
		{"method": "GET", "path": RouteCounters, "auth": true, "does": "request counters of the protected routes: {routes: {route: {requests, authorized, refused}}}"},
	},
}

func (s *Server) handleDocs(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, docs)
}

// requireKey refuses a request without exactly one KeyHeader equal to the
// key, before its body is read. The comparison is of SHA-256 sums in
// constant time, so neither the key's bytes nor its length leak by time.
func (s *Server) requireKey(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.Key == "" {
			next.ServeHTTP(w, r)
			return
		}
		vals := r.Header.Values(KeyHeader)
		ok := 0
		if len(vals) == 1 {
			sum := sha256.Sum256([]byte(vals[0]))
			ok = subtle.ConstantTimeCompare(sum[:], s.keySum[:])
		}
		if ok != 1 {
			why := "wrong key"
			if len(vals) == 0 {
				why = "no key"
			} else if len(vals) > 1 {
				why = "more than one key header"
			}
			s.log.Warn("refused", "route", routePattern(r), "why", why)
			writeError(w, http.StatusUnauthorized, "unauthorized", "missing or wrong API key")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// readBody reads a bounded request body; it answers and returns false
// when it cannot.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("request body larger than %d bytes", MaxBodyBytes))
		} else {
			writeError(w, http.StatusBadRequest, "bad_body", "cannot read the request body")
		}
		return nil, false
	}
	return body, true
}

// refuseDecode answers a request whose body did not decode.
func refuseDecode(w http.ResponseWriter, err error) {
	var fe *fieldError
	if errors.As(err, &fe) {
		writeError(w, http.StatusUnprocessableEntity, "invalid_request", fe.Error())
		return
	}
	writeError(w, http.StatusBadRequest, "invalid_json", "the body is not one JSON value")
}

// task builds the task a request names and checks its kind; it answers
// and returns nil when it cannot.
func (s *Server) task(w http.ResponseWriter, r *http.Request, id string, wantCode bool) *tasks.Task {
	t, err := s.cfg.Catalogue.Build(id)
	if errors.Is(err, tasks.ErrUnknownTask) {
		writeError(w, http.StatusNotFound, "unknown_task", "task_id names no task of this grader's catalogue")
		return nil
	}
	if err != nil {
		s.internal(w, r, fmt.Errorf("build task %q: %w", id, err))
		return nil
	}
	if isCode := t.Kind == tasks.KindCode; isCode != wantCode {
		msg := "task_id names a code task; grade it with " + RouteCases + " and " + RouteJudge
		if !isCode {
			msg = "task_id names a task that is not a code task; grade it with " + RouteScore
		}
		writeError(w, http.StatusUnprocessableEntity, "wrong_kind", msg)
		return nil
	}
	return t
}

// taskRequest is the body of a protected route: it names a task.
type taskRequest interface{ taskID() string }

func (r scoreRequest) taskID() string { return r.TaskID }
func (r casesRequest) taskID() string { return r.TaskID }
func (r judgeRequest) taskID() string { return r.TaskID }

// readTaskRequest is the first half of every protected route: read the
// bounded body, decode it with decode, and build the task it names, which
// must be a code task when wantCode and must not be one otherwise. When a
// step fails it has answered the request, and ok is false.
func readTaskRequest[R taskRequest](s *Server, w http.ResponseWriter, r *http.Request, decode func([]byte) (R, error), wantCode bool) (req R, t *tasks.Task, ok bool) {
	body, ok := readBody(w, r)
	if !ok {
		return req, nil, false
	}
	req, err := decode(body)
	if err != nil {
		refuseDecode(w, err)
		return req, nil, false
	}
	t = s.task(w, r, req.taskID(), wantCode)
	return req, t, t != nil
}

// grader is the in-process grader over one already-built task.
func grader(t *tasks.Task) episode.Grader { return episode.LocalGrader(builtTask{t}) }

// builtTask is a one-task episode.Catalogue, so a request builds its task
// once.
type builtTask struct{ t *tasks.Task }

func (b builtTask) IDs() []string { return []string{b.t.TaskID} }
func (b builtTask) Build(id string) (*tasks.Task, error) {
	if id != b.t.TaskID {
		return nil, fmt.Errorf("task id %q: %w", id, tasks.ErrUnknownTask)
	}
	return b.t, nil
}

func (s *Server) handleScore(w http.ResponseWriter, r *http.Request) {
	req, t, ok := readTaskRequest(s, w, r, decodeScore, false)
	if !ok {
		return
	}
	credit, why, err := grader(t).ScoreAnswer(r.Context(), t.TaskID, req.Answer)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, verdict{Credit: credit, Reason: why})
}

func (s *Server) handleCases(w http.ResponseWriter, r *http.Request) {
	_, t, ok := readTaskRequest(s, w, r, decodeCases, true)
	if !ok {
		return
	}
	inputs, err := grader(t).HiddenInputs(r.Context(), t.TaskID)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	for i, in := range inputs {
		if in == nil {
			inputs[i] = []any{}
		}
	}
	if inputs == nil {
		inputs = [][]any{}
	}
	writeJSON(w, http.StatusOK, casesReply{Inputs: inputs})
}

func (s *Server) handleJudge(w http.ResponseWriter, r *http.Request) {
	req, t, ok := readTaskRequest(s, w, r, decodeJudge, true)
	if !ok {
		return
	}
	// The counts are not secret (the episode server asked for the cases),
	// but they are not repeated either.
	if len(req.VisiblePassed) != len(t.Visible) {
		writeError(w, http.StatusUnprocessableEntity, "invalid_request", "visible_passed: must have one entry per visible case of the task")
		return
	}
	if len(req.Hidden) != len(t.Key.Hidden) {
		writeError(w, http.StatusUnprocessableEntity, "invalid_request", "hidden: must have one output per hidden case of the task")
		return
	}
	outs := make([]episode.Output, len(req.Hidden))
	for i, h := range req.Hidden {
		if h.Value != nil {
			outs[i] = episode.Output{Value: []byte(h.Value)}
		}
	}
	credit, why, err := grader(t).Judge(r.Context(), t.TaskID, req.VisiblePassed, outs)
	if err != nil {
		s.internal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, verdict{Credit: credit, Reason: why})
}

// internal logs err and answers 500 without it.
func (s *Server) internal(w http.ResponseWriter, r *http.Request, err error) {
	s.log.Error("internal error", "route", routePattern(r), "err", err)
	writeError(w, http.StatusInternalServerError, "internal", "internal error; see the grader's log")
}

// statusWriter records the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (sw *statusWriter) WriteHeader(code int) {
	if sw.status == 0 {
		sw.status = code
	}
	sw.ResponseWriter.WriteHeader(code)
}

func (sw *statusWriter) Write(b []byte) (int, error) {
	if sw.status == 0 {
		sw.status = http.StatusOK
	}
	return sw.ResponseWriter.Write(b)
}

// logRequests logs one line per request and turns a handler's panic into
// a 500 (logged without its value, which may hold request data).
func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error("handler panicked", "route", routePattern(r))
				if sw.status == 0 {
					writeError(sw, http.StatusInternalServerError, "internal", "internal error; see the grader's log")
				}
			}
			s.log.Info("request", "method", r.Method, "route", routePattern(r), "status", sw.status,
				"duration_ms", time.Since(start).Milliseconds())
		}()
		next.ServeHTTP(sw, r)
	})
}

// routePattern is the chi pattern a request matched ("/v1/score"), or
// "unmatched": never the path as sent, which may hold anything.
func routePattern(r *http.Request) string {
	if rc := chi.RouteContext(r.Context()); rc != nil {
		if p := rc.RoutePattern(); p != "" {
			return p
		}
	}
	return "unmatched"
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		w.Write([]byte(`{"code":"internal","message":"cannot encode the reply"}`))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, apiError{Code: code, Message: message})
}

// ShutdownTimeout bounds how long Serve waits for requests in flight once
// its context is done.
const ShutdownTimeout = 10 * time.Second

// shutdownGrace is how long requests in flight may finish on their own at
// shutdown (grading takes milliseconds); after it, reads still pending
// (a client stalled in its body) are cut, so they cannot hold shutdown up
// to ShutdownTimeout and make it fail.
const shutdownGrace = time.Second

// Serve serves on every listener, behind the gate (Gate), until ctx is
// done, then stops accepting
// and returns once the requests in flight finished (or ShutdownTimeout
// passed); a request still being read after shutdownGrace (a client
// stalled in its body) is cut off. Serve closes the listeners.
func (s *Server) Serve(ctx context.Context, listeners ...net.Listener) error {
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       2 * time.Minute,
		WriteTimeout:      2 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ConnState:         s.conns.ConnState,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	if s.cfg.Key == "" && len(listeners) > 0 {
		s.log.Warn("no API key: every protected route is open (--insecure-no-key); never use this in a campaign")
	}
	return httpserve.Serve(ctx, hs, listeners, httpserve.Options{
		Name: "grader", Log: s.log, Wrap: s.gate.Listener, ShutdownTimeout: ShutdownTimeout,
		// A request still being read after shutdownGrace (a client
		// stalled in its body) is cut off.
		CutAfter: shutdownGrace, Cut: s.conns.CutReads,
	})
}
