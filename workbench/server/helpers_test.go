package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/agentpen/agentpen/internal/testenv"
	"github.com/agentpen/agentpen/workbench/episode"
	"github.com/agentpen/agentpen/workbench/tasks"
	"github.com/coder/websocket"
)

// fakeWorld builds fakeEnvs and remembers every one, so tests can check that
// each was closed exactly once and see the reset options it got.
type fakeWorld struct {
	mu      sync.Mutex
	envs    []*fakeEnv
	fail    bool          // the factory fails
	release chan struct{} // the "block" tool waits for this
	blocked chan struct{} // a "block" step signals here when it starts
}

func newFakeWorld() *fakeWorld {
	return &fakeWorld{release: make(chan struct{}), blocked: make(chan struct{}, 64)}
}

func (w *fakeWorld) factory() (Env, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fail {
		return nil, errors.New("fake factory: no room")
	}
	e := &fakeEnv{world: w, n: len(w.envs)}
	w.envs = append(w.envs, e)
	return e, nil
}

// checkAllClosed fails the test unless every env built was closed exactly
// once.
func (w *fakeWorld) checkAllClosed(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range w.envs {
		if c := e.closes(); c != 1 {
			t.Errorf("env %d closed %d times, want 1", e.n, c)
		}
	}
}

func (w *fakeWorld) built() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.envs)
}

func (w *fakeWorld) lastResets() []episode.ResetOptions {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []episode.ResetOptions
	for _, e := range w.envs {
		out = append(out, e.resets()...)
	}
	return out
}

// fakeEnv is a tiny environment: reset names a workspace after the episode
// id; "echo" returns its args; "submit" ends with reward 1 when answer is
// the episode id (so a session that saw another's reset fails); "boom"
// errors; "block" waits for the world's release or cancellation.
type fakeEnv struct {
	world *fakeWorld
	n     int

	mu       sync.Mutex
	resetLog []episode.ResetOptions
	episode  string
	task     string
	steps    int
	done     bool
	closed   int
}

func (e *fakeEnv) closes() int { e.mu.Lock(); defer e.mu.Unlock(); return e.closed }

func (e *fakeEnv) resets() []episode.ResetOptions {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]episode.ResetOptions(nil), e.resetLog...)
}

func (e *fakeEnv) Reset(_ context.Context, opts episode.ResetOptions) (episode.Observation, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.resetLog = append(e.resetLog, opts)
	if opts.TaskID == "nope/nope" {
		return episode.Observation{}, fmt.Errorf("task id %q: %w", opts.TaskID, tasks.ErrUnknownTask)
	}
	e.task = opts.TaskID
	if e.task == "" {
		e.task = "fake/default"
	}
	e.episode = opts.EpisodeID
	if e.episode == "" {
		e.episode = fmt.Sprintf("ep-%d", e.n)
	}
	e.steps, e.done = 0, false
	return episode.Observation{
		Task: "solve " + e.task, Tools: "echo, submit", Output: "workspace of " + e.episode, StepsLeft: 5,
		Metadata: map[string]any{"task_id": e.task, "domain": "fake"},
	}, nil
}

func (e *fakeEnv) Step(ctx context.Context, a episode.Action) (episode.Observation, error) {
	e.mu.Lock()
	if e.episode == "" {
		e.mu.Unlock()
		if _, err := e.Reset(ctx, episode.ResetOptions{}); err != nil {
			return episode.Observation{}, err
		}
		e.mu.Lock()
	}
	defer e.mu.Unlock()
	e.steps++
	obs := episode.Observation{StepsLeft: 5 - e.steps, Metadata: map[string]any{"task_id": e.task, "domain": "fake"}}
	switch a.Tool {
	case "echo":
		b, _ := json.Marshal(a.Args)
		obs.Output = string(b)
	case "submit":
		var ans string
		json.Unmarshal(a.Args["answer"], &ans)
		obs.Done = true
		if ans == e.episode {
			obs.Reward = 1
		}
		e.done = true
		obs.Output = "submitted " + ans
	case "boom":
		return episode.Observation{}, errors.New("boom: the tool broke")
	case "panic":
		panic("fake env: a bug in a tool")
	case "block":
		e.mu.Unlock()
		e.world.blocked <- struct{}{}
		var err error
		select {
		case <-e.world.release:
		case <-ctx.Done():
			err = ctx.Err()
		}
		e.mu.Lock()
		if err != nil {
			return episode.Observation{}, fmt.Errorf("block: %w", err)
		}
		obs.Output = "released"
	default:
		obs.Error = "unknown tool " + a.Tool
	}
	return obs, nil
}

func (e *fakeEnv) State() episode.State {
	e.mu.Lock()
	defer e.mu.Unlock()
	return episode.State{EpisodeID: e.episode, StepCount: e.steps}
}

func (e *fakeEnv) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed++
	return nil
}

