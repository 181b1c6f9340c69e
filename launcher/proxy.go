package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/agentpen/agentpen/workbench/bind"
	"github.com/coder/websocket"
	"github.com/go-chi/chi/v5"
)

// workspaceHost is the Host of every request the proxy sends a workspace
// (its transport dials the workspace itself, whatever the name): a
// loopback name, because a cluster's workbench is reached on its pod's
// loopback through the port-forward, and its MCP handler refuses a
// request on a loopback listener whose Host is not loopback (the MCP
// SDK's protection against DNS rebinding).
const workspaceHost = "localhost"

// Proxy limits.
const (
	// MaxFrameBytes bounds one WebSocket message in either direction and
	// one HTTP body to the workspace: the workbench's own limit (16 MiB).
	MaxFrameBytes = 16 << 20
	// maxObservationBytes bounds a message or body from the workspace:
	// an observation may carry a little more than a frame's worth of
	// output around it.
	maxObservationBytes = MaxFrameBytes + 1<<20
	// dialTimeout bounds connecting to a workspace's episode server.
	dialTimeout = 5 * time.Second
)

// CodeWorkspaceUnavailable is the error frame's code, and the close
// reason's prefix, when the proxy cannot reach a workspace or loses it.
const CodeWorkspaceUnavailable = "WORKSPACE_UNAVAILABLE"

// episodePrefix is where the proxy serves: base_url is
// PublicURL + episodePrefix + "/" + capability.
const episodePrefix = "/episode"

// route is one workspace reachable through the proxy.
type route struct {
	key                         [32]byte
	campaignID, agentID, taskID string
	client                      *http.Client // plain HTTP to the workspace's episode server
	ctx                         context.Context
	cancel                      context.CancelCauseFunc
}

// newRoute is the route to a workspace whose episode server dial reaches
// (the driver's: a Docker workspace's unix socket).
func newRoute(campaignID, agentID, taskID string, dial func(context.Context) (net.Conn, error), capab string) *route {
	rt := &route{key: capKey(capab), campaignID: campaignID, agentID: agentID, taskID: taskID}
	rt.ctx, rt.cancel = context.WithCancelCause(context.Background())
	rt.client = &http.Client{
		// A redirect is the client's to follow (the play page's /web is a
		// relative one), never the proxy's.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				ctx, cancel := context.WithTimeout(ctx, dialTimeout)
				defer cancel()
				return dial(ctx)
			},
			MaxIdleConnsPerHost: 8,
			IdleConnTimeout:     30 * time.Second,
			DisableCompression:  true,
		}}
	return rt
}

// revoke ends the route's sessions and requests; cause (errRevoked or
// errNotAttested) says why, to the client.
func (rt *route) revoke(cause error) {
	rt.cancel(cause)
	rt.client.CloseIdleConnections()
}

// revoked reports whether a route's context ended because its campaign
// stopped being served (removed, or failed its attestation).
func revoked(cause error) bool {
	return errors.Is(cause, errRevoked) || errors.Is(cause, errNotAttested)
}

func (rt *route) shutdown() {
	rt.cancel(errShutdown)
	rt.client.CloseIdleConnections()
}

// withRoute returns a context that ends with ctx or with the route, and
// its cancel.
func withRoute(ctx context.Context, rt *route) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(rt.ctx, func() { cancel(context.Cause(rt.ctx)) })
	return ctx, func() { stop(); cancel(context.Canceled) }
}

// proxyRoutes are the HTTP routes relayed to a workspace, with the
// method each takes (OpenEnv's create_app; /ws is served apart).
var proxyRoutes = []struct{ method, path, summary string }{
	{http.MethodPost, "/reset", "Reset (stateless, OpenEnv HTTP): the workspace's own task, whatever task_id the body names"},
	{http.MethodPost, "/step", "Step (stateless, OpenEnv HTTP) on a fresh episode of the workspace's task"},
	{http.MethodGet, "/state", "Episode state (stateless, OpenEnv HTTP)"},
	{http.MethodGet, "/schema", "Action, observation and state JSON Schemas"},
	{http.MethodGet, "/metadata", "Environment metadata"},
	{http.MethodGet, "/health", "The workspace's episode server health"},
}

