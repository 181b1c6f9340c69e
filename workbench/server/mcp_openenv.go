package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/agentpen/agentpen/workbench/bind"
	"github.com/agentpen/agentpen/workbench/episode"
	"github.com/agentpen/agentpen/workbench/tasks"
	"github.com/coder/websocket"
)

// OpenEnv's MCP dialect (docs/openenv-protocol.md, "MCP"): JSON-RPC 2.0
// without MCP's initialize handshake, on POST /mcp (always HTTP 200, the
// error in the body), WebSocket /mcp (one environment per connection)
// and {"type":"mcp"} frames on /ws (the session's environment). Methods:
// tools/list, tools/call (on the connection's or the named session's
// environment, or on a fresh one, closed after the call), and
// openenv/session/create and openenv/session/close for HTTP sessions.

// JSON-RPC error codes (OpenEnv's JsonRpcErrorCode).
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeInternalError  = -32603
	codeServerError    = -32000
)

// rpcError is a JSON-RPC error object; data is null when empty, as
// OpenEnv's model_dump writes it.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data"`
}

func (e *rpcError) Error() string { return e.Message }

func capacityError(active, max int) *rpcError {
	return &rpcError{Code: codeServerError,
		Message: fmt.Sprintf("Server at capacity: %d/%d sessions active. Cannot accept new connections.", active, max),
		Data:    map[string]any{"active_sessions": active, "max_sessions": max}}
}

func factoryError(name string) *rpcError {
	return &rpcError{Code: codeServerError, Message: fmt.Sprintf("Environment factory '%s' failed to create instance.", name),
		Data: map[string]any{"factory_name": name}}
}

// rpcRequest is a decoded JSON-RPC request.
type rpcRequest struct {
	ID     json.RawMessage // null when absent
	Method string
	Params map[string]json.RawMessage
}

// rpcResponse has a result or an error, and always the id (null when the
// request had none or could not be read).
type rpcResponse struct {
	ID     json.RawMessage
	Result any
	Err    *rpcError
}

func (r rpcResponse) MarshalJSON() ([]byte, error) {
	id := r.ID
	if len(id) == 0 {
		id = nullJSON
	}
	if r.Err != nil {
		return json.Marshal(struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   *rpcError       `json:"error"`
		}{"2.0", id, r.Err})
	}
	return json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result"`
	}{"2.0", id, r.Result})
}

// rpcRequestKeys are the keys a request may have (OpenEnv's
// JsonRpcRequest forbids others).
var rpcRequestKeys = map[string]bool{"jsonrpc": true, "method": true, "params": true, "id": true}

// decodeRPC reads one JSON-RPC request as OpenEnv's server does; a batch
// (an array) is refused whole, unread.
func decodeRPC(raw []byte) (rpcRequest, *rpcError) {
	var req rpcRequest
	if !json.Valid(raw) {
		return req, &rpcError{Code: codeParseError, Message: "Parse error"}
	}
	if jsonKind(raw) == 'a' {
		return req, &rpcError{Code: codeInvalidRequest, Message: "Invalid request: batches are not supported; send one request at a time"}
	}
	obj, ok := decodeObject(raw)
	if !ok {
		return req, &rpcError{Code: codeInvalidRequest, Message: "Invalid request: a request must be a JSON object"}
	}
	for _, k := range obj.keys {
		if !rpcRequestKeys[k] {
			return req, &rpcError{Code: codeInvalidRequest, Message: fmt.Sprintf("Invalid request: unexpected key %q", k)}
		}
	}
	if v, ok := obj.fields["id"]; ok {
		switch jsonKind(v) {
		case 's', 'n':
			req.ID = compactOrNull(v)
		case 'd':
			if _, fe := pyInt(v); fe != nil || bytes.ContainsAny(v, ".eE") {
				return req, &rpcError{Code: codeInvalidRequest, Message: "Invalid request: id must be a string, an integer or null"}
			}
			req.ID = compactOrNull(v)
		default:
			return req, &rpcError{Code: codeInvalidRequest, Message: "Invalid request: id must be a string, an integer or null"}
		}
	}
	var version string
	if v, ok := obj.fields["jsonrpc"]; !ok || json.Unmarshal(v, &version) != nil || version != "2.0" {
		return req, &rpcError{Code: codeInvalidRequest, Message: `Invalid request: jsonrpc must be "2.0"`}
	}
	if v, ok := obj.fields["method"]; !ok || jsonKind(v) != 's' || json.Unmarshal(v, &req.Method) != nil {
		return req, &rpcError{Code: codeInvalidRequest, Message: "Invalid request: method must be a string"}
	}
	req.Params = map[string]json.RawMessage{}
	if v, ok := obj.fields["params"]; ok && jsonKind(v) != 'n' {
		if jsonKind(v) != 'o' || json.Unmarshal(v, &req.Params) != nil {
			return req, &rpcError{Code: codeInvalidParams, Message: "Params must be an object"}
		}
	}
	return req, nil
}

