package launcher

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentpen/agentpen/api"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/workbench/bind"
	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fakeWorkbench is an episode server on a unix socket that records what
// reaches it. Over WebSocket it echoes each message with its type, but
// for a few commands: "BIG" sends an observation of bigObservation bytes,
// "SLOW" echoes after slowReply (the pipelining tests: a frame sent
// behind it most likely reaches the proxy before its answer; one that did
// not would make them pass, never fail), "HOLD" echoes once the test
// releases it (holdHeld says it arrived), "CLOSE" closes with 1000 "idle
// timeout",
// "DIE" drops the connection without a close frame, "PING" pings the
// proxy; a reset frame ({"type":"reset"}) is answered with an observation
// naming the task it asked for, or with OpenEnv's error frame when its
// data holds "fail". Over HTTP it answers {"socket": name, "path": p,
// "body": b}.
type fakeWorkbench struct {
	name   string
	socket string
	srv    *http.Server
	wg     sync.WaitGroup

	mu       sync.Mutex
	messages [][]byte
	types    []websocket.MessageType
	closes   []error
	bodies   []string
	requests atomic.Int64

	// "HOLD" signals holdHeld and answers once holdRelease is closed
	// (or the workbench stops: quit).
	holdHeld, holdRelease, quit chan struct{}
}

// slowReply is how long "SLOW" takes to answer.
const slowReply = 3 * time.Second

// bigObservation is the size of "BIG"'s reply: a 16 MiB observation.
const bigObservation = MaxFrameBytes

func newFakeWorkbench(t *testing.T, dir, name string) *fakeWorkbench {
	t.Helper()
	fw := &fakeWorkbench{name: name, socket: filepath.Join(dir, name+".sock"),
		holdHeld: make(chan struct{}, 1), holdRelease: make(chan struct{}), quit: make(chan struct{})}
	ln, err := net.Listen("unix", fw.socket)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/ws", fw.serveWS)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fw.requests.Add(1)
		b, _ := io.ReadAll(r.Body)
		fw.mu.Lock()
		fw.bodies = append(fw.bodies, string(b))
		fw.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"socket": name, "path": r.URL.Path, "body": string(b)})
	})
	fw.srv = &http.Server{Handler: mux}
	fw.wg.Go(func() { fw.srv.Serve(ln) })
	t.Cleanup(fw.stop)
	return fw
}

// stop closes the listener and every connection, and waits.
func (fw *fakeWorkbench) stop() {
	select {
	case <-fw.quit:
	default:
		close(fw.quit)
	}
	fw.srv.Close()
	fw.wg.Wait()
}

func (fw *fakeWorkbench) serveWS(w http.ResponseWriter, r *http.Request) {
	fw.requests.Add(1)
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	fw.wg.Add(1)
	defer fw.wg.Done()
	defer c.CloseNow()
	c.SetReadLimit(maxObservationBytes)
	ctx := context.Background()
	for {
		typ, msg, err := c.Read(ctx)
		if err != nil {
			fw.mu.Lock()
			fw.closes = append(fw.closes, err)
			fw.mu.Unlock()
			return
		}
		fw.mu.Lock()
		fw.messages = append(fw.messages, msg)
		fw.types = append(fw.types, typ)
		fw.mu.Unlock()
		switch string(msg) {
		case "BIG":
			err = c.Write(ctx, websocket.MessageText, bigPayload(bigObservation))
		case "SLOW":
			time.Sleep(slowReply)
			err = c.Write(ctx, typ, msg)
		case "HOLD":
			fw.holdHeld <- struct{}{}
			select {
			case <-fw.holdRelease:
			case <-fw.quit:
			}
			err = c.Write(ctx, typ, msg)
		case "CLOSE", "DIE":
			fw.mu.Lock()
			fw.closes = append(fw.closes, errors.New("closed by the workspace"))
			fw.mu.Unlock()
			if string(msg) == "CLOSE" {
				c.Close(websocket.StatusNormalClosure, "idle timeout")
			}
			return // DIE: CloseNow, no close frame
		case "PING":
			// The pong is read by this loop, so the ping waits apart.
			fw.wg.Go(func() {
				err := c.Ping(ctx) // the connection's end ends it too
				reply := "PONG"
				if err != nil {
					reply = "NO PONG: " + err.Error()
				}
				c.Write(ctx, websocket.MessageText, []byte(reply))
			})
		default:
			if reply, ok := resetReply(msg); ok {
				err = c.Write(ctx, websocket.MessageText, reply)
				break
			}
			err = c.Write(ctx, typ, msg)
		}
		if err != nil {
			return
		}
	}
}

