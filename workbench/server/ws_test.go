package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentpen/agentpen/internal/testkit/fakeclock"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/internal/testkit/workbenchtest"
	"github.com/agentpen/agentpen/workbench/client"
	"github.com/coder/websocket"
)

// TestWSProtocol walks one session through every frame type and every
// error that keeps the connection open, then closes it as EnvClient does.
func TestWSProtocol(t *testing.T) {
	t.Parallel()
	w := newFakeWorld()
	_, ts := startServer(t, w, nil)
	ctx := testenv.Context(t)
	c := workbenchtest.Dial(t, ctx, ts.URL)

	// Frames that are answered with an error and leave the session open.
	errorFrames := []struct {
		name, frame, code, msgPrefix string
	}{
		{"invalid_json", `{"type":`, CodeInvalidJSON, "Invalid JSON: "},
		{"missing_type", `{"data":{}}`, CodeUnknownType, "Unknown message type: "},
		{"unknown_type", `{"type":"teleport"}`, CodeUnknownType, "Unknown message type: teleport"},
		{"type_not_string", `{"type":5}`, CodeUnknownType, "Unknown message type: 5"},
		{"state_with_data", `{"type":"state","data":{}}`, CodeValidationError, "Invalid message"},
		{"close_with_extra", `{"type":"close","id":1}`, CodeValidationError, "Invalid message"},
		{"step_without_data", `{"type":"step"}`, CodeValidationError, "Invalid message"},
		{"step_data_not_object", `{"type":"step","data":[1]}`, CodeValidationError, "Invalid message"},
		{"reset_data_not_object", `{"type":"reset","data":"x"}`, CodeValidationError, "Invalid message"},
		{"step_extra_action_key", `{"type":"step","data":{"tool":"echo","bogus":1}}`, CodeValidationError, "Invalid message"},
		{"step_missing_tool", `{"type":"step","data":{"args":{}}}`, CodeValidationError, "Invalid message"},
		{"step_env_error", `{"type":"step","data":{"tool":"boom"}}`, CodeExecutionError, "boom: the tool broke"},
		{"reset_unknown_task", `{"type":"reset","data":{"task_id":"nope/nope"}}`, CodeExecutionError, "task id \"nope/nope\": unknown task"},
		{"reset_seed_not_int", `{"type":"reset","data":{"seed":"x"}}`, CodeExecutionError, "seed must be an integer"},
	}
	for _, tt := range errorFrames {
		if err := c.Conn().Write(ctx, websocket.MessageText, []byte(tt.frame)); err != nil {
			t.Fatalf("%s: write: %v", tt.name, err)
		}
		_, err := c.Receive(ctx)
		se, ok := err.(*client.ServerError)
		if !ok {
			t.Fatalf("%s: got %v, want an error frame", tt.name, err)
		}
		if se.Code != tt.code || !strings.HasPrefix(se.Message, tt.msgPrefix) {
			t.Errorf("%s: got %s %q, want %s %q…", tt.name, se.Code, se.Message, tt.code, tt.msgPrefix)
		}
		if tt.code == CodeValidationError {
			errs, _ := se.Data["errors"].([]any)
			if len(errs) == 0 {
				t.Errorf("%s: VALIDATION_ERROR without errors: %v", tt.name, se.Data)
			}
		}
	}
	// The exact shape of one VALIDATION_ERROR.
	c.Conn().Write(ctx, websocket.MessageText, []byte(`{"type":"step","data":{"tool":"echo","bogus":1}}`))
	_, b, err := c.Conn().Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, string(b), `{"type":"error","data":{"message":"Invalid message","code":"VALIDATION_ERROR","errors":[{"type":"extra_forbidden","loc":["bogus"],"msg":"Extra inputs are not permitted","input":1,"url":"https://errors.pydantic.dev/2.13/v/extra_forbidden"}]}}`)

	// The session still works; the kwargs reach the environment (an
	// unknown one is ignored, so the frame is written as it is).
	c.Conn().Write(ctx, websocket.MessageText, []byte(`{"type":"reset","data":{"seed":-3,"episode_id":"ep-ws","task_id":"data/csv_region_total","ignored":true}}`))
	raw, err := c.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, string(raw), `{"observation":{"task":"solve data/csv_region_total","tools":"echo, submit","output":"workspace of ep-ws","error":"","steps_left":5},"reward":0.0,"done":false,"metadata":{"task_id":"data/csv_region_total","domain":"fake"}}`)
	resets := w.lastResets()
	last := resets[len(resets)-1]
	if last.Seed == nil || *last.Seed != -3 || last.EpisodeID != "ep-ws" || last.TaskID != "data/csv_region_total" {
		t.Errorf("reset options %+v, want seed -3 (unvalidated over WS), episode ep-ws, task data/csv_region_total", last)
	}
	st, err := c.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.EpisodeID != "ep-ws" || st.StepCount != 0 {
		t.Errorf("state %+v, want ep-ws at step 0", st)
	}
	res, err := c.Step(ctx, "echo", workbenchtest.Args(map[string]any{"x": "y"}))
	if err != nil || res.Observation.Output != `{"x":"y"}` || res.Done {
		t.Fatalf("step: %+v, %v", res, err)
	}
	res, err = c.Step(ctx, "submit", workbenchtest.Args(map[string]any{"answer": "ep-ws"}))
	if err != nil || !res.Done || res.Reward != 1.0 || !strings.Contains(string(res.Raw), `"reward":1.0`) {
		t.Fatalf("submit: %s, %v", res.Raw, err)
	}
	var sent struct {
		Observation map[string]any `json:"observation"`
	}
	if err := json.Unmarshal(res.Raw, &sent); err != nil || sent.Observation == nil {
		t.Fatalf("submit's reply: %s, %v", res.Raw, err)
	}
	if _, ok := sent.Observation["metadata"]; ok {
		t.Errorf("metadata inside observation: %s", res.Raw)
	}
	st, _ = c.State(ctx)
	if st.StepCount != 2 {
		t.Errorf("state after 2 steps: %+v", st)
	}
	// close: no reply, close 1000, the environment closed.
	c.Conn().Write(ctx, websocket.MessageText, []byte(`{"type":"close"}`))
	if code, _ := expectClose(t, ctx, c); code != websocket.StatusNormalClosure {
		t.Errorf("close code %d, want 1000", code)
	}
}