// rpcSession is an environment that JSON-RPC calls name: a WebSocket
// connection's (/mcp or /ws), or an HTTP session made by
// openenv/session/create.
type rpcSession struct {
	id string
	ep *toolEpisode

	// HTTP sessions only.
	mu      sync.Mutex
	closed  bool
	timer   *time.Timer   // idle reaping
	idleFor time.Duration // the timer's period
	release func()        // frees the slot, closes the environment, untracks
}

// rpcSessions are the HTTP sessions of openenv/session/create.
type rpcSessions struct {
	mu sync.Mutex
	m  map[string]*rpcSession
}

func (rs *rpcSessions) get(id string) *rpcSession {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.m[id]
}

func (rs *rpcSessions) add(sess *rpcSession) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.m == nil {
		rs.m = map[string]*rpcSession{}
	}
	rs.m[sess.id] = sess
}

// remove takes the session out and reports whether it was there.
func (rs *rpcSessions) remove(id string) *rpcSession {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	sess := rs.m[id]
	delete(rs.m, id)
	return sess
}

// handleMCP serves /mcp: the standard protocol's requests go to the SDK
// (standardMCP), a WebSocket upgrade to OpenEnv's WebSocket dialect, any
// other POST to OpenEnv's JSON-RPC.
func (s *Server) handleMCP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		s.handleMCPWS(w, r)
		return
	}
	var body []byte
	if r.Method == http.MethodPost {
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
		if err != nil {
			var tooBig *http.MaxBytesError
			status, msg := http.StatusBadRequest, "cannot read the request body"
			if errors.As(err, &tooBig) {
				status, msg = http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than %d bytes", maxBodyBytes)
			}
			writeRPCError(w, status, nil, &rpcError{Code: codeInvalidRequest, Message: msg})
			return
		}
		body = b
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	if isStandardMCP(r, body) {
		s.mcp.serveHTTP(w, r)
		return
	}
	if r.Method != http.MethodPost {
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"detail": "Method Not Allowed"})
		return
	}
	req, rerr := decodeRPC(body)
	if rerr != nil {
		writeJSON(w, http.StatusOK, rpcResponse{ID: req.ID, Err: rerr})
		return
	}
	writeJSON(w, http.StatusOK, s.handleRPC(r.Context(), req, nil))
}

func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, e *rpcError) {
	writeJSON(w, status, rpcResponse{ID: id, Err: e})
}

// handleRPC answers one request of OpenEnv's dialect; own is the
// connection's session (nil over HTTP).
func (s *Server) handleRPC(ctx context.Context, req rpcRequest, own *rpcSession) rpcResponse {
	res, err := s.rpcMethod(ctx, req, own)
	if err != nil {
		var re *rpcError
		if !errors.As(err, &re) {
			re = &rpcError{Code: codeInternalError, Message: err.Error()}
		}
		return rpcResponse{ID: req.ID, Err: re}
	}
	return rpcResponse{ID: req.ID, Result: res}
}

func (s *Server) rpcMethod(ctx context.Context, req rpcRequest, own *rpcSession) (any, error) {
	switch req.Method {
	case "openenv/session/create":
		if own != nil {
			return map[string]string{"session_id": own.id}, nil
		}
		return s.createRPCSession(ctx, req.Params)
	case "openenv/session/close":
		id, err := stringParam(req.Params, "session_id", true)
		if err != nil {
			return nil, err
		}
		if own != nil && id == own.id {
			return nil, &rpcError{Code: codeInvalidRequest, Message: "Cannot close active WebSocket-managed session via MCP method"}
		}
		sess := s.rpc.remove(id)
		if sess == nil {
			return nil, &rpcError{Code: codeInvalidParams, Message: "Unknown session_id: " + id}
		}
		s.closeRPCSession(sess, "closed by the client")
		return map[string]any{"session_id": id, "closed": true}, nil
	case "tools/list":
		return map[string]any{"tools": s.listedTools()}, nil
	case "tools/call":
		name, err := stringParam(req.Params, "name", true)
		if err != nil {
			return nil, &rpcError{Code: codeInvalidParams, Message: "Missing 'name' in params"}
		}
		args := req.Params["arguments"]
		if own == nil {
			// Over HTTP; a WebSocket's mcp frame is its session's activity.
			s.activity()
		}
		sess := own
		if sess == nil {
			if id, _ := stringParam(req.Params, "session_id", false); id != "" {
				if sess = s.rpc.get(id); sess == nil {
					return nil, &rpcError{Code: codeInvalidParams, Message: "Unknown session_id: " + id}
				}
				sess.touch()
			}
		}
		if sess != nil {
			return s.rpcCall(ctx, sess.ep, name, args)
		}
		var res any
		err = s.withEnv(ctx, "/mcp", func(ctx context.Context, env Env) error {
			var err error
			res, err = s.rpcCall(ctx, &toolEpisode{env: env}, name, args)
			return err
		})
		return res, err
	}
	return nil, &rpcError{Code: codeMethodNotFound, Message: "Method not found: " + req.Method}
}