// resetReply is the fake's answer to a reset frame (ok false for any
// other frame): an observation whose metadata names the task asked for,
// or an EXECUTION_ERROR when the reset's data holds "fail".
func resetReply(msg []byte) ([]byte, bool) {
	var m struct {
		Type string         `json:"type"`
		Data map[string]any `json:"data"`
	}
	if json.Unmarshal(msg, &m) != nil || m.Type != "reset" {
		return nil, false
	}
	if _, fail := m.Data["fail"]; fail {
		return []byte(`{"type":"error","data":{"message":"reset failed","code":"EXECUTION_ERROR"}}`), true
	}
	b, _ := json.Marshal(map[string]any{"type": "observation", "data": map[string]any{
		"observation": map[string]any{"task": "t"}, "reward": nil, "done": false, "metadata": map[string]any{"task_id": m.Data["task_id"]}}})
	return b, true
}

func (fw *fakeWorkbench) received() ([][]byte, []websocket.MessageType) {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return append([][]byte(nil), fw.messages...), append([]websocket.MessageType(nil), fw.types...)
}

func (fw *fakeWorkbench) closeErrs() []error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return append([]error(nil), fw.closes...)
}

// bigPayload is n bytes of a JSON string: deterministic, checkable.
func bigPayload(n int) []byte {
	b := bytes.Repeat([]byte("0123456789abcdef"), n/16+1)[:n]
	b[0], b[n-1] = '"', '"'
	return b
}

// proxyFixture is a server on the fake adapter whose workspaces are fake
// workbenches, one per (campaign, index).
type proxyFixture struct {
	*testServer
	dir     string
	mu      sync.Mutex
	benches map[string]*fakeWorkbench
}

func newProxyFixture(t *testing.T) *proxyFixture {
	t.Helper()
	dir, err := shortTempDir(t)
	if err != nil {
		t.Fatal(err)
	}
	be := newFakeBackend(t)
	f := &proxyFixture{dir: dir, benches: map[string]*fakeWorkbench{}}
	be.sockets = func(campaignID string, i int) string {
		name := fmt.Sprintf("%s-%d", campaignID, i)
		f.mu.Lock()
		defer f.mu.Unlock()
		if _, ok := f.benches[name]; !ok {
			f.benches[name] = newFakeWorkbench(t, dir, name)
		}
		return f.benches[name].socket
	}
	f.testServer = newTestServer(t, be)
	return f
}

