// Package client is a Go client of the workbench's OpenEnv protocol (see
// package server and docs/openenv-protocol.md): one episode session is one
// WebSocket on /ws, where each reset, step or state frame gets exactly one
// reply, an error reply is a *ServerError, and a close frame ends it.
//
// It reaches a server at an http(s):// or ws(s):// URL (OpenEnv's
// convert_to_ws_url: the scheme becomes ws or wss and /ws is appended
// unless the path ends in it), or on a unix socket given as unix:///path
// or as a path (a workspace's /run/workbench/wb.sock is bound on the host
// at its run directory; agentpen ls --json shows it). It never uses a
// proxy, and it sends no Origin header, as OpenEnv's clients do not.
//
// workbench client (cmd/workbench) is built on it; it is what a person
// uses to play an episode by hand. The repository's tests speak to the
// workbench, the launcher's proxy and the benchmarks' servers through it
// too; Conn and Receive are there for the frames a client never sends
// (a server's tests of malformed frames, pings and close codes).
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentpen/agentpen/workbench/episode"
	"github.com/coder/websocket"
)

// MaxReplyBytes bounds one reply, as OpenEnv's client bounds it (100 MiB).
const MaxReplyBytes = 100 << 20

// DefaultTimeout bounds one request and its reply (OpenEnv's
// message_timeout_s) when the caller's context has no sooner deadline.
const DefaultTimeout = 60 * time.Second

// ErrClosed is returned (wrapped) by a call on a closed session.
var ErrClosed = errors.New("client: session closed")

// ServerError is an error frame: {"type":"error","data":{"message":...,
// "code":...}}. Code is one of server.Code*; Data holds the whole data
// object (VALIDATION_ERROR's "errors" among it).
type ServerError struct {
	Code    string
	Message string
	Data    map[string]any
}

// Error reads as OpenEnv's client's RuntimeError.
func (e *ServerError) Error() string {
	return fmt.Sprintf("server error: %s (code: %s)", e.Message, e.Code)
}

// Result is one observation reply: the observation, and the reward, done
// flag and metadata carried beside it. Raw is its data as received.
type Result struct {
	Observation episode.Observation
	Reward      float64
	Done        bool
	Metadata    map[string]any
	Raw         json.RawMessage
}

// ResetOptions are a reset's keyword arguments; empty fields are not sent
// (the server then picks: seed 0, a fresh episode id, a task by seed).
type ResetOptions struct {
	TaskID    string
	Seed      *int64
	EpisodeID string
}

// Session is one episode session. Its methods must not be called
// concurrently: the protocol correlates a reply with its request by
// order alone.
type Session struct {
	conn    *websocket.Conn
	timeout time.Duration
	closed  bool
}

// Target is where Dial connects: the WebSocket URL and, for a unix socket,
// the socket's path.
type Target struct {
	URL    string
	Socket string
}

// ParseTarget reads a server address: http(s)://host[:port][/prefix],
// ws(s)://..., unix:///abs/path, or a path to a unix socket (absolute, or
// starting with ./ or ../).
func ParseTarget(s string) (Target, error) {
	switch {
	case s == "":
		return Target{}, errors.New("no server given: want an http(s):// or ws(s):// URL, or a unix socket path")
	case strings.HasPrefix(s, "unix://"):
		p := strings.TrimPrefix(s, "unix://")
		if !filepath.IsAbs(p) {
			return Target{}, fmt.Errorf("%q: want unix:///absolute/path", s)
		}
		return Target{URL: "ws://workbench/ws", Socket: filepath.Clean(p)}, nil
	case strings.HasPrefix(s, "/"), strings.HasPrefix(s, "./"), strings.HasPrefix(s, "../"):
		return Target{URL: "ws://workbench/ws", Socket: filepath.Clean(s)}, nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return Target{}, fmt.Errorf("%q: %w", s, err)
	}
	switch u.Scheme {
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	case "ws", "wss":
	default:
		return Target{}, fmt.Errorf("%q: want an http, https, ws or wss URL, or a unix socket path", s)
	}
	if u.Host == "" {
		return Target{}, fmt.Errorf("%q: no host", s)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	if !strings.HasSuffix(u.Path, "/ws") {
		u.Path += "/ws"
	}
	return Target{URL: u.String()}, nil
}

// Dial opens one episode session at target (see ParseTarget).
func Dial(ctx context.Context, target string) (*Session, error) {
	t, err := ParseTarget(target)
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{Proxy: nil}
	if t.Socket != "" {
		var d net.Dialer
		sock := t.Socket
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", sock)
		}
	}
	hc := &http.Client{Transport: tr}
	conn, resp, err := websocket.Dial(ctx, t.URL, &websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("connect to %s: HTTP %s", target, resp.Status)
		}
		return nil, fmt.Errorf("connect to %s: %w", target, unwrapDial(err))
	}
	conn.SetReadLimit(MaxReplyBytes)
	return &Session{conn: conn, timeout: DefaultTimeout}, nil
}

// unwrapDial drops the wrapping a failed WebSocket dial adds around the
// system's reason ("failed to WebSocket dial: failed to send handshake
// request: Get ...: dial unix ...: connect: no such file or directory").
func unwrapDial(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		var se *os.SyscallError
		if errors.As(op.Err, &se) {
			return se.Err
		}
		return op.Err
	}
	return err
}

