package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentpen/agentpen/workbench/bind"
	"github.com/agentpen/agentpen/workbench/episode"
	"github.com/coder/websocket"
)

// WebSocket error codes (OpenEnv's WSErrorCode).
const (
	CodeInvalidJSON     = "INVALID_JSON"
	CodeUnknownType     = "UNKNOWN_TYPE"
	CodeValidationError = "VALIDATION_ERROR"
	CodeExecutionError  = "EXECUTION_ERROR"
	CodeCapacityReached = "CAPACITY_REACHED"
	CodeFactoryError    = "FACTORY_ERROR"
	CodeSessionError    = "SESSION_ERROR"
)

const (
	// refusalGrace is how long a session refused at the start (capacity,
	// factory) waits for the client's first frame before closing, so that
	// frame is answered by the queued error instead of a closed socket.
	refusalGrace = 5 * time.Second
	// writeTimeout bounds one frame's write to a client that stopped
	// reading.
	writeTimeout = 30 * time.Second
)

// Close reasons.
const (
	reasonIdle     = "idle timeout"
	reasonShutdown = "server shutting down"
)

// wsReply is a server frame: {"type": ..., "data": ...}.
type wsReply struct {
	Type string `json:"type"`
	Data any    `json:"data"`
}

func errorReply(code, message string, extra map[string]any) wsReply {
	data := map[string]any{"message": message, "code": code}
	for k, v := range extra {
		data[k] = v
	}
	return wsReply{Type: "error", Data: data}
}

// frame is one message the reader goroutine read, or the error that ended
// reading.
type frame struct {
	typ  websocket.MessageType
	data []byte
	err  error
}

// startReader reads frames until ctx is done or reading fails, and calls
// onErr when reading fails first; the caller must cancel ctx and call the
// returned wait before returning. Reading all the time is what answers
// pings while a step runs.
func startReader(ctx context.Context, c *websocket.Conn, onErr func()) (<-chan frame, func()) {
	out := make(chan frame)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			typ, data, err := c.Read(ctx)
			if err != nil && ctx.Err() == nil {
				onErr()
			}
			select {
			case out <- frame{typ: typ, data: data, err: err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	})
	return out, wg.Wait
}

// wsConn is an accepted WebSocket connection of a session: its context
// (cancelled by shutdown and when the client goes away) and its frames.
type wsConn struct {
	c      *websocket.Conn
	ctx    context.Context
	frames <-chan frame
	end    func()
}

// acceptWS accepts r's WebSocket, tracks it for shutdown and starts its
// reader; gone is called when the client goes away, before the context is
// cancelled (and with it a running step). The reader is not stopped by
// shutdown (a cancelled Read drops the connection without a close frame);
// it stops at end, which the caller defers. ok is false when there is no
// session: r was answered, or the connection closed at shutdown.
func (s *Server) acceptWS(w http.ResponseWriter, r *http.Request, gone func()) (_ *wsConn, ok bool) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		// Accept has answered the request.
		s.log.Debug("websocket upgrade failed", "remote", r.RemoteAddr, "err", err)
		return nil, false
	}
	c.SetReadLimit(MaxFrameBytes)
	ctx, cancel := context.WithCancel(r.Context())
	done, err := s.track(cancel)
	if err != nil {
		cancel()
		c.Close(websocket.StatusGoingAway, reasonShutdown)
		return nil, false
	}
	readCtx, stopReading := context.WithCancel(context.WithoutCancel(ctx))
	frames, waitReader := startReader(readCtx, c, func() { gone(); cancel() })
	return &wsConn{c: c, ctx: ctx, frames: frames, end: func() {
		stopReading()
		c.CloseNow()
		waitReader()
		done()
		cancel()
	}}, true
}