// shortTempDir is a temporary directory whose socket paths fit a unix
// socket address (t.TempDir's may not).
func shortTempDir(t *testing.T) (string, error) {
	dir, err := os.MkdirTemp("/tmp", "apx")
	if err != nil {
		return "", err
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir, nil
}

func (f *proxyFixture) bench(name string) *fakeWorkbench {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.benches[name]
}

// create makes a campaign of the given tasks and returns its view.
func (f *proxyFixture) create(t *testing.T, id string, taskIDs ...string) api.CampaignView {
	t.Helper()
	resp, b := f.do(t, http.MethodPost, "/v1/campaigns", specJSON(id, taskIDs...), true)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create %s: %d %s", id, resp.StatusCode, b)
	}
	var v api.CampaignView
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func wsURL(baseURL string) string { return "ws" + strings.TrimPrefix(baseURL, "http") + "/ws" }

func dialEpisode(t *testing.T, baseURL string) *websocket.Conn {
	t.Helper()
	c, _, err := websocket.Dial(testenv.Context(t), wsURL(baseURL), nil)
	if err != nil {
		t.Fatalf("dial %s: %v", wsURL(baseURL)[:30], err)
	}
	c.SetReadLimit(maxObservationBytes)
	t.Cleanup(func() { c.CloseNow() })
	return c
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

func asciiBytes(n int) []byte {
	b := randomBytes(n)
	for i := range b {
		b[i] = 'a' + b[i]%26
	}
	return b
}

// TestProxyRelaysByteForByte: messages of every length class, text and
// binary, up to MaxFrameBytes, reach the workspace unchanged and come
// back unchanged; a 16 MiB observation reaches the client unchanged.
func TestProxyRelaysByteForByte(t *testing.T) {
	checkNoLeaks(t)
	f := newProxyFixture(t)
	v := f.create(t, "camp-1", "software/median@7")
	c := dialEpisode(t, v.Workspaces[0].BaseURL)
	ctx := testenv.Context(t)
	var sent [][]byte
	var types []websocket.MessageType
	for _, n := range []int{0, 1, 125, 126, 65535, 65536, 1 << 20, MaxFrameBytes} {
		for _, typ := range []websocket.MessageType{websocket.MessageText, websocket.MessageBinary} {
			msg := asciiBytes(n)
			if typ == websocket.MessageBinary {
				msg = randomBytes(n)
			}
			if err := c.Write(ctx, typ, msg); err != nil {
				t.Fatalf("write %d bytes: %v", n, err)
			}
			gotTyp, got, err := c.Read(ctx)
			if err != nil {
				t.Fatalf("read %d bytes: %v", n, err)
			}
			if gotTyp != typ || !bytes.Equal(got, msg) {
				t.Fatalf("%v of %d bytes came back as %v of %d bytes, changed", typ, n, gotTyp, len(got))
			}
			sent, types = append(sent, msg), append(types, typ)
		}
	}
	if err := c.Write(ctx, websocket.MessageText, []byte("BIG")); err != nil {
		t.Fatal(err)
	}
	_, big, err := c.Read(ctx)
	if err != nil {
		t.Fatalf("the 16 MiB observation: %v", err)
	}
	if !bytes.Equal(big, bigPayload(bigObservation)) {
		t.Fatalf("the 16 MiB observation changed: %d bytes", len(big))
	}
	got, gotTypes := f.bench("camp-1-0").received()
	if len(got) != len(sent)+1 {
		t.Fatalf("the workspace got %d messages, want %d", len(got), len(sent)+1)
	}
	for i := range sent {
		if gotTypes[i] != types[i] || !bytes.Equal(got[i], sent[i]) {
			t.Fatalf("message %d (%d bytes) reached the workspace changed", i, len(sent[i]))
		}
	}
	// One byte over the limit is refused with 1009, both sides closed.
	if err := c.Write(ctx, websocket.MessageBinary, randomBytes(MaxFrameBytes+1)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Read(ctx); websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
		t.Fatalf("an oversized message: %v, want close 1009", err)
	}
	testenv.WaitFor(t, "the workspace side closed", func() bool { return len(f.bench("camp-1-0").closeErrs()) == 1 })
}

// TestProxyResetBound: a reset frame naming another task is refused by
// the proxy (the workbench's EXECUTION_ERROR saying the workspace is
// bound) and never relayed, in its place among the replies; every other
// reset names the workspace's task once relayed; other frames are
// untouched.
func TestProxyResetBound(t *testing.T) {
	checkNoLeaks(t)
	f := newProxyFixture(t)
	v := f.create(t, "camp-1", "software/median@7")
	c := dialEpisode(t, v.Workspaces[0].BaseURL)
	relayed := []string{
		`{"type":"reset","data":{"seed":3}}`,
		`{"type":"reset"}`,
		`{"type":"reset","data":{"task_id":"software/median@7"}}`,
		`{"type":"reset","data":{"task_id":null}}`,
		`{"type":"reset","data":{"task_id":"x","task_id":"software/median@7"}}`,
		`{"type":"step","data":{"tool":"read_file","args":{"path":"a"}}}`,
		`{"type":"reset","data":null}`,
	}
	refused := []string{
		`{"type":"reset","data":{"task_id":"sql/top_customer","seed":3}}`,
		`{"type":"state","type":"reset","data":{"task_id":"x"}}`,
		`{"type":"reset","data":{"task_id":"software/median@7","task_id":"y"}}`,
		`{"typ\u0065":"reset","d\u0061ta":{"t\u0061sk_id":"x"}}`,
	}
	exchange := func(fr string) map[string]any {
		t.Helper()
		if err := c.Write(t.Context(), websocket.MessageText, []byte(fr)); err != nil {
			t.Fatal(err)
		}
		_, b, err := c.Read(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		json.Unmarshal(b, &m)
		return m
	}
	for i, fr := range relayed {
		exchange(fr)
		if i < 5 {
			// A refused reset between two relayed frames: answered in turn.
			m := exchange(refused[i%len(refused)])
			d, _ := m["data"].(map[string]any)
			if m["type"] != "error" || d["code"] != "EXECUTION_ERROR" || d["message"] != bind.ErrOtherTask.Error() {
				t.Errorf("reset %s: %v, want the proxy's refusal", refused[i%len(refused)], m)
			}
		}
	}
	got, _ := f.bench("camp-1-0").received()
	if len(got) != len(relayed) {
		t.Fatalf("the workspace received %d frames, want the %d relayed ones: %q", len(got), len(relayed), got)
	}
	for i, msg := range got[:5] {
		var m struct {
			Type string         `json:"type"`
			Data map[string]any `json:"data"`
		}
		if err := json.Unmarshal(msg, &m); err != nil || m.Type != "reset" || m.Data["task_id"] != "software/median@7" {
			t.Errorf("frame %d reached the workspace as %s", i, msg)
		}
		if strings.Count(string(msg), "task_id") != 1 {
			t.Errorf("frame %d holds task_id more than once: %s", i, msg)
		}
	}
	if string(got[0]) != `{"data":{"seed":3,"task_id":"software/median@7"},"type":"reset"}` {
		t.Errorf("frame 0: %s", got[0])
	}
	for i := 5; i < len(relayed); i++ {
		if string(got[i]) != relayed[i] {
			t.Errorf("frame %d changed: %s", i, got[i])
		}
	}
}

// TestProxyStepBeforeReset: a step before the session's first reset, or
// after a reset the workspace refused, is answered by the proxy with
// OpenEnv's error frame and never reaches the workspace (whose episode
// would otherwise start on its default task, not the bound one); the
// refusal comes after the replies to the frames sent before it.
func TestProxyStepBeforeReset(t *testing.T) {
	checkNoLeaks(t)
	f := newProxyFixture(t)
	v := f.create(t, "camp-1", "software/median@7")
	c := dialEpisode(t, v.Workspaces[0].BaseURL)
	ctx := testenv.Context(t)
	step := `{"type":"step","data":{"tool":"list_files","args":{}}}`
	exchange := func(frame string) map[string]any {
		t.Helper()
		if err := c.Write(ctx, websocket.MessageText, []byte(frame)); err != nil {
			t.Fatal(err)
		}
		_, b, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		json.Unmarshal(b, &m)
		if m == nil {
			m = map[string]any{"raw": string(b)}
		}
		return m
	}
	refused := func(m map[string]any) bool {
		d, _ := m["data"].(map[string]any)
		msg, _ := d["message"].(string)
		return m["type"] == "error" && d["code"] == "EXECUTION_ERROR" && strings.Contains(msg, "reset")
	}
	steps := func() int {
		got, _ := f.bench("camp-1-0").received()
		n := 0
		for _, m := range got {
			if strings.Contains(string(m), `"type":"step"`) {
				n++
			}
		}
		return n
	}
	if m := exchange(step); !refused(m) {
		t.Fatalf("a step before any reset: %v, want the proxy's EXECUTION_ERROR", m)
	}
	if m := exchange(`{"type":"state"}`); m["type"] != "state" {
		t.Fatalf("state after the refusal: %v (the session must stay open)", m)
	}
	if m := exchange(`{"type":"reset","data":{"task_id":"software/median@7"}}`); m["type"] != "observation" {
		t.Fatalf("reset: %v", m)
	}
	if m := exchange(step); m["type"] != "step" {
		t.Fatalf("a step after the reset was not relayed: %v", m)
	}
	if m := exchange(`{"type":"reset","data":{"fail":true}}`); m["type"] != "error" {
		t.Fatalf("a failing reset: %v", m)
	}
	if m := exchange(step); !refused(m) {
		t.Fatalf("a step after a failed reset: %v, want the proxy's EXECUTION_ERROR", m)
	}
	if n := steps(); n != 1 {
		t.Fatalf("%d steps reached the workspace, want only the one after the reset", n)
	}
	// Pipelined: the refusal is the reply to the step, after the reply
	// to the frame sent before it.
	c2 := dialEpisode(t, v.Workspaces[0].BaseURL)
	for _, fr := range []string{"SLOW", step} {
		if err := c2.Write(ctx, websocket.MessageText, []byte(fr)); err != nil {
			t.Fatal(err)
		}
	}
	if _, b, err := c2.Read(ctx); err != nil || string(b) != "SLOW" {
		t.Fatalf("first reply %q (%v), want SLOW's", b, err)
	}
	_, b, err := c2.Read(ctx)
	var m map[string]any
	if err != nil || json.Unmarshal(b, &m) != nil || !refused(m) {
		t.Fatalf("second reply %q (%v), want the step's refusal", b, err)
	}
	if n := steps(); n != 1 {
		t.Fatalf("%d steps reached the workspace", n)
	}
	// A step pipelined behind an unanswered reset is refused saying so
	// (it said "send a reset first", though one was sent), after the
	// reset's answer.
	c3 := dialEpisode(t, v.Workspaces[0].BaseURL)
	for _, fr := range []string{"SLOW", `{"type":"reset","data":{}}`, step} {
		if err := c3.Write(ctx, websocket.MessageText, []byte(fr)); err != nil {
			t.Fatal(err)
		}
	}
	var replies []string
	for range 3 {
		_, b, err := c3.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		replies = append(replies, string(b))
	}
	if replies[0] != "SLOW" || !strings.Contains(replies[1], `"observation"`) || !strings.Contains(replies[2], "wait for the reset's answer") {
		t.Fatalf("pipelined SLOW, reset, step: %q", replies)
	}
	if n := steps(); n != 1 {
		t.Fatalf("%d steps reached the workspace", n)
	}
}

// TestProxyStepRightAfterReset: a step sent the moment the reset's answer
// arrives is relayed, every time: the session holds the episode before
// the client can learn of it (the answer was written to the client before
// the session marked it bound, and such a step was refused: the API's
// end-to-end test hit it).
func TestProxyStepRightAfterReset(t *testing.T) {
	checkNoLeaks(t)
	// The relay of the reset's answer is slow to go on: the client's step
	// arrives first (as under load).
	testHookResetAnswerRelayed = func() { time.Sleep(20 * time.Millisecond) }
	t.Cleanup(func() { testHookResetAnswerRelayed = nil })
	f := newProxyFixture(t)
	v := f.create(t, "camp-1", "software/median@7")
	c := dialEpisode(t, v.Workspaces[0].BaseURL)
	ctx := testenv.Context(t)
	for i := range 20 {
		for _, fr := range []string{`{"type":"reset","data":{}}`, `{"type":"step","data":{"tool":"list_files","args":{}}}`} {
			if err := c.Write(ctx, websocket.MessageText, []byte(fr)); err != nil {
				t.Fatal(err)
			}
			_, b, err := c.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), "send a reset first") {
				t.Fatalf("round %d: the step after an answered reset was refused: %s", i, b)
			}
		}
	}
}

// TestProxyPings: pings are answered both ways while a slow reply is
// pending.
func TestProxyPings(t *testing.T) {
	checkNoLeaks(t)
	f := newProxyFixture(t)
	v := f.create(t, "camp-1", "software/median@7")
	c := dialEpisode(t, v.Workspaces[0].BaseURL)
	ctx := testenv.Context(t)
	// The client's pings are answered while the workspace holds its
	// reply (until the pongs came: pings that waited for the reply would
	// never be answered); the reply then arrives unchanged.
	read := make(chan error, 1)
	c.Write(ctx, websocket.MessageText, []byte("HOLD"))
	go func() {
		_, msg, err := c.Read(ctx)
		if err == nil && string(msg) != "HOLD" {
			err = fmt.Errorf("reply %q", msg)
		}
		read <- err
	}()
	bench := f.bench("camp-1-0")
	<-bench.holdHeld
	for range 3 {
		if err := c.Ping(testenv.Context(t)); err != nil {
			t.Fatalf("ping: %v", err)
		}
	}
	close(bench.holdRelease)
	if err := <-read; err != nil {
		t.Fatal(err)
	}
	// The workspace's pings are answered by the proxy.
	go func() {
		_, msg, err := c.Read(ctx)
		if err == nil && string(msg) != "PONG" {
			err = fmt.Errorf("%s", msg)
		}
		read <- err
	}()
	c.Write(ctx, websocket.MessageText, []byte("PING"))
	if err := <-read; err != nil {
		t.Fatalf("the workspace's ping: %v", err)
	}
}

// TestProxyCloses: whichever side closes or goes away, the other is
// closed with a code that says why, and every goroutine ends.
func TestProxyCloses(t *testing.T) {
	for _, tt := range []struct {
		name       string
		act        func(t *testing.T, f *proxyFixture, c *websocket.Conn)
		clientCode websocket.StatusCode // -1: the client closed itself
		reason     string
		benchCode  websocket.StatusCode // what the workspace saw; -1: nothing
	}{
		{"client_closes", func(t *testing.T, _ *proxyFixture, c *websocket.Conn) { c.Close(4001, "done") }, -1, "", 4001},
		{"client_vanishes", func(t *testing.T, _ *proxyFixture, c *websocket.Conn) { c.CloseNow() }, -1, "", websocket.StatusGoingAway},
		{"workspace_closes", func(t *testing.T, _ *proxyFixture, c *websocket.Conn) {
			c.Write(t.Context(), websocket.MessageText, []byte("CLOSE"))
		}, websocket.StatusNormalClosure, "idle timeout", -1},
		{"workspace_dies", func(t *testing.T, _ *proxyFixture, c *websocket.Conn) {
			c.Write(t.Context(), websocket.MessageText, []byte("DIE"))
		}, websocket.StatusInternalError, CodeWorkspaceUnavailable, -1},
		{"workspace_removed", func(t *testing.T, f *proxyFixture, c *websocket.Conn) {
			if resp, b := f.do(t, http.MethodDelete, "/v1/campaigns/camp-1", nil, true); resp.StatusCode != http.StatusOK {
				t.Fatalf("delete: %d %s", resp.StatusCode, b)
			}
		}, websocket.StatusGoingAway, CodeWorkspaceUnavailable + ": the workspace was removed", websocket.StatusGoingAway},
		{"service_closes", func(t *testing.T, f *proxyFixture, c *websocket.Conn) {
			f.Server.Close(t.Context())
		}, websocket.StatusGoingAway, "server shutting down", websocket.StatusGoingAway},
	} {
		t.Run(tt.name, func(t *testing.T) {
			checkNoLeaks(t)
			f := newProxyFixture(t)
			v := f.create(t, "camp-1", "software/median@7")
			c := dialEpisode(t, v.Workspaces[0].BaseURL)
			if err := c.Write(t.Context(), websocket.MessageText, []byte("hello")); err != nil {
				t.Fatal(err)
			}
			if _, _, err := c.Read(t.Context()); err != nil {
				t.Fatal(err)
			}
			testenv.WaitFor(t, "one live episode", func() bool { return testutil.ToFloat64(f.metrics.episodes) == 1 })
			tt.act(t, f, c)
			if tt.clientCode != -1 {
				_, _, err := c.Read(testenv.Context(t))
				var ce websocket.CloseError
				if !errors.As(err, &ce) || ce.Code != tt.clientCode || !strings.HasPrefix(ce.Reason, tt.reason) {
					t.Fatalf("the client got %v, want close %d %q", err, tt.clientCode, tt.reason)
				}
			}
			bench := f.bench("camp-1-0")
			testenv.WaitFor(t, "the workspace side ended", func() bool { return len(bench.closeErrs()) == 1 })
			if tt.benchCode != -1 {
				if got := websocket.CloseStatus(bench.closeErrs()[0]); got != tt.benchCode {
					t.Errorf("the workspace saw %v, want close %d", bench.closeErrs()[0], tt.benchCode)
				}
			}
			testenv.WaitFor(t, "no live episode", func() bool { return testutil.ToFloat64(f.metrics.episodes) == 0 })
		})
	}
}

// TestProxyDeadWorkspace: a workspace that does not answer is a clear
// status before any upgrade, never a hang.
func TestProxyDeadWorkspace(t *testing.T) {
	checkNoLeaks(t)
	f := newProxyFixture(t)
	v := f.create(t, "camp-1", "software/median@7")
	f.bench("camp-1-0").stop()
	_, resp, err := websocket.Dial(t.Context(), wsURL(v.Workspaces[0].BaseURL), nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("dial a dead workspace: %v %v", err, resp)
	}
	r, err := http.Get(v.Workspaces[0].BaseURL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != http.StatusBadGateway || !strings.Contains(string(b), CodeWorkspaceUnavailable) {
		t.Fatalf("GET /health of a dead workspace: %d %s", r.StatusCode, b)
	}
	decodeProblem(t, r, b)
	if got := testutil.ToFloat64(f.metrics.proxyErrors.WithLabelValues(errKindDial)); got != 2 {
		t.Errorf("dial errors %v, want 2", got)
	}
}

// TestProxyHTTP: the HTTP routes reach the workspace's socket, reset and
// step bodies carry the workspace's task, other bodies pass unchanged.
func TestProxyHTTP(t *testing.T) {
	checkNoLeaks(t)
	f := newProxyFixture(t)
	v := f.create(t, "camp-1", "software/median@7")
	base := v.Workspaces[0].BaseURL
	for _, tt := range []struct {
		method, path, body, want string
	}{
		{http.MethodPost, "/reset", `{"seed":3}`, `{"seed":3,"task_id":"software/median@7"}`},
		{http.MethodPost, "/reset", ``, `{"task_id":"software/median@7"}`},
		{http.MethodPost, "/reset", `[1]`, `[1]`},
		{http.MethodPost, "/step", `{"action":{"tool":"read_file","args":{}}}`, `{"action":{"tool":"read_file","args":{}},"task_id":"software/median@7"}`},
		{http.MethodPost, "/step", ``, ``},
		{http.MethodGet, "/state", ``, ``},
		{http.MethodGet, "/schema", ``, ``},
		{http.MethodGet, "/metadata", ``, ``},
		{http.MethodGet, "/health", ``, ``},
	} {
		req, _ := http.NewRequest(tt.method, base+tt.path, strings.NewReader(tt.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]string
		json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || got["socket"] != "camp-1-0" || got["path"] != tt.path || got["body"] != tt.want {
			t.Errorf("%s %s %q: %d %v, want body %q", tt.method, tt.path, tt.body, resp.StatusCode, got, tt.want)
		}
	}
	// A reset or a stateless step naming another task: refused, not relayed.
	for _, tt := range []struct{ path, body string }{
		{"/reset", `{"task_id":"sql/top_customer","seed":3}`},
		{"/step", `{"action":{"tool":"read_file","args":{}},"task_id":"sql/top_customer"}`},
	} {
		resp, err := http.Post(base+tt.path, "application/json", strings.NewReader(tt.body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		// The fake workspace answers every relayed call 200.
		if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(b), "bound to its task") {
			t.Errorf("POST %s %s: %d %s, want 422 from the proxy", tt.path, tt.body, resp.StatusCode, b)
		}
	}
	resp, err := http.Get(base + "/nothing")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown proxy route: %d", resp.StatusCode)
	}
	http.DefaultClient.CloseIdleConnections()
}

// TestCapabilityScope: a capability reaches its own workspace and no
// other; a forged one, one of a removed campaign, and one of an earlier
// generation of the same campaign id reach nothing.
func TestCapabilityScope(t *testing.T) {
	checkNoLeaks(t)
	f := newProxyFixture(t)
	a := f.create(t, "camp-a", "software/median@7", "sql/top_customer@3")
	b := f.create(t, "camp-b", "software/median@7")
	whoAnswers := func(baseURL string) (int, string) {
		resp, err := http.Get(baseURL + "/health")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got map[string]string
		json.NewDecoder(resp.Body).Decode(&got)
		return resp.StatusCode, got["socket"]
	}
	for want, v := range map[string]api.Workspace{"camp-a-0": a.Workspaces[0], "camp-a-1": a.Workspaces[1], "camp-b-0": b.Workspaces[0]} {
		if code, got := whoAnswers(v.BaseURL); code != http.StatusOK || got != want {
			t.Errorf("%s reached %q (%d), want %s", v.AgentID, got, code, want)
		}
	}
	if a.Workspaces[0].BaseURL == b.Workspaces[0].BaseURL {
		t.Fatal("two campaigns' workspaces share a capability")
	}
	counts := func() map[string]int64 {
		out := map[string]int64{}
		for _, n := range []string{"camp-a-0", "camp-a-1", "camp-b-0"} {
			out[n] = f.bench(n).requests.Load()
		}
		return out
	}
	before := counts()
	forged := []byte(a.Workspaces[0].BaseURL)
	forged[len(forged)-1] ^= 1
	// Not a credential: a capability of one workspace with another's path
	// is still that workspace's, so only forgeries and revoked ones remain.
	for _, u := range []string{string(forged), strings.TrimSuffix(a.Workspaces[0].BaseURL, a.Workspaces[0].BaseURL[len(a.Workspaces[0].BaseURL)-43:]) + "x"} {
		if code, _ := whoAnswers(u); code != http.StatusNotFound {
			t.Errorf("a forged capability: %d, want 404", code)
		}
	}
	// One workspace's capability in a path that names another's reaches
	// neither (raw requests: no client cleans these paths).
	capA, capB := a.Workspaces[0].BaseURL[len(a.Workspaces[0].BaseURL)-43:], b.Workspaces[0].BaseURL[len(b.Workspaces[0].BaseURL)-43:]
	for _, path := range []string{
		episodePrefix + "/" + capA + "/../" + capB + "/health",
		episodePrefix + "/" + capA + "/%2e%2e/" + capB + "/health",
		episodePrefix + "/" + capA + "%2F..%2F" + capB + "/health",
		episodePrefix + "/" + capA + "/" + capB + "/health",
		episodePrefix + "//" + capB + "/health",
		episodePrefix + "/" + capA + capB + "/health",
	} {
		if code := rawGet(t, f.ts.URL, path); code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", strings.ReplaceAll(strings.ReplaceAll(path, capA, "<A>"), capB, "<B>"), code)
		}
	}
	if after := counts(); after["camp-a-0"] != before["camp-a-0"] || after["camp-b-0"] != before["camp-b-0"] {
		t.Errorf("a mixed path reached a workspace: %v -> %v", before, after)
	}
	// Remove camp-a: its capabilities are refused, camp-b's still work.
	if resp, body := f.do(t, http.MethodDelete, "/v1/campaigns/camp-a", nil, true); resp.StatusCode != http.StatusOK {
		t.Fatalf("delete: %d %s", resp.StatusCode, body)
	}
	for _, v := range a.Workspaces {
		if code, _ := whoAnswers(v.BaseURL); code != http.StatusNotFound {
			t.Errorf("a removed workspace's capability: %d, want 404", code)
		}
		if _, resp, err := websocket.Dial(t.Context(), wsURL(v.BaseURL), nil); err == nil || resp.StatusCode != http.StatusNotFound {
			t.Errorf("a removed workspace's WebSocket: %v", err)
		}
	}
	if after := counts(); after["camp-a-0"] != before["camp-a-0"] || after["camp-a-1"] != before["camp-a-1"] {
		t.Errorf("refused capabilities reached a workspace: %v -> %v", before, after)
	}
	if code, got := whoAnswers(b.Workspaces[0].BaseURL); code != http.StatusOK || got != "camp-b-0" {
		t.Errorf("camp-b after camp-a's removal: %d %q", code, got)
	}
	// The same campaign id again: a new generation, new capabilities.
	a2 := f.create(t, "camp-a", "software/median@7", "sql/top_customer@3")
	for i := range a2.Workspaces {
		if a2.Workspaces[i].BaseURL == a.Workspaces[i].BaseURL || a2.Workspaces[i].AgentID != a.Workspaces[i].AgentID {
			t.Errorf("workspace %d: the new generation reuses the old capability, or changed agent id", i)
		}
		if code, _ := whoAnswers(a.Workspaces[i].BaseURL); code != http.StatusNotFound {
			t.Errorf("the earlier generation's capability reaches the new one: %d", code)
		}
	}
	if got := testutil.ToFloat64(f.metrics.proxyErrors.WithLabelValues(errKindUnknown)); got < 6 {
		t.Errorf("unknown-capability errors counted: %v", got)
	}
	// No capability in the logs: only route patterns.
	for _, v := range append(append(a.Workspaces, b.Workspaces...), a2.Workspaces...) {
		if strings.Contains(f.logs.String(), v.BaseURL[len(v.BaseURL)-43:]) {
			t.Errorf("a capability reached the log")
		}
	}
	http.DefaultClient.CloseIdleConnections()
}

// TestRestartKeepsBaseURLs: a new server with the same key serves the
// same base_urls for the campaigns it loads; another key serves others.
func TestRestartKeepsBaseURLs(t *testing.T) {
	f := newProxyFixture(t)
	v := f.create(t, "camp-1", "software/median@7")
	again := newTestServerKey(t, f.be, f.key)
	if err := again.Load(); err != nil {
		t.Fatal(err)
	}
	resp, b := again.do(t, http.MethodGet, "/v1/campaigns/camp-1/workspaces", nil, true)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	capab := v.Workspaces[0].BaseURL[len(v.Workspaces[0].BaseURL)-43:]
	if !strings.Contains(string(b), capab) {
		t.Errorf("after a restart the base_url changed: %s", b)
	}
	r, err := http.Get(again.ts.URL + episodePrefix + "/" + capab + "/health")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusOK {
		t.Errorf("the old base_url on the restarted server: %d", r.StatusCode)
	}
	other := newTestServerKey(t, f.be, bytes.Repeat([]byte{9}, KeyBytes))
	other.Load()
	_, b = other.do(t, http.MethodGet, "/v1/campaigns/camp-1/workspaces", nil, true)
	if strings.Contains(string(b), capab) {
		t.Error("another key derives the same capability")
	}
}

// TestClosedService: once Close has begun, operations and proxy
// requests are refused with 503, and campaigns are left alone.
func TestClosedService(t *testing.T) {
	checkNoLeaks(t)
	f := newProxyFixture(t)
	v := f.create(t, "camp-1", "software/median@7")
	if err := f.Server.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if resp, b := f.do(t, http.MethodPost, "/v1/campaigns", specJSON("camp-2", "software/median@7"), true); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("create after Close: %d %s", resp.StatusCode, b)
	}
	if resp, b := f.do(t, http.MethodDelete, "/v1/campaigns/camp-1", nil, true); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("delete after Close: %d %s", resp.StatusCode, b)
	}
	r, err := http.Get(v.Workspaces[0].BaseURL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("proxy after Close: %d", r.StatusCode)
	}
	for _, c := range f.be.mutating() {
		if strings.HasPrefix(c, "Cleanup") || c == "BringUp camp-2" {
			t.Errorf("Close touched a campaign: %v", f.be.mutating())
		}
	}
	http.DefaultClient.CloseIdleConnections()
}

// rawGet sends path as it is, on a connection of its own, and returns
// the status.
func rawGet(t *testing.T, base, path string) int {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