// TestWSSessionErrors: errors outside per-message handling end the session
// with SESSION_ERROR and close 1000.
func TestWSSessionErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		typ   websocket.MessageType
		frame string
	}{
		{"binary_frame", websocket.MessageBinary, `{"type":"state"}`},
		{"json_array", websocket.MessageText, `[1,2]`},
		{"json_string", websocket.MessageText, `"reset"`},
	}
	w := newFakeWorld()
	s, ts := startServer(t, w, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testenv.Context(t)
			c := workbenchtest.Dial(t, ctx, ts.URL)
			if err := c.Conn().Write(ctx, tt.typ, []byte(tt.frame)); err != nil {
				t.Fatal(err)
			}
			_, err := c.Receive(ctx)
			if codeOf(err) != CodeSessionError {
				t.Fatalf("got %v, want SESSION_ERROR", err)
			}
			if code, _ := expectClose(t, ctx, c); code != websocket.StatusNormalClosure {
				t.Errorf("close %d, want 1000", code)
			}
		})
	}
	testenv.WaitFor(t, "slots freed", func() bool { return s.ActiveSessions() == 0 })
}

func TestWSFactoryError(t *testing.T) {
	t.Parallel()
	w := newFakeWorld()
	w.fail = true
	s, ts := startServer(t, w, nil)
	ctx := testenv.Context(t)
	c := workbenchtest.Dial(t, ctx, ts.URL)
	_, err := c.Reset(ctx, client.ResetOptions{})
	se, ok := err.(*client.ServerError)
	if !ok || se.Code != CodeFactoryError || se.Message != "Environment factory 'FakeEnv' failed to create instance." || se.Data["factory_name"] != "FakeEnv" {
		t.Fatalf("got %v (%+v), want FACTORY_ERROR naming FakeEnv", err, se)
	}
	if code, _ := expectClose(t, ctx, c); code != websocket.StatusNormalClosure {
		t.Errorf("close %d, want 1000", code)
	}
	testenv.WaitFor(t, "slot freed", func() bool { return s.ActiveSessions() == 0 })
}