// startServer serves a Server over httptest and closes both at cleanup,
// checking that every environment was closed. clk, when given, is the
// clock its sessions' idle timers run on.
func startServer(t *testing.T, w *fakeWorld, mutate func(*Config), clk ...clock) (*Server, *httptest.Server) {
	t.Helper()
	cfg := Config{Factory: w.factory, FactoryName: "FakeEnv", Metadata: map[string]any{"name": "AgentWorkbenchEnvironment", "version": "1.0.0"}}
	if mutate != nil {
		mutate(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range clk {
		s.clock = c
	}
	// Behind the server's gate, as Serve puts it.
	ts := httptest.NewUnstartedServer(s.Handler())
	ts.Listener = s.Gate().Listener(ts.Listener)
	ts.Start()
	t.Cleanup(func() {
		ctx, cancel := testenv.CleanupContext(t)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		ts.Close()
		w.checkAllClosed(t)
	})
	return s, ts
}

// serverError is what EnvClient raises on an error frame:
// RuntimeError("Server error: {message} (code: {code})").
type serverError struct {
	Code    string
	Message string
	Data    map[string]any
}

func (e *serverError) Error() string {
	return fmt.Sprintf("Server error: %s (code: %s)", e.Message, e.Code)
}

// envClient follows OpenEnv's EnvClient framing: the base URL turned into
// ws(s)://…/ws, one JSON text frame per call, one reply read per frame,
// {"type":"error"} raised, otherwise data parsed without looking at type.
type envClient struct {
	c *websocket.Conn
}

// stepResult is GenericEnvClient's StepResult plus the top-level metadata.
type stepResult struct {
	Observation map[string]any
	Reward      any
	Done        bool
	Metadata    map[string]any
	Raw         json.RawMessage
}

func wsURL(base string) string {
	switch {
	case strings.HasPrefix(base, "http://"):
		base = "ws://" + strings.TrimPrefix(base, "http://")
	case strings.HasPrefix(base, "https://"):
		base = "wss://" + strings.TrimPrefix(base, "https://")
	case !strings.Contains(base, "://"):
		base = "ws://" + base
	}
	return strings.TrimSuffix(base, "/") + "/ws"
}

func dialEnv(t *testing.T, ctx context.Context, base string) *envClient {
	t.Helper()
	c, _, err := websocket.Dial(ctx, wsURL(base), nil)
	if err != nil {
		t.Fatalf("dial %s: %v", base, err)
	}
	c.SetReadLimit(100 << 20)
	t.Cleanup(func() { c.CloseNow() })
	return &envClient{c: c}
}

func (e *envClient) send(ctx context.Context, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return e.c.Write(ctx, websocket.MessageText, b)
}

// roundTrip sends one frame and reads its reply, raising error frames.
func (e *envClient) roundTrip(ctx context.Context, v any) (json.RawMessage, error) {
	if err := e.send(ctx, v); err != nil {
		return nil, err
	}
	return e.recv(ctx)
}

func (e *envClient) recv(ctx context.Context) (json.RawMessage, error) {
	typ, b, err := e.c.Read(ctx)
	if err != nil {
		return nil, err
	}
	if typ != websocket.MessageText {
		return nil, fmt.Errorf("got a %v frame, want text", typ)
	}
	var msg struct {
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &msg); err != nil {
		return nil, fmt.Errorf("reply %s: %w", b, err)
	}
	if msg.Type == "error" {
		var d map[string]any
		json.Unmarshal(msg.Data, &d)
		se := &serverError{Data: d}
		se.Message, _ = d["message"].(string)
		se.Code, _ = d["code"].(string)
		if se.Code == "" {
			se.Code = "UNKNOWN"
		}
		return nil, se
	}
	return msg.Data, nil
}

func parseResult(raw json.RawMessage) (stepResult, error) {
	var r stepResult
	var payload struct {
		Observation map[string]any `json:"observation"`
		Reward      any            `json:"reward"`
		Done        bool           `json:"done"`
		Metadata    map[string]any `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &payload); err != nil {
		return r, err
	}
	return stepResult{payload.Observation, payload.Reward, payload.Done, payload.Metadata, raw}, nil
}

func (e *envClient) reset(ctx context.Context, kw map[string]any) (stepResult, error) {
	if kw == nil {
		kw = map[string]any{}
	}
	raw, err := e.roundTrip(ctx, map[string]any{"type": "reset", "data": kw})
	if err != nil {
		return stepResult{}, err
	}
	return parseResult(raw)
}

func (e *envClient) step(ctx context.Context, action map[string]any) (stepResult, error) {
	raw, err := e.roundTrip(ctx, map[string]any{"type": "step", "data": action})
	if err != nil {
		return stepResult{}, err
	}
	return parseResult(raw)
}

func (e *envClient) state(ctx context.Context) (map[string]any, error) {
	raw, err := e.roundTrip(ctx, map[string]any{"type": "state"})
	if err != nil {
		return nil, err
	}
	var st map[string]any
	return st, json.Unmarshal(raw, &st)
}

// close is EnvClient.close: a best-effort close frame, then close 1000.
func (e *envClient) close(ctx context.Context) {
	e.send(ctx, map[string]any{"type": "close"})
	e.c.Close(websocket.StatusNormalClosure, "")
}

// expectClose reads until the server closes, and returns the close status
// and reason.
func (e *envClient) expectClose(t *testing.T, ctx context.Context) (websocket.StatusCode, string) {
	t.Helper()
	for {
		_, b, err := e.c.Read(ctx)
		if err != nil {
			var ce websocket.CloseError
			if errors.As(err, &ce) {
				return ce.Code, ce.Reason
			}
			t.Fatalf("read: %v, want a close frame", err)
		}
		t.Logf("frame before close: %s", b)
	}
}

func codeOf(err error) string {
	var se *serverError
	if errors.As(err, &se) {
		return se.Code
	}
	return ""
}