// rpcCall runs a tool call for OpenEnv's dialect: a refusal by the
// binding is a tool error, the environment's own failure an internal
// error.
func (s *Server) rpcCall(ctx context.Context, ep *toolEpisode, name string, args json.RawMessage) (any, error) {
	tc, err := ep.call(ctx, name, args, episode.ResetOptions{})
	if errors.Is(err, errNotObject) {
		return nil, &rpcError{Code: codeInvalidParams, Message: "Invalid params: " + err.Error()}
	}
	if err != nil {
		if r, ok := refusedResult(err); ok {
			s.logRefusedBinding(err)
			return r, nil
		}
		s.log.Error("mcp tool call failed", "tool", name, "err", err)
		return nil, &rpcError{Code: codeInternalError, Message: "the environment failed: " + err.Error()}
	}
	return tc.result(), nil
}

// logRefusedBinding logs a reset the binding refused for want of a
// readable bind file.
func (s *Server) logRefusedBinding(err error) {
	if errors.Is(err, bind.ErrUnbound) || errors.Is(err, bind.ErrBadFile) {
		s.logUnbound(err)
	}
}

func stringParam(p map[string]json.RawMessage, key string, required bool) (string, error) {
	v, ok := p[key]
	var s string
	if !ok || jsonKind(v) != 's' || json.Unmarshal(v, &s) != nil || s == "" {
		if required || ok && jsonKind(v) != 'n' {
			return "", &rpcError{Code: codeInvalidParams, Message: fmt.Sprintf("Invalid params - '%s' is required", key)}
		}
		return "", nil
	}
	return s, nil
}

// createRPCSession makes an HTTP session (openenv/session/create): a
// slot, an environment, and, when the params hold reset kwargs (task_id,
// seed, episode_id), the episode reset to them at once, so a session
// asking for another task than the bound one is refused here.
func (s *Server) createRPCSession(ctx context.Context, params map[string]json.RawMessage) (any, error) {
	obj := object{fields: map[string]json.RawMessage{}}
	for _, k := range []string{"task_id", "seed", "episode_id"} {
		if v, ok := params[k]; ok {
			obj.keys, obj.fields[k] = append(obj.keys, k), v
		}
	}
	opts, err := resetKwargs(obj)
	if err != nil {
		return nil, &rpcError{Code: codeInvalidParams, Message: "Invalid params: " + err.Error()}
	}
	held, err := s.holdEnv("/mcp", true)
	if err != nil {
		return nil, err
	}
	env := held.env
	sess := &rpcSession{id: newSessionID(), ep: &toolEpisode{env: env}, release: held.release}
	if len(obj.keys) > 0 {
		s.activity()
		if _, err := env.Reset(ctx, opts); err != nil {
			sess.release()
			if msg, ok := bindingMessage(err); ok {
				s.logRefusedBinding(err)
				return nil, &rpcError{Code: codeInvalidParams, Message: msg}
			}
			if errors.Is(err, tasks.ErrUnknownTask) {
				return nil, &rpcError{Code: codeInvalidParams, Message: fmt.Sprintf("unknown task_id %q", opts.TaskID)}
			}
			return nil, &rpcError{Code: codeInternalError, Message: err.Error()}
		}
		sess.ep.markStarted()
	}
	if d := s.cfg.IdleTimeout; d > 0 {
		sess.idleFor = d
		sess.timer = time.AfterFunc(d, func() {
			if s.rpc.remove(sess.id) != nil {
				s.closeRPCSession(sess, reasonIdle)
			}
		})
	}
	// Shutdown closes it too.
	context.AfterFunc(held.ctx, func() {
		if s.rpc.remove(sess.id) != nil {
			s.closeRPCSession(sess, reasonShutdown)
		}
	})
	s.rpc.add(sess)
	s.log.Info("mcp session start", "route", "/mcp", "active", held.active)
	return map[string]string{"session_id": sess.id}, nil
}