func (s *Server) handleWS(w http.ResponseWriter, r *http.Request) {
	// A client that goes away cancels the session, and with it a running
	// step.
	var gone atomic.Bool
	ws, ok := s.acceptWS(w, r, func() { gone.Store(true) })
	if !ok {
		return
	}
	defer ws.end()
	c, ctx, frames := ws.c, ws.ctx, ws.frames

	release, active, ok := s.reserve()
	if !ok {
		s.log.Info("session refused: at capacity", "remote", r.RemoteAddr, "active", active, "max", s.cfg.MaxSessions)
		s.refuseSession(ctx, c, frames, errorReply(CodeCapacityReached,
			fmt.Sprintf("Server at capacity: %d/%d sessions active. Cannot accept new connections.", active, s.cfg.MaxSessions),
			map[string]any{"active_sessions": active, "max_sessions": s.cfg.MaxSessions}))
		return
	}
	defer release()

	env, err := s.cfg.Factory()
	if err != nil {
		s.log.Error("session refused: environment factory failed", "remote", r.RemoteAddr, "err", err)
		s.refuseSession(ctx, c, frames, errorReply(CodeFactoryError,
			fmt.Sprintf("Environment factory '%s' failed to create instance.", s.cfg.FactoryName),
			map[string]any{"factory_name": s.cfg.FactoryName}))
		return
	}
	sess := &session{srv: s, c: c, env: env, started: s.clock.Now(), gone: &gone,
		rpc: &rpcSession{id: newSessionID(), ep: &toolEpisode{env: env}}}
	s.log.Info("session start", "remote", r.RemoteAddr, "active", active)
	closed := false
	defer func() {
		// A step that panicked (net/http recovers it) must not leak the
		// episode's workspace and sandbox uid.
		if !closed {
			s.log.Error("session ended by a panic", "episode_id", sess.episodeID)
			env.Close()
		}
	}()
	code, reason := sess.run(ctx, frames)
	closed = true
	if err := env.Close(); err != nil {
		s.log.Error("close environment", "episode_id", sess.episodeID, "err", err)
	}
	release()
	sess.logEnd(reason)
	if code != 0 {
		c.Close(code, reason)
	}
}

// refuseSession sends a start-of-session error, then waits for the client's
// first frame, refusalGrace or shutdown before closing with 1000.
func (s *Server) refuseSession(ctx context.Context, c *websocket.Conn, frames <-chan frame, reply any) {
	if err := writeFrame(ctx, c, reply); err != nil {
		return
	}
	t := time.NewTimer(refusalGrace)
	defer t.Stop()
	select {
	case <-frames:
	case <-t.C:
	case <-ctx.Done():
	}
	c.Close(websocket.StatusNormalClosure, "")
}

// writeFrame writes one JSON text frame. Shutdown does not cut a reply off
// (a cancelled write drops the connection); writeTimeout bounds it.
func writeFrame(ctx context.Context, c *websocket.Conn, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode frame: %w", err)
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	return c.Write(wctx, websocket.MessageText, b)
}

// session is one WebSocket connection's environment.
type session struct {
	srv     *Server
	c       *websocket.Conn
	env     Env
	started time.Time
	gone    *atomic.Bool // the reader saw the client go
	// rpc is the session's environment as {"type":"mcp"} frames and
	// call_tool actions call it.
	rpc *rpcSession

	// What the end-of-session log line reports.
	episodeID string
	taskID    string
	steps     int
	reward    float64
	done      bool
}