// proxyRoute resolves the capability of a proxy request and counts the
// relay (Close waits for it), or answers 404 (unknown capability) or 503
// (the service is closing) and returns nil. The caller calls done.
func (s *Server) proxyRoute(w http.ResponseWriter, r *http.Request) (rt *route, done func()) {
	key := capKey(chi.URLParam(r, "capability"))
	s.mu.Lock()
	closed := s.closed
	rt = s.routes[key]
	if rt != nil && !closed {
		s.relays.Add(1) // under s.mu: never after Close began to wait
	}
	s.mu.Unlock()
	switch {
	case rt == nil:
		s.metrics.proxyErrors.WithLabelValues(errKindUnknown).Inc()
		writeProblem(w, http.StatusNotFound, "no such workspace: the capability is unknown, or its workspace is no longer served")
		return nil, nil
	case closed:
		writeProblem(w, http.StatusServiceUnavailable, "the service is shutting down")
		return nil, nil
	}
	return rt, s.relays.Done
}

// unavailable answers a request whose workspace could not be reached.
func (s *Server) unavailable(w http.ResponseWriter, ctx context.Context, rt *route, err error) {
	switch cause := context.Cause(ctx); {
	case revoked(cause):
		s.metrics.proxyErrors.WithLabelValues(errKindRevoked).Inc()
		writeProblem(w, http.StatusGone, cause.Error())
	case errors.Is(cause, errShutdown):
		writeProblem(w, http.StatusServiceUnavailable, "the service is shutting down")
	case ctx.Err() != nil:
		// The client went away; nobody reads the answer.
	default:
		s.metrics.proxyErrors.WithLabelValues(errKindDial).Inc()
		s.log.Warn("workspace unavailable", "campaign", rt.campaignID, "agent", rt.agentID, "err", err)
		writeProblem(w, http.StatusBadGateway, "the workspace's episode server did not answer ("+CodeWorkspaceUnavailable+")")
	}
}

// serveWS relays one WebSocket episode session: the workspace is dialled
// first (a workspace that does not answer is a 502 before any upgrade),
// then frames flow both ways unchanged, but for the task of a reset and
// a step while the session holds no episode of that task (see session).
func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) { s.relayWS(w, r, "/ws") }

// relayWS relays a WebSocket session to the workspace's path (/ws, or
// OpenEnv's WebSocket /mcp).
func (s *Server) relayWS(w http.ResponseWriter, r *http.Request, path string) {
	rt, done := s.proxyRoute(w, r)
	if rt == nil {
		return
	}
	defer done()
	ctx, cancel := withRoute(context.WithoutCancel(r.Context()), rt)
	defer cancel()
	dctx, dcancel := context.WithTimeout(ctx, dialTimeout)
	back, _, err := websocket.Dial(dctx, "ws://"+workspaceHost+path, &websocket.DialOptions{HTTPClient: rt.client})
	dcancel()
	if err != nil {
		s.unavailable(w, ctx, rt, err)
		return
	}
	back.SetReadLimit(maxObservationBytes)
	front, err := websocket.Accept(w, r, nil)
	if err != nil {
		back.CloseNow()
		return // Accept answered the request
	}
	front.SetReadLimit(MaxFrameBytes)
	s.metrics.episodes.Inc()
	defer s.metrics.episodes.Dec()
	s.relay(ctx, rt, front, back)
}

// end is how one direction of a relay ended.
type end struct {
	fromClient bool
	err        error
}

// relay copies messages both ways until either side closes, fails, or the
// route ends, then closes both sides and returns when both pumps have.
// A close by one side is passed on with its code and reason; a workspace
// lost without a close is 1011 to the client; a removed workspace 1001.
func (s *Server) relay(ctx context.Context, rt *route, front, back *websocket.Conn) {
	// The pumps' own context is never cancelled before they end: a
	// cancelled Read or Write drops a connection without a close frame.
	pctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	ends := make(chan end, 2)
	ss := &session{front: front}
	var wg sync.WaitGroup
	wg.Go(func() { ends <- end{fromClient: true, err: ss.pumpClient(pctx, back, rt.taskID)} })
	wg.Go(func() { ends <- end{err: ss.pumpWorkspace(pctx, back)} })
	defer wg.Wait()
	defer back.CloseNow()
	defer front.CloseNow()

	var first end
	select {
	case first = <-ends:
	case <-ctx.Done():
		cause := context.Cause(ctx)
		code, reason := websocket.StatusGoingAway, "server shutting down"
		if revoked(cause) {
			code, reason = websocket.StatusGoingAway, CodeWorkspaceUnavailable+": "+cause.Error()
			s.metrics.proxyErrors.WithLabelValues(errKindRevoked).Inc()
		}
		closeBoth(front, back, code, reason)
		return
	}
	code, reason := websocket.CloseStatus(first.err), ""
	var ce websocket.CloseError
	if errors.As(first.err, &ce) {
		reason = ce.Reason
	}
	switch {
	case first.fromClient && code != -1:
		closeBoth(back, front, code, reason)
	case first.fromClient:
		back.Close(websocket.StatusGoingAway, "client went away")
	case code != -1:
		closeBoth(front, back, code, reason)
	default:
		s.metrics.proxyErrors.WithLabelValues(errKindBackendLost).Inc()
		s.log.Warn("workspace connection lost", "campaign", rt.campaignID, "agent", rt.agentID, "err", first.err)
		front.Close(websocket.StatusInternalError, CodeWorkspaceUnavailable+": the workspace's episode server went away")
	}
}

