package server

import (
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/internal/testkit/workbenchtest"
	"github.com/agentpen/agentpen/workbench/client"
)

// TestOneEpisodeEnvs: the environments that play one episode at most (a
// stateless HTTP call's, a stateless JSON-RPC call's, an MCP session's)
// are told so, and make nothing ahead; a WebSocket session's and the
// play page's, which reset again, are not. The stateless calls' are told
// too that they answer one call (no fork server for one run).
func TestOneEpisodeEnvs(t *testing.T) {
	t.Parallel()
	w := newFakeWorld()
	_, ts := startServer(t, w, nil)
	ctx := testenv.Context(t)
	var want, wantCall []bool
	built := func(what string, one bool, call ...bool) {
		t.Helper()
		if n := w.built(); n != len(want)+1 {
			t.Fatalf("%s built %d environments, want 1", what, n-len(want))
		}
		want, wantCall = append(want, one), append(wantCall, len(call) > 0 && call[0])
	}

	if code, _, body := do(t, "POST", ts.URL+"/reset", `{}`); code != 200 {
		t.Fatalf("POST /reset: %d %s", code, body)
	}
	built("POST /reset", true, true)
	if code, m := rpc(t, ts.URL, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}`); code != 200 || m["error"] != nil {
		t.Fatalf("stateless tools/call: %d %v", code, m)
	}
	built("a stateless tools/call", true, true)
	if code, m := rpc(t, ts.URL, `{"jsonrpc":"2.0","id":2,"method":"openenv/session/create","params":{}}`); code != 200 || m["error"] != nil {
		t.Fatalf("session/create: %d %v", code, m)
	}
	built("an OpenEnv MCP session", true)
	ws := workbenchtest.Dial(t, ctx, ts.URL)
	if _, err := ws.Reset(ctx, client.ResetOptions{}); err != nil {
		t.Fatal(err)
	}
	built("a WebSocket session", false)
	if code, _, body := do(t, "POST", ts.URL+"/web/reset", `{}`); code != 200 {
		t.Fatalf("POST /web/reset: %d %s", code, body)
	}
	built("the play page", false)

	w.mu.Lock()
	defer w.mu.Unlock()
	for i, e := range w.envs {
		if e.oneEpisode() != want[i] || e.oneCall() != wantCall[i] {
			t.Errorf("environment %d: one episode %v, one call %v; want %v, %v", i, e.oneEpisode(), e.oneCall(), want[i], wantCall[i])
		}
	}
}
