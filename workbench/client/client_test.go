package client

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/workbench/episode"
	"github.com/agentpen/agentpen/workbench/server"
	"github.com/coder/websocket"
)

func TestParseTarget(t *testing.T) {
	for _, tt := range []struct {
		name, in       string
		url, sock, err string
	}{
		{name: "http", in: "http://127.0.0.1:8000", url: "ws://127.0.0.1:8000/ws"},
		{name: "http_slash", in: "http://h:1/", url: "ws://h:1/ws"},
		{name: "https_prefix", in: "https://h/env/", url: "wss://h/env/ws"},
		{name: "ws_with_path", in: "ws://h:1/ws", url: "ws://h:1/ws"},
		{name: "wss", in: "wss://h", url: "wss://h/ws"},
		{name: "unix_url", in: "unix:///run/workbench/wb.sock", url: "ws://workbench/ws", sock: "/run/workbench/wb.sock"},
		{name: "path", in: "/run/user/1001/agentpen/i-1/a/wb.sock", url: "ws://workbench/ws", sock: "/run/user/1001/agentpen/i-1/a/wb.sock"},
		{name: "relative_path", in: "./wb.sock", url: "ws://workbench/ws", sock: "wb.sock"},
		{name: "empty", in: "", err: "no server given: want an http(s):// or ws(s):// URL, or a unix socket path"},
		{name: "ftp", in: "ftp://h", err: `"ftp://h": want an http, https, ws or wss URL, or a unix socket path`},
		{name: "bare_host", in: "localhost:8000", err: `"localhost:8000": want an http, https, ws or wss URL, or a unix socket path`},
		{name: "unix_relative", in: "unix://run/wb.sock", err: `"unix://run/wb.sock": want unix:///absolute/path`},
		{name: "no_host", in: "http:///ws", err: `"http:///ws": no host`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTarget(tt.in)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("ParseTarget(%q) = %+v, %v; want error %q", tt.in, got, err, tt.err)
				}
				return
			}
			if err != nil || got.URL != tt.url || got.Socket != tt.sock {
				t.Fatalf("ParseTarget(%q) = %+v, %v; want %s %s", tt.in, got, err, tt.url, tt.sock)
			}
		})
	}
}

// echoEnv is a tiny environment: "echo" returns its args as output,
// "submit" ends the episode with reward 1 when the answer is "42", "boom"
// fails (an EXECUTION_ERROR).
type echoEnv struct {
	task  string
	steps int
}

func (e *echoEnv) Reset(_ context.Context, o episode.ResetOptions) (episode.Observation, error) {
	if o.TaskID == "nope/nope" {
		return episode.Observation{}, errors.New("task id \"nope/nope\": unknown task")
	}
	e.task, e.steps = o.TaskID, 0
	return episode.Observation{Task: "solve " + o.TaskID, Tools: "echo, submit, boom", StepsLeft: 3, Metadata: map[string]any{"task_id": o.TaskID}}, nil
}

func (e *echoEnv) Step(_ context.Context, a episode.Action) (episode.Observation, error) {
	e.steps++
	switch a.Tool {
	case "echo":
		b, _ := json.Marshal(a.Args)
		return episode.Observation{Output: string(b), StepsLeft: 3 - e.steps}, nil
	case "submit":
		o := episode.Observation{Output: "submitted", StepsLeft: 3 - e.steps, Done: true}
		if string(a.Args["answer"]) == `"42"` {
			o.Reward = 1
		}
		return o, nil
	case "boom":
		return episode.Observation{}, errors.New("boom")
	}
	return episode.Observation{Error: "unknown tool " + a.Tool, StepsLeft: 3 - e.steps}, nil
}

func (e *echoEnv) State() episode.State { return episode.State{EpisodeID: "ep-1", StepCount: e.steps} }
func (e *echoEnv) Close() error         { return nil }

