package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/workbench/client"
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
	// closing, when set, is what every env's Close waits for.
	closing chan struct{}
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
	// one: the server said it plays one episode (OneEpisode); call: that
	// it answers one call (OneCall).
	one, call bool
}

func (e *fakeEnv) closes() int { e.mu.Lock(); defer e.mu.Unlock(); return e.closed }

func (e *fakeEnv) OneEpisode() { e.mu.Lock(); defer e.mu.Unlock(); e.one = true }

func (e *fakeEnv) oneEpisode() bool { e.mu.Lock(); defer e.mu.Unlock(); return e.one }

func (e *fakeEnv) OneCall() { e.mu.Lock(); defer e.mu.Unlock(); e.call = true }

func (e *fakeEnv) oneCall() bool { e.mu.Lock(); defer e.mu.Unlock(); return e.call }

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
	if e.world.closing != nil {
		<-e.world.closing
	}
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

// expectClose reads s's connection until the server closes it, and
// returns the close code and reason.
func expectClose(t *testing.T, ctx context.Context, s *client.Session) (websocket.StatusCode, string) {
	t.Helper()
	for {
		_, b, err := s.Conn().Read(ctx)
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

// codeOf is the code of an error frame, "" for any other error.
func codeOf(err error) string {
	var se *client.ServerError
	if errors.As(err, &se) {
		return se.Code
	}
	return ""
}

// roundTrip writes msg on s's WebSocket as it is and reads its reply,
// for frames the client's calls never send (a step in MCP's dialect).
func roundTrip(ctx context.Context, s *client.Session, msg any) (json.RawMessage, error) {
	b, err := json.Marshal(msg)
	if err != nil {
		return nil, err
	}
	if err := s.Conn().Write(ctx, websocket.MessageText, b); err != nil {
		return nil, err
	}
	return s.Receive(ctx)
}