// closeBoth passes a close on to first, then closes second, each bounded
// by the close handshake's own timeout.
func closeBoth(first, second *websocket.Conn, code websocket.StatusCode, reason string) {
	if code == websocket.StatusNoStatusRcvd || code == websocket.StatusAbnormalClosure || code == websocket.StatusTLSHandshake {
		code = websocket.StatusNormalClosure // reserved codes cannot be sent
	}
	first.Close(code, reason)
	second.Close(code, reason)
}

// session is the proxy's view of one episode session, for the task
// binding. OpenEnv's server answers every client frame with exactly one
// frame, in order (a close, which ends the session, excepted), so the
// proxy knows which frames the workspace has still to answer, and from
// the answer to each reset whether the workspace now holds an episode of
// the bound task. A step is relayed only then: before the session's first
// reset, or after a reset that failed, the workbench would start an
// episode of its default task for the step (not the bound one), so the
// proxy answers the step itself with OpenEnv's error frame, in the
// step's place among the replies, and relays nothing.
type session struct {
	front *websocket.Conn

	mu sync.Mutex
	// pending are the frames relayed and not yet answered, and the
	// refusals queued behind them, in the client's order.
	pending []pendingFrame
	// resets counts the resets in pending; bound is true when none is and
	// the workspace answered the latest with an observation.
	resets int
	bound  bool
}

// pendingFrame is a relayed frame awaiting its answer, or (refusal set) a
// step the proxy answers itself, in turn.
type pendingFrame struct {
	reset   bool
	refusal []byte
}

// stepRefusal is the proxy's answer to a step it does not relay: OpenEnv's
// error frame (the code an environment's failing step gets), which
// OpenEnv's clients raise as "Server error: ... (code: EXECUTION_ERROR)".
var stepRefusal = encode(map[string]any{"type": "error", "data": map[string]any{
	"code":    "EXECUTION_ERROR",
	"message": "no episode is running in this session: send a reset first (a step before the first reset, or after a reset that failed, is not relayed)",
}})

// stepBehindReset is the refusal of a step sent while a reset is still
// unanswered (pipelined behind it): the proxy cannot know yet whether the
// reset will give the bound task's episode, and a step after a failed
// reset would start the workbench's default task.
var stepBehindReset = encode(map[string]any{"type": "error", "data": map[string]any{
	"code":    "EXECUTION_ERROR",
	"message": "a step sent before its reset was answered is not relayed: wait for the reset's answer, then step",
}})

// otherTaskRefusal is the proxy's answer to a reset naming another task
// than the workspace's: the workbench's own refusal (EXECUTION_ERROR,
// the binding's message).
var otherTaskRefusal = encode(map[string]any{"type": "error", "data": map[string]any{
	"code":    "EXECUTION_ERROR",
	"message": bind.ErrOtherTask.Error(),
}})

// kindOtherTask is the kind relayed records for a reset naming another
// task, which is refused and never relayed.
const kindOtherTask = "reset of another task"

// pumpClient copies the client's messages to the workspace, each read
// whole (at most MaxFrameBytes) so a reset's task can be set and a step
// without an episode of the bound task refused.
func (ss *session) pumpClient(ctx context.Context, back *websocket.Conn, taskID string) error {
	for {
		typ, msg, err := ss.front.Read(ctx)
		if err != nil {
			return err
		}
		kind := ""
		if typ == websocket.MessageText {
			kind = frameType(msg)
		}
		if kind == "step" && listsTools(msg) {
			kind = "" // OpenEnv's list_tools needs no episode
		}
		if kind == "reset" {
			var other bool
			if msg, other = rewriteFrame(msg, taskID); other {
				kind = kindOtherTask
			}
		}
		relay, err := ss.relayed(ctx, kind)
		if err != nil {
			return err
		}
		if !relay {
			continue
		}
		if err := back.Write(ctx, typ, msg); err != nil {
			return err
		}
	}
}