// run answers frames until the session ends, and returns the close code
// and reason to end it with (code 0: the client is gone, nothing to send).
func (ss *session) run(ctx context.Context, frames <-chan frame) (websocket.StatusCode, string) {
	idle, disarm := ss.armIdle()
	defer func() { disarm() }()
	for {
		select {
		case <-ctx.Done():
			if ss.gone.Load() {
				return 0, "connection lost"
			}
			return websocket.StatusGoingAway, reasonShutdown
		case <-idle:
			return websocket.StatusNormalClosure, reasonIdle
		case f := <-frames:
			if f.err != nil {
				// The client closed, vanished, or broke the protocol (a
				// frame over the limit); the library has answered.
				return 0, closeReason(f.err)
			}
			reply, next := ss.handle(ctx, f)
			if next == active {
				// Before the reply: a client that has it knows its
				// session's idle clock restarted, and the server's last
				// activity (a campaign's idle timeout) moved.
				ss.srv.activity()
				disarm()
				idle, disarm = ss.armIdle()
			}
			if reply != nil {
				if err := writeFrame(ctx, ss.c, reply); err != nil {
					return 0, "write failed: " + err.Error()
				}
			}
			switch next {
			case endSession:
				return websocket.StatusNormalClosure, "client closed the session"
			case endWithError:
				return websocket.StatusNormalClosure, "session error"
			}
		}
	}
}

// armIdle starts the session's idle clock: the channel is closed once
// IdleTimeout passes on the server's clock, unless disarm is called first
// (a nil channel, which never fires, when sessions are never reaped). A
// fresh channel per arming: a timer that fired while a step ran is
// forgotten with its channel.
func (ss *session) armIdle() (idle <-chan struct{}, disarm func() bool) {
	d := ss.srv.cfg.IdleTimeout
	if d <= 0 {
		return nil, func() bool { return false }
	}
	ch := make(chan struct{})
	return ch, ss.srv.clock.AfterFunc(d, func() { close(ch) })
}

func closeReason(err error) string {
	if st := websocket.CloseStatus(err); st != -1 {
		return fmt.Sprintf("client closed the connection (%d)", st)
	}
	return "connection lost: " + err.Error()
}

// outcome says what a handled frame does to the session.
type outcome int

const (
	keepOpen     outcome = iota // answered; not activity (state, errors)
	active                      // a reset or step: the idle clock restarts
	endSession                  // close frame: no reply, close 1000
	endWithError                // SESSION_ERROR sent: close 1000
)

// envelopeFields are the keys each client message may carry.
var envelopeFields = map[string]map[string]bool{
	"reset": {"type": true, "data": true},
	"step":  {"type": true, "data": true},
	"state": {"type": true},
	"close": {"type": true},
	"mcp":   {"type": true, "data": true},
}