// touch restarts an HTTP session's idle clock.
func (sess *rpcSession) touch() {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.timer != nil && !sess.closed {
		sess.timer.Reset(sess.idleFor)
	}
}

// close ends an HTTP session once: its environment closed, its slot
// freed; the reason goes to the log.
func (s *Server) closeRPCSession(sess *rpcSession, reason string) {
	sess.mu.Lock()
	if sess.closed {
		sess.mu.Unlock()
		return
	}
	sess.closed = true
	if sess.timer != nil {
		sess.timer.Stop()
	}
	sess.mu.Unlock()
	sess.ep.mu.Lock() // a call in flight finishes first
	defer sess.ep.mu.Unlock()
	sess.release()
	s.log.Info("mcp session end", "route", "/mcp", "reason", reason)
}

// withEnv builds a fresh environment for one call (an HTTP call's: it
// counts against MaxHTTPEnvs), runs fn and closes it.
func (s *Server) withEnv(ctx context.Context, route string, fn func(ctx context.Context, env Env) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done, err := s.track(cancel)
	if err != nil {
		return &rpcError{Code: codeServerError, Message: "the server is shutting down"}
	}
	defer done()
	select {
	case s.httpSem <- struct{}{}:
		defer func() { <-s.httpSem }()
	case <-ctx.Done():
		return &rpcError{Code: codeServerError, Message: "the server is shutting down"}
	}
	env, err := s.cfg.Factory()
	if err != nil {
		s.log.Error("environment factory failed", "route", route, "err", err)
		return factoryError(s.cfg.FactoryName)
	}
	oneEpisode(env)
	oneCall(env)
	defer func() {
		if err := env.Close(); err != nil {
			s.log.Error("close environment", "route", route, "err", err)
		}
	}()
	return fn(ctx, env)
}

// handleMCPWS serves OpenEnv's WebSocket /mcp: one environment per
// connection, one JSON-RPC request per text frame, one response frame
// each.
func (s *Server) handleMCPWS(w http.ResponseWriter, r *http.Request) {
	ws, ok := s.acceptWS(w, r, func() {})
	if !ok {
		return
	}
	defer ws.end()
	c, ctx, frames := ws.c, ws.ctx, ws.frames
	release, active, ok := s.reserve()
	if !ok {
		s.refuseSession(ctx, c, frames, rpcResponse{Err: capacityError(active, s.cfg.MaxSessions)})
		return
	}
	defer release()
	env, err := s.cfg.Factory()
	if err != nil {
		s.log.Error("mcp session refused: environment factory failed", "err", err)
		s.refuseSession(ctx, c, frames, rpcResponse{Err: factoryError(s.cfg.FactoryName)})
		return
	}
	oneEpisode(env)
	defer func() {
		if err := env.Close(); err != nil {
			s.log.Error("close environment", "route", "/mcp", "err", err)
		}
	}()
	own := &rpcSession{id: newSessionID(), ep: &toolEpisode{env: env}}
	var idle <-chan time.Time
	var timer *time.Timer
	if d := s.cfg.IdleTimeout; d > 0 {
		timer = time.NewTimer(d)
		defer timer.Stop()
		idle = timer.C
	}
	for {
		select {
		case <-ctx.Done():
			c.Close(websocket.StatusGoingAway, reasonShutdown)
			return
		case <-idle:
			c.Close(websocket.StatusNormalClosure, reasonIdle)
			return
		case f := <-frames:
			if f.err != nil {
				return
			}
			var resp rpcResponse
			if f.typ != websocket.MessageText {
				resp = rpcResponse{Err: &rpcError{Code: codeParseError, Message: "Parse error: send JSON text frames"}}
			} else if req, rerr := decodeRPC(f.data); rerr != nil {
				resp = rpcResponse{ID: req.ID, Err: rerr}
			} else {
				resp = s.handleRPC(ctx, req, own)
			}
			if err := writeFrame(ctx, c, resp); err != nil {
				return
			}
			if timer != nil {
				timer.Reset(s.cfg.IdleTimeout)
			}
		}
	}
}