// relayed records a client frame of the given type ("reset", "step",
// kindOtherTask, or "" for any other) before it is relayed, and reports
// whether to relay it: a reset naming another task, and a step without
// an episode of the bound task, are answered with a refusal instead (and
// change nothing of the session), at once when nothing is pending, else
// after the answers to the frames before it.
func (ss *session) relayed(ctx context.Context, kind string) (bool, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	var refusal []byte
	switch {
	case kind == kindOtherTask:
		refusal = otherTaskRefusal
	case kind == "step" && !ss.bound && ss.resets > 0:
		refusal = stepBehindReset
	case kind == "step" && !ss.bound:
		refusal = stepRefusal
	}
	if refusal != nil {
		if len(ss.pending) == 0 {
			return false, ss.front.Write(ctx, websocket.MessageText, refusal)
		}
		ss.pending = append(ss.pending, pendingFrame{refusal: refusal})
		return false, nil
	}
	if kind == "reset" {
		ss.resets++
		ss.bound = false
	}
	ss.pending = append(ss.pending, pendingFrame{reset: kind == "reset"})
	return true, nil
}

// answered records that the workspace answered the oldest pending frame
// (observation: the answer was an observation frame), calls relay (when
// not nil) to write that answer to the client, and sends the refusals
// queued behind it, all under the session's lock: the session is bound
// before the client can learn of a reset's answer (a step sent the
// moment it arrives must find its episode), and nothing else is written
// to the client in between.
func (ss *session) answered(ctx context.Context, observation bool, relay func() error) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if len(ss.pending) > 0 {
		if ss.pending[0].reset {
			ss.resets--
			ss.bound = ss.resets == 0 && observation
		}
		ss.pending = ss.pending[1:]
	}
	if relay != nil {
		if err := relay(); err != nil {
			return err
		}
	}
	for len(ss.pending) > 0 && ss.pending[0].refusal != nil {
		if err := ss.front.Write(ctx, websocket.MessageText, ss.pending[0].refusal); err != nil {
			return err
		}
		ss.pending = ss.pending[1:]
	}
	return nil
}

// awaitsReset reports whether the oldest pending frame is a reset.
func (ss *session) awaitsReset() bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return len(ss.pending) > 0 && ss.pending[0].reset
}

// pumpWorkspace copies every message from the workspace to the client as
// it comes, streamed, but for the answer to a reset, read whole (at most
// the read limit) to learn whether it is an observation.
func (ss *session) pumpWorkspace(ctx context.Context, back *websocket.Conn) error {
	for {
		typ, rd, err := back.Reader(ctx)
		if err != nil {
			return err
		}
		// The frame a message answers was recorded before it was relayed,
		// so it is pending by the time its answer arrives.
		if ss.awaitsReset() {
			msg, err := io.ReadAll(rd)
			if err != nil {
				return err
			}
			var m struct {
				Type string `json:"type"`
			}
			observation := typ == websocket.MessageText && json.Unmarshal(msg, &m) == nil && m.Type == "observation"
			if err := ss.answered(ctx, observation, func() error {
				if err := ss.front.Write(ctx, typ, msg); err != nil {
					return err
				}
				if testHookResetAnswerRelayed != nil {
					testHookResetAnswerRelayed()
				}
				return nil
			}); err != nil {
				return err
			}
			continue
		}
		if err := copyMessage(ctx, ss.front, typ, rd); err != nil {
			return err
		}
		if err := ss.answered(ctx, false, nil); err != nil {
			return err
		}
	}
}

// testHookResetAnswerRelayed, when set (tests), runs once a reset's
// answer was written to the client.
var testHookResetAnswerRelayed func()

// copyMessage streams one message to dst.
func copyMessage(ctx context.Context, dst *websocket.Conn, typ websocket.MessageType, rd io.Reader) error {
	wr, err := dst.Writer(ctx, typ)
	if err != nil {
		return err
	}
	if _, err := io.Copy(wr, rd); err != nil {
		wr.Close()
		return err
	}
	return wr.Close()
}