// handle answers one frame as OpenEnv's /ws loop does.
func (ss *session) handle(ctx context.Context, f frame) (*wsReply, outcome) {
	if f.typ != websocket.MessageText {
		r := errorReply(CodeSessionError, "binary frames are not supported; send JSON text frames", nil)
		return &r, endWithError
	}
	var probe any
	if err := json.Unmarshal(f.data, &probe); err != nil {
		r := errorReply(CodeInvalidJSON, "Invalid JSON: "+err.Error(), nil)
		return &r, keepOpen
	}
	msg, ok := decodeObject(f.data)
	if !ok {
		r := errorReply(CodeSessionError, "a message must be a JSON object with a \"type\"", nil)
		return &r, endWithError
	}
	var typ string
	rawType, hasType := msg.fields["type"]
	if hasType && jsonKind(rawType) == 's' {
		json.Unmarshal(rawType, &typ)
	}
	allowed, known := envelopeFields[typ]
	if !known {
		shown := typ
		if hasType && jsonKind(rawType) != 's' {
			shown = string(compactOrNull(rawType))
		}
		r := errorReply(CodeUnknownType, "Unknown message type: "+shown, nil)
		return &r, keepOpen
	}
	var errs []fieldError
	for _, k := range msg.keys {
		if !allowed[k] {
			errs = append(errs, fieldError{Type: "extra_forbidden", Loc: []any{k}, Msg: "Extra inputs are not permitted", Input: msg.fields[k]})
		}
	}
	data, hasData := msg.fields["data"]
	switch {
	case (typ == "step" || typ == "mcp") && !hasData:
		errs = append([]fieldError{{Type: "missing", Loc: []any{"data"}, Msg: "Field required", Input: msg.raw()}}, errs...)
	case hasData && allowed["data"] && jsonKind(data) != 'o':
		errs = append([]fieldError{dictTypeError("data", data)}, errs...)
	}
	if errs != nil {
		return validationReply(errs), keepOpen
	}

	switch typ {
	case "close":
		return nil, endSession
	case "state":
		return &wsReply{Type: "state", Data: stateOf(ss.env.State())}, keepOpen
	case "mcp":
		// OpenEnv's JSON-RPC on the session's own environment.
		req, rerr := decodeRPC(data)
		resp := rpcResponse{ID: req.ID, Err: rerr}
		if rerr == nil {
			resp = ss.srv.handleRPC(ctx, req, ss.rpc)
		}
		return &wsReply{Type: "mcp", Data: resp}, active
	case "reset":
		obj := object{fields: map[string]json.RawMessage{}}
		if hasData {
			obj, _ = decodeObject(data)
		}
		opts, err := resetKwargs(obj)
		if err == nil {
			var obs episode.Observation
			if obs, err = ss.env.Reset(ctx, opts); err == nil {
				ss.rpc.ep.markStarted()
				ss.observe(obs)
				return &wsReply{Type: "observation", Data: envelope(obs)}, active
			}
		}
		if errors.Is(err, bind.ErrUnbound) || errors.Is(err, bind.ErrBadFile) {
			ss.srv.logUnbound(err)
		}
		return executionError(err), active
	default: // step
		obj, isObject := decodeObject(data)
		if a, isMCP, verrs := decodeMCPAction(obj); isObject && isMCP {
			if verrs != nil {
				return validationReply(withURLs(verrs)), keepOpen
			}
			env, tc, err := ss.srv.mcpObservation(ctx, ss.rpc.ep, a, episode.ResetOptions{})
			if err != nil {
				return executionError(err), active
			}
			if a.kind == "call_tool" {
				ss.observe(tc.obs)
			}
			return &wsReply{Type: "observation", Data: env}, active
		}
		action, verrs := validateActionObject(obj, isObject, data)
		if verrs != nil {
			return validationReply(verrs), keepOpen
		}
		obs, err := ss.env.Step(ctx, action)
		if err != nil {
			return executionError(err), active
		}
		ss.rpc.ep.markStarted()
		ss.observe(obs)
		return &wsReply{Type: "observation", Data: envelope(obs)}, active
	}
}

func validationReply(errs []fieldError) *wsReply {
	r := errorReply(CodeValidationError, "Invalid message", map[string]any{"errors": withURLs(errs)})
	return &r
}

func executionError(err error) *wsReply {
	msg := err.Error()
	switch {
	case errors.Is(err, context.Canceled):
		msg = "the server is shutting down: " + msg
	case errors.Is(err, bind.ErrUnbound), errors.Is(err, bind.ErrBadFile):
		msg = unboundMessage(err)
	}
	r := errorReply(CodeExecutionError, msg, nil)
	return &r
}

// observe records what the end-of-session log line reports.
func (ss *session) observe(obs episode.Observation) {
	st := ss.env.State()
	ss.episodeID, ss.steps = st.EpisodeID, st.StepCount
	if id, ok := obs.Metadata["task_id"].(string); ok {
		ss.taskID = id
	}
	if obs.Done && !ss.done {
		ss.srv.log.Info("episode end", "episode_id", ss.episodeID, "task_id", ss.taskID, "steps", ss.steps, "reward", obs.Reward)
	}
	ss.reward, ss.done = obs.Reward, obs.Done
}

func (ss *session) logEnd(reason string) {
	ss.srv.log.Info("session end",
		"episode_id", ss.episodeID, "task_id", ss.taskID, "steps", ss.steps,
		"reward", ss.reward, "done", ss.done, "reason", reason,
		"duration", ss.srv.clock.Now().Sub(ss.started).Round(time.Millisecond))
}
