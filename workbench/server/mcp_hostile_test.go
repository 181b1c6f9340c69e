package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/internal/testkit/workbenchtest"
	"github.com/agentpen/agentpen/workbench/client"
	"github.com/agentpen/agentpen/workbench/episode"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// fakeTools are tools of the fake environment (helpers_test.go).
var fakeTools = []episode.ToolSpec{
	{Name: "echo", Description: "echo its arguments", InputSchema: json.RawMessage(`{"type":"object"}`)},
	{Name: "submit", Description: "submit", InputSchema: json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string"}}}`)},
}

func postMCP(t *testing.T, base string, body []byte, header map[string]string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/mcp", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestMCPHostileInputs: malformed JSON-RPC, batch bombs, huge arguments,
// unknown methods and sessions, and a flood of sessions on /mcp are each
// answered with a JSON-RPC error (or the capacity refusal, or a 4xx for
// what the transport refuses), nothing else; a standard MCP session and
// a WebSocket episode running meanwhile are undisturbed, and every
// environment built is closed once.
func TestMCPHostileInputs(t *testing.T) {
	w := newFakeWorld()
	s, ts := startServer(t, w, func(c *Config) { c.Tools = fakeTools; c.MaxSessions = 4 })
	base := ts.URL
	ctx := testenv.Context(t)
	cs := sdkSession(t, ctx, base)
	ws := workbenchtest.Dial(t, ctx, base)
	if _, err := ws.Reset(ctx, client.ResetOptions{}); err != nil {
		t.Fatal(err)
	}
	alive := func(when string) {
		t.Helper()
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"n": when}})
		if err != nil || res.IsError || !strings.Contains(sdkOutcome(t, res).Output, when) {
			t.Fatalf("%s: the MCP session: %v %+v", when, err, res)
		}
		r, err := ws.Step(ctx, "echo", workbenchtest.Args(map[string]any{"n": when}))
		if err != nil || !strings.Contains(r.Observation.Output, when) {
			t.Fatalf("%s: the WebSocket episode: %v %v", when, err, r.Observation)
		}
	}
	alive("before")

	huge := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"x":"` + strings.Repeat("a", 15<<20) + `"}}}`
	var batch bytes.Buffer
	batch.WriteString("[")
	for i := range 20000 {
		if i > 0 {
			batch.WriteString(",")
		}
		fmt.Fprintf(&batch, `{"jsonrpc":"2.0","id":%d,"method":"openenv/session/create"}`, i)
	}
	batch.WriteString("]")
	for _, tt := range []struct {
		name   string
		body   string
		header map[string]string
		status int
		code   int // JSON-RPC error code; 0: a transport refusal (status only)
	}{
		{"not_json", `{"jsonrpc":`, nil, 200, codeParseError},
		{"empty", ``, nil, 200, codeParseError},
		{"not_object", `"tools/list"`, nil, 200, codeInvalidRequest},
		{"wrong_version", `{"jsonrpc":"1.0","id":1,"method":"tools/list"}`, nil, 200, codeInvalidRequest},
		{"method_not_string", `{"jsonrpc":"2.0","id":1,"method":7}`, nil, 200, codeInvalidRequest},
		{"id_object", `{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}`, nil, 200, codeInvalidRequest},
		{"extra_key", `{"jsonrpc":"2.0","id":1,"method":"tools/list","x":1}`, nil, 200, codeInvalidRequest},
		{"params_array", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":[1]}`, nil, 200, codeInvalidParams},
		{"unknown_method", `{"jsonrpc":"2.0","id":1,"method":"resources/read"}`, nil, 200, codeMethodNotFound},
		{"call_without_name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`, nil, 200, codeInvalidParams},
		{"call_args_not_object", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":[1]}}`, nil, 200, codeInvalidParams},
		{"unknown_session", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","session_id":"nope"}}`, nil, 200, codeInvalidParams},
		{"close_unknown", `{"jsonrpc":"2.0","id":1,"method":"openenv/session/close","params":{"session_id":"nope"}}`, nil, 200, codeInvalidParams},
		{"batch_bomb", batch.String(), nil, 200, codeInvalidRequest},
		{"deep_nesting", strings.Repeat("[", 100000) + strings.Repeat("]", 100000), nil, 200, codeParseError},
		{"huge_arguments", huge, nil, 200, 0},
		{"over_the_limit", `{"x":"` + strings.Repeat("a", 17<<20) + `"}`, nil, 413, codeInvalidRequest},
		{"initialize_garbage_params", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":5}}`, nil, 0, 0},
		{"unknown_standard_session", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, map[string]string{sessionHeader: "0123"}, 404, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, b := postMCP(t, base, []byte(tt.body), tt.header)
			if tt.status != 0 && status != tt.status {
				t.Errorf("status %d, want %d: %.300s", status, tt.status, b)
			}
			if status >= 500 {
				t.Errorf("status %d: %.300s", status, b)
			}
			var m map[string]any
			if tt.code != 0 {
				if err := json.Unmarshal(b, &m); err != nil || rpcErrorCode(m) != float64(tt.code) || m["jsonrpc"] != "2.0" {
					t.Errorf("answer %.300s, want a JSON-RPC error %d", b, tt.code)
				}
			}
			if tt.name == "huge_arguments" {
				// Delivered to the episode whole, as through step (its own
				// limits apply to each tool).
				if err := json.Unmarshal(b, &m); err != nil || m["result"] == nil {
					t.Errorf("huge arguments: %.300s", b)
				}
			}
		})
	}
	alive("after the garbage")

	// A flood of sessions, both dialects at once: two slots are free
	// (the MCP session and the WebSocket hold two of four); every other
	// request gets the capacity refusal.
	const flood = 40
	var mu sync.Mutex
	var made, refused int
	var sessions []string
	var wg sync.WaitGroup
	for i := range flood {
		wg.Go(func() {
			body := `{"jsonrpc":"2.0","id":1,"method":"openenv/session/create"}`
			if i%2 == 0 {
				body = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"flood","version":"1"}}}`
			}
			status, b := postMCP(t, base, []byte(body), nil)
			var m map[string]any
			json.Unmarshal(b, &m)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case m["result"] != nil && status == 200:
				made++
				if sid, _ := m["result"].(map[string]any)["session_id"].(string); sid != "" {
					sessions = append(sessions, sid)
				}
			case rpcErrorCode(m) == codeServerError && strings.Contains(fmt.Sprint(m["error"]), "Server at capacity") && (status == 200 || status == 503):
				refused++
			default:
				t.Errorf("flood request: %d %.300s", status, b)
			}
		})
	}
	wg.Wait()
	if made != 2 || refused != flood-2 {
		t.Errorf("the flood: %d sessions made, %d refused; want 2 and %d", made, refused, flood-2)
	}
	if s.ActiveSessions() != 4 {
		t.Errorf("active sessions %d, want 4", s.ActiveSessions())
	}
	alive("during the flood")
	for _, sid := range sessions {
		postMCP(t, base, []byte(`{"jsonrpc":"2.0","id":1,"method":"openenv/session/close","params":{"session_id":"`+sid+`"}}`), nil)
	}
	alive("after the flood")
}

// FuzzDecodeRPC: whatever arrives, decodeRPC either refuses it with a
// JSON-RPC error code of the spec, or returns a request whose id is a
// string, an integer or null; the answer always encodes as JSON-RPC.
func FuzzDecodeRPC(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x","arguments":{}}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`, `{"jsonrpc":"2.0","id":1.5,"method":"x"}`, `{"jsonrpc":"2.0","id":null,"method":"x","params":null}`,
		`{"jsonrpc":"2.0","method":"x","method":"y"}`, `{`, `null`, `"x"`, `{"jsonrpc":"2.0","id":1e3,"method":"x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		req, rerr := decodeRPC(b)
		resp := rpcResponse{ID: req.ID, Err: rerr, Result: "ok"}
		out, err := json.Marshal(resp)
		if err != nil || !json.Valid(out) {
			t.Fatalf("%q: the answer does not encode: %v", b, err)
		}
		if rerr != nil {
			switch rerr.Code {
			case codeParseError, codeInvalidRequest, codeInvalidParams:
			default:
				t.Fatalf("%q: code %d", b, rerr.Code)
			}
			return
		}
		if len(req.ID) > 0 {
			switch jsonKind(req.ID) {
			case 's', 'n':
			case 'd':
				if bytes.ContainsAny(req.ID, ".eE") {
					t.Fatalf("%q: id %s is not an integer", b, req.ID)
				}
			default:
				t.Fatalf("%q: id %s", b, req.ID)
			}
		}
		if req.Params == nil {
			t.Fatalf("%q: nil params", b)
		}
	})
}