// TestWSCapacity: with N sessions open, connection N+1 reliably reads
// CAPACITY_REACHED as the reply to its first frame, every time, then gets
// close 1000; closing a session frees its slot.
func TestWSCapacity(t *testing.T) {
	t.Parallel()
	const n = 3
	w := newFakeWorld()
	s, ts := startServer(t, w, func(c *Config) { c.MaxSessions = n })
	ctx := testenv.Context(t)
	var open []*client.Session
	for i := range n {
		c := workbenchtest.Dial(t, ctx, ts.URL)
		if _, err := c.Reset(ctx, client.ResetOptions{EpisodeID: fmt.Sprint("cap-", i)}); err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
		open = append(open, c)
	}
	for try := range 20 {
		extra := workbenchtest.Dial(t, ctx, ts.URL)
		_, err := extra.Reset(ctx, client.ResetOptions{})
		se, ok := err.(*client.ServerError)
		if !ok || se.Code != CodeCapacityReached {
			t.Fatalf("try %d: got %v, want CAPACITY_REACHED", try, err)
		}
		want := fmt.Sprintf("Server at capacity: %d/%d sessions active. Cannot accept new connections.", n, n)
		if se.Message != want || se.Data["active_sessions"] != float64(n) || se.Data["max_sessions"] != float64(n) {
			t.Fatalf("try %d: got %+v, want %q with active_sessions and max_sessions %d", try, se, want, n)
		}
		if code, _ := expectClose(t, ctx, extra); code != websocket.StatusNormalClosure {
			t.Fatalf("try %d: close %d, want 1000", try, code)
		}
	}
	if got := w.built(); got != n {
		t.Errorf("%d environments built, want %d: a refused session built one", got, n)
	}
	open[0].Close()
	testenv.WaitFor(t, "slot freed", func() bool { return s.ActiveSessions() == n-1 })
	again := workbenchtest.Dial(t, ctx, ts.URL)
	if _, err := again.Reset(ctx, client.ResetOptions{}); err != nil {
		t.Fatalf("after a slot was freed: %v", err)
	}
}

// TestWSIdleReaping: a session with no reset or step for IdleTimeout is
// closed, socket included, and its slot and environment released; state
// frames do not keep it alive. A half-open client that never speaks is
// reaped the same way. The sessions' idle timers run on a fake clock the
// test advances: the timeout is exact, however slowly the machine runs.
func TestWSIdleReaping(t *testing.T) {
	t.Parallel()
	const idle = 2 * time.Minute // on the fake clock
	w := newFakeWorld()
	clk := fakeclock.New()
	s, ts := startServer(t, w, func(c *Config) { c.IdleTimeout = idle; c.MaxSessions = 2 }, clk)
	ctx := testenv.Context(t)
	talker := workbenchtest.Dial(t, ctx, ts.URL)
	if _, err := talker.Reset(ctx, client.ResetOptions{}); err != nil {
		t.Fatal(err)
	}
	silent := workbenchtest.Dial(t, ctx, ts.URL) // never sends a frame
	// The talker's timer was re-armed before its reset was answered; the
	// silent session's is armed when its session begins.
	testenv.WaitFor(t, "the silent session's idle timer", func() bool { return clk.Pending() == 2 })
	if n := clk.Advance(idle - time.Nanosecond); n != 0 {
		t.Fatalf("%d sessions reaped before IdleTimeout", n)
	}
	if _, err := talker.State(ctx); err != nil { // answered, and not activity
		t.Fatal(err)
	}
	if n := clk.Advance(time.Nanosecond); n != 2 {
		t.Fatalf("%d sessions reaped at IdleTimeout, want both (a state frame restarted the clock)", n)
	}
	for _, c := range []*client.Session{talker, silent} {
		code, reason := expectClose(t, ctx, c)
		if code != websocket.StatusNormalClosure || reason != reasonIdle {
			t.Errorf("close %d %q, want 1000 %q", code, reason, reasonIdle)
		}
	}
	testenv.WaitFor(t, "slots freed", func() bool { return s.ActiveSessions() == 0 })
	w.mu.Lock()
	for _, e := range w.envs {
		if e.closes() != 1 {
			t.Errorf("env %d not closed after reaping", e.n)
		}
	}
	w.mu.Unlock()

	// Each step restarts the clock: a session active every IdleTimeout
	// less a nanosecond lives on, and is reaped IdleTimeout after its
	// last step.
	busy := workbenchtest.Dial(t, ctx, ts.URL)
	for i := range 3 {
		if _, err := busy.Step(ctx, "echo", nil); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if n := clk.Advance(idle - time.Nanosecond); n != 0 {
			t.Fatalf("after step %d: an active session was reaped", i)
		}
	}
	if n := clk.Advance(time.Nanosecond); n != 1 {
		t.Fatalf("%d sessions reaped IdleTimeout after the last step, want 1", n)
	}
	if code, reason := expectClose(t, ctx, busy); code != websocket.StatusNormalClosure || reason != reasonIdle {
		t.Errorf("close %d %q, want 1000 %q", code, reason, reasonIdle)
	}
}