func newServer(t *testing.T) *server.Server {
	t.Helper()
	srv, err := server.New(server.Config{Factory: func() (server.Env, error) { return &echoEnv{}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// serveUnix serves srv on a unix socket until the test ends.
func serveUnix(t *testing.T, srv *server.Server) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "run", "wb.sock")
	ln, err := server.Listen(t.Context(), "unix://"+sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	return sock
}

// TestSession: reset, step, state, an error frame and close, over HTTP and
// a unix socket.
func TestSession(t *testing.T) {
	srv := newServer(t)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	sock := serveUnix(t, srv)
	for name, target := range map[string]string{"http": hs.URL, "unix_path": sock, "unix_url": "unix://" + sock} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			s, err := Dial(ctx, target)
			if err != nil {
				t.Fatal(err)
			}
			r, err := s.Reset(ctx, ResetOptions{TaskID: "x/y@1"})
			if err != nil || r.Observation.Task != "solve x/y@1" || r.Metadata["task_id"] != "x/y@1" || r.Done {
				t.Fatalf("reset: %+v %v", r, err)
			}
			r, err = s.Step(ctx, "echo", json.RawMessage(`{"a": [1, 2.5]}`))
			if err != nil || r.Observation.Output != `{"a":[1,2.5]}` || r.Observation.StepsLeft != 2 {
				t.Fatalf("echo: %+v %v", r, err)
			}
			_, err = s.Step(ctx, "boom", nil)
			var se *ServerError
			if !errors.As(err, &se) || se.Code != server.CodeExecutionError || err.Error() != "server error: boom (code: EXECUTION_ERROR)" {
				t.Fatalf("boom: %v", err)
			}
			_, err = s.Step(ctx, "echo", json.RawMessage(`[1]`))
			if !errors.As(err, &se) || se.Code != server.CodeValidationError || se.Data["errors"] == nil {
				t.Fatalf("args not an object: %v", err)
			}
			st, err := s.State(ctx)
			if err != nil || st.EpisodeID != "ep-1" || st.StepCount != 2 {
				t.Fatalf("state: %+v %v", st, err)
			}
			r, err = s.Step(ctx, "submit", json.RawMessage(`{"answer": "42"}`))
			if err != nil || !r.Done || r.Reward != 1 || !strings.Contains(string(r.Raw), `"reward":1.0`) {
				t.Fatalf("submit: %+v %v", r, err)
			}
			if err := s.Close(); err != nil {
				t.Fatalf("close: %v", err)
			}
			if _, err := s.State(ctx); !errors.Is(err, ErrClosed) || !errors.Is(s.Close(), ErrClosed) {
				t.Fatalf("after close: %v", err)
			}
		})
	}
}

// TestDialErrors: a socket nobody serves, and a URL that is no WebSocket
// server, are named once with the reason.
func TestDialErrors(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	_, err := Dial(t.Context(), sock)
	if want := "connect to " + sock + ": no such file or directory"; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = Dial(t.Context(), "http://"+addr)
	if want := "connect to http://" + addr + ": connection refused"; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
	hs := httptest.NewServer(nil) // 404 everywhere
	t.Cleanup(hs.Close)
	_, err = Dial(t.Context(), hs.URL)
	if want := "connect to " + hs.URL + ": HTTP 404 Not Found"; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
}

// TestConnAndReceive: a frame written on Conn gets its reply from Receive
// (data whatever its type, or a *ServerError), and a session the server
// closes reads as an error whose close code websocket.CloseStatus finds.
func TestConnAndReceive(t *testing.T) {
	hs := httptest.NewServer(newServer(t).Handler())
	t.Cleanup(hs.Close)
	ctx := t.Context()
	s, err := Dial(ctx, hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Conn().CloseNow()
	if err := s.Conn().Write(ctx, websocket.MessageText, []byte(`{"type":`)); err != nil {
		t.Fatal(err)
	}
	_, err = s.Receive(ctx)
	var se *ServerError
	if !errors.As(err, &se) || se.Code != server.CodeInvalidJSON {
		t.Fatalf("malformed frame: %v, want an INVALID_JSON error frame", err)
	}
	if err := s.Conn().Write(ctx, websocket.MessageText, []byte(`{"type":"state"}`)); err != nil {
		t.Fatal(err)
	}
	data, err := s.Receive(ctx)
	if err != nil || !strings.Contains(string(data), `"step_count":0`) {
		t.Fatalf("state frame: %s %v", data, err)
	}
	// The calls still pair each request with its reply.
	if st, err := s.State(ctx); err != nil || st.EpisodeID != "ep-1" {
		t.Fatalf("state after raw frames: %+v %v", st, err)
	}
	if err := s.Conn().Write(ctx, websocket.MessageBinary, []byte(`{"type":"state"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Receive(ctx); !errors.As(err, &se) || se.Code != server.CodeSessionError {
		t.Fatalf("binary frame: %v, want SESSION_ERROR", err)
	}
	_, err = s.Receive(ctx)
	if websocket.CloseStatus(err) != websocket.StatusNormalClosure || !strings.HasPrefix(err.Error(), "the server closed the session (1000") {
		t.Fatalf("after SESSION_ERROR: %v, want the server's close 1000", err)
	}
}