// Reset starts an episode.
func (s *Session) Reset(ctx context.Context, opts ResetOptions) (*Result, error) {
	data := map[string]any{}
	if opts.TaskID != "" {
		data["task_id"] = opts.TaskID
	}
	if opts.Seed != nil {
		data["seed"] = *opts.Seed
	}
	if opts.EpisodeID != "" {
		data["episode_id"] = opts.EpisodeID
	}
	return s.observe(ctx, map[string]any{"type": "reset", "data": data})
}

// Step calls one tool with its arguments (a JSON object; nil is {}).
func (s *Session) Step(ctx context.Context, tool string, args json.RawMessage) (*Result, error) {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	return s.observe(ctx, map[string]any{"type": "step", "data": map[string]any{"tool": tool, "args": args}})
}

// State returns the episode's state.
func (s *Session) State(ctx context.Context) (episode.State, error) {
	var st struct {
		EpisodeID *string `json:"episode_id"`
		StepCount int     `json:"step_count"`
	}
	raw, err := s.call(ctx, map[string]any{"type": "state"}, "state")
	if err != nil {
		return episode.State{}, err
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return episode.State{}, fmt.Errorf("state reply: %w", err)
	}
	out := episode.State{StepCount: st.StepCount}
	if st.EpisodeID != nil {
		out.EpisodeID = *st.EpisodeID
	}
	return out, nil
}

// Close ends the session: a close frame (no reply), then the WebSocket
// close handshake. A second call returns ErrClosed.
func (s *Session) Close() error {
	if s.closed {
		return ErrClosed
	}
	s.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	werr := s.conn.Write(ctx, websocket.MessageText, []byte(`{"type":"close"}`))
	cerr := s.conn.Close(websocket.StatusNormalClosure, "")
	if werr != nil {
		s.conn.CloseNow()
		return werr
	}
	var ce websocket.CloseError
	if cerr != nil && !(errors.As(cerr, &ce) && ce.Code == websocket.StatusNormalClosure) {
		return cerr
	}
	return nil
}

func (s *Session) observe(ctx context.Context, msg any) (*Result, error) {
	raw, err := s.call(ctx, msg, "observation")
	if err != nil {
		return nil, err
	}
	var env struct {
		Observation episode.Observation `json:"observation"`
		Reward      *float64            `json:"reward"`
		Done        bool                `json:"done"`
		Metadata    map[string]any      `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return nil, fmt.Errorf("observation reply: %w", err)
	}
	r := &Result{Observation: env.Observation, Done: env.Done, Metadata: env.Metadata, Raw: raw}
	if env.Reward != nil {
		r.Reward = *env.Reward
	}
	return r, nil
}

// Conn returns the session's WebSocket, for frames the calls above never
// send: a server's tests write malformed or binary frames on it, ping
// through it, or read the close code. A frame written on it gets its
// reply read with Receive (or on Conn), or the next call reads that reply
// as its own.
func (s *Session) Conn() *websocket.Conn { return s.conn }

// Receive reads the next reply and returns its data whatever its type (as
// OpenEnv's client does), or a *ServerError for an error frame. An error
// that wraps a websocket.CloseError means the server closed the session;
// websocket.CloseStatus(err) is its code.
func (s *Session) Receive(ctx context.Context) (json.RawMessage, error) {
	if s.closed {
		return nil, ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	_, data, err := s.receive(ctx)
	return data, err
}

// call sends one frame and reads its reply, whose type must be want (or
// error, returned as a *ServerError).
func (s *Session) call(ctx context.Context, msg any, want string) (json.RawMessage, error) {
	if s.closed {
		return nil, ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	b, err := json.Marshal(msg)
	if err != nil {
		return nil, err
	}
	if err := s.conn.Write(ctx, websocket.MessageText, b); err != nil {
		return nil, fmt.Errorf("send: %w", err)
	}
	typ, data, err := s.receive(ctx)
	if err != nil {
		return nil, err
	}
	if typ != want {
		return nil, fmt.Errorf("receive: a %q reply, want %q", typ, want)
	}
	return data, nil
}

// closedError is a read that found the session closed by the server; it
// unwraps to the websocket.CloseError (websocket.CloseStatus reads it).
type closedError struct{ ce websocket.CloseError }

func (e closedError) Error() string {
	return fmt.Sprintf("the server closed the session (%d %s)", e.ce.Code, e.ce.Reason)
}

func (e closedError) Unwrap() error { return e.ce }

// receive reads one reply: its type and data, or a *ServerError.
func (s *Session) receive(ctx context.Context) (string, json.RawMessage, error) {
	typ, b, err := s.conn.Read(ctx)
	if err != nil {
		var ce websocket.CloseError
		if errors.As(err, &ce) {
			return "", nil, closedError{ce}
		}
		return "", nil, fmt.Errorf("receive: %w", err)
	}
	if typ != websocket.MessageText {
		return "", nil, fmt.Errorf("receive: a %v frame, want text", typ)
	}
	var reply struct {
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &reply); err != nil {
		return "", nil, fmt.Errorf("receive: %w", err)
	}
	if reply.Type == "error" {
		se := &ServerError{}
		json.Unmarshal(reply.Data, &se.Data)
		se.Message, _ = se.Data["message"].(string)
		se.Code, _ = se.Data["code"].(string)
		return "", nil, se
	}
	return reply.Type, reply.Data, nil
}