// TestWSPingDuringStep: the server answers pings while a step is running.
func TestWSPingDuringStep(t *testing.T) {
	t.Parallel()
	w := newFakeWorld()
	_, ts := startServer(t, w, nil)
	ctx := testenv.Context(t)
	c := workbenchtest.Dial(t, ctx, ts.URL)
	if _, err := c.Reset(ctx, client.ResetOptions{}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var stepErr error
	var res *client.Result
	wg.Go(func() { res, stepErr = c.Step(ctx, "block", nil) })
	<-w.blocked
	err := c.Conn().Ping(ctx)
	close(w.release)
	wg.Wait()
	if err != nil {
		t.Errorf("ping during a step: %v", err)
	}
	if stepErr != nil || res.Observation.Output != "released" {
		t.Errorf("step: %+v %v", res, stepErr)
	}
}

// TestWSLargeFrames: 16 MiB in is accepted; beyond it the session is closed
// with 1009.
func TestWSLargeFrames(t *testing.T) {
	t.Parallel()
	w := newFakeWorld()
	_, ts := startServer(t, w, nil)
	ctx := testenv.Context(t)
	c := workbenchtest.Dial(t, ctx, ts.URL)
	big := strings.Repeat("a", MaxFrameBytes-100)
	res, err := c.Step(ctx, "echo", workbenchtest.Args(map[string]any{"s": big}))
	if err != nil {
		t.Fatal(err)
	}
	if out := res.Observation.Output; len(out) < len(big) {
		t.Errorf("echo of a %d-byte arg came back with %d bytes", len(big), len(out))
	}
	tooBig, _ := json.Marshal(map[string]any{"type": "step", "data": map[string]any{"tool": "echo", "args": map[string]any{"s": big + strings.Repeat("b", 200)}}})
	c.Conn().Write(ctx, websocket.MessageText, tooBig)
	if code, _ := expectClose(t, ctx, c); code != websocket.StatusMessageTooBig {
		t.Errorf("close %d, want 1009", code)
	}
}

// TestWSConcurrentSessionsFake: sessions at capacity, all at once, each
// sees only its own episode (the fake's submit pays only its own id).
func TestWSConcurrentSessionsFake(t *testing.T) {
	t.Parallel()
	w := newFakeWorld()
	_, ts := startServer(t, w, nil)
	ctx := testenv.Context(t)
	var wg sync.WaitGroup
	errs := make(chan error, DefaultMaxSessions)
	for i := range DefaultMaxSessions {
		wg.Go(func() {
			id := fmt.Sprintf("conc-%d", i)
			c, err := client.Dial(ctx, ts.URL)
			if err != nil {
				errs <- err
				return
			}
			defer c.Conn().CloseNow()
			res, err := c.Reset(ctx, client.ResetOptions{EpisodeID: id})
			if err != nil {
				errs <- err
				return
			}
			if res.Observation.Output != "workspace of "+id {
				errs <- fmt.Errorf("session %s saw %v", id, res.Observation.Output)
				return
			}
			for range 5 {
				st, err := c.State(ctx)
				if err != nil || st.EpisodeID != id {
					errs <- fmt.Errorf("session %s state %+v %v", id, st, err)
					return
				}
			}
			res, err = c.Step(ctx, "submit", workbenchtest.Args(map[string]any{"answer": id}))
			if err != nil || res.Reward != 1.0 {
				errs <- fmt.Errorf("session %s submit: %+v %v", id, res, err)
				return
			}
			c.Close()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestEnvPanicReleasesEpisode: a bug that panics in a step (net/http
// recovers it) still closes the session's environment, so its workspace
// and sandbox uid are not leaked, and frees its slot.
func TestEnvPanicReleasesEpisode(t *testing.T) {
	t.Parallel()
	w := newFakeWorld()
	s, ts := startServer(t, w, func(c *Config) { c.MaxSessions = 1 })
	ctx := testenv.Context(t)
	c := workbenchtest.Dial(t, ctx, ts.URL)
	if _, err := c.Reset(ctx, client.ResetOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Step(ctx, "panic", nil); err == nil {
		t.Fatal("a panicking step got a reply")
	}
	testenv.WaitFor(t, "slot freed", func() bool { return s.ActiveSessions() == 0 })
	testenv.WaitFor(t, "environment closed", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.envs[0].closes() == 1
	})
}
