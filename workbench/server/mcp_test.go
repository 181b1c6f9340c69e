package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/oracle"
	"github.com/agentpen/agentpen/internal/testkit/sandboxtest"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/workbench/bind"
	"github.com/agentpen/agentpen/workbench/episode"
	"github.com/agentpen/agentpen/workbench/tasks"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpWorld serves real workbench environments (bound by b, when not nil)
// with the workbench's tools on /mcp, and returns its base URL.
func mcpWorld(t *testing.T, b *bind.Binding, mutate func(*Config)) (*Server, string) {
	t.Helper()
	testenv.RequireRoot(t) // real episodes: the sandbox
	ecfg := episode.Config{Sandbox: sandboxtest.Shared(t)}
	if b != nil {
		ecfg.Binding = b
	}
	s, ts := startServer(t, newFakeWorld(), func(c *Config) {
		c.Factory = func() (Env, error) { return episode.New(ecfg) }
		c.Tools = ecfg.Tools()
		c.Version = "test"
		if mutate != nil {
			mutate(c)
		}
	})
	return s, ts.URL
}

// sdkSession connects the official Go SDK's client to base/mcp.
func sdkSession(t *testing.T, ctx context.Context, base string) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "agentpen-test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: base + "/mcp"}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// sdkOutcome reads a tool result's structured content.
func sdkOutcome(t *testing.T, res *sdk.CallToolResult) toolOutcome {
	t.Helper()
	var o toolOutcome
	b, _ := json.Marshal(res.StructuredContent)
	var raw struct {
		Task      string  `json:"task"`
		Output    string  `json:"output"`
		Error     string  `json:"error"`
		StepsLeft int     `json:"steps_left"`
		Done      bool    `json:"done"`
		Reward    float64 `json:"reward"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
	o = toolOutcome{Task: raw.Task, Output: raw.Output, Error: raw.Error, StepsLeft: raw.StepsLeft, Done: raw.Done, Reward: pyFloat(raw.Reward)}
	return o
}

// playMCP plays task's oracle through call (one tool call, its
// structured outcome): the first call starts the episode and carries
// the task.
func playMCP(t *testing.T, taskID string, call func(tool string, args map[string]any) (toolOutcome, error)) oracle.Result {
	t.Helper()
	first, err := call("list_files", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	if first.Task == "" {
		t.Fatalf("the first call's result carries no task: %+v", first)
	}
	task, err := tasks.Build(taskID)
	if err != nil {
		t.Fatal(err)
	}
	if first.Task != task.Instruction {
		t.Fatalf("the first call started another task: %.80q", first.Task)
	}
	orc, err := oracle.Load(taskID)
	if err != nil {
		t.Fatal(err)
	}
	final, err := oracle.Play(task.Kind, first.Task, orc, task.Files[0].Path, func(tool string, args map[string]any) (oracle.Result, error) {
		o, err := call(tool, args)
		return oracle.Result{Output: o.Output, Error: o.Error, Done: o.Done, Reward: float64(o.Reward)}, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return final
}

// TestMCPStandardGoSDK: the official Go SDK's client lists the tools
// (each with a JSON Schema and the refusal rule) and plays an oracle
// episode to reward 1.0 over standard MCP, one session one episode of
// the task the server is bound to; two sessions are two episodes.
func TestMCPStandardGoSDK(t *testing.T) {
	for _, taskID := range []string{"logs/error_count@1", "software/median@2"} {
		t.Run(strings.ReplaceAll(taskID, "/", "_"), func(t *testing.T) {
			b, _ := bind.Fixed(taskID)
			s, base := mcpWorld(t, b, nil)
			ctx := testenv.Context(t)
			cs := sdkSession(t, ctx, base)
			lt, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tool := range lt.Tools {
				names = append(names, tool.Name)
				if !strings.Contains(tool.Description, "invalid calls in a row end the episode") {
					t.Errorf("%s: description without the refusal rule", tool.Name)
				}
				schema, _ := json.Marshal(tool.InputSchema)
				if !bytes.Contains(schema, []byte(`"type":"object"`)) {
					t.Errorf("%s: schema %s", tool.Name, schema)
				}
			}
			if want := []string{"check", "list_files", "read_file", "run_python", "run_tests", "submit", "write_file"}; !slices.Equal(slices.Sorted(slices.Values(names)), want) {
				t.Errorf("tools %v, want %v", names, want)
			}
			var metas []map[string]any
			final := playMCP(t, taskID, func(tool string, args map[string]any) (toolOutcome, error) {
				res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
				if err != nil {
					return toolOutcome{}, err
				}
				if md, ok := res.Meta[metaKey].(map[string]any); ok {
					metas = append(metas, md)
				}
				o := sdkOutcome(t, res)
				if res.IsError != (o.Error != "") || len(res.Content) != 1 {
					t.Errorf("%s: isError %v with error %q, %d contents", tool, res.IsError, o.Error, len(res.Content))
				}
				return o, nil
			})
			if !final.Done || final.Reward != 1.0 {
				t.Fatalf("final %+v, want done with reward 1.0", final)
			}
			if len(metas) == 0 || metas[0]["task_id"] != taskID {
				t.Errorf("the results' _meta does not say which task was played: %v", metas)
			}
			if s.ActiveSessions() != 1 {
				t.Errorf("active sessions %d during one MCP session", s.ActiveSessions())
			}
			// A second session is a second episode: its first call starts it.
			cs2 := sdkSession(t, ctx, base)
			res, err := cs2.CallTool(ctx, &sdk.CallToolParams{Name: "list_files", Arguments: map[string]any{}})
			if err != nil || sdkOutcome(t, res).Task == "" {
				t.Errorf("a second session's first call: %v %+v", err, res)
			}
			cs.Close()
			cs2.Close()
			testenv.WaitFor(t, "the sessions' environments closed", func() bool { return s.ActiveSessions() == 0 })
		})
	}
}

// TestMCPRefusals: over standard MCP a refused call is a tool error the
// episode counts (three in a row end it with reward 0), as through step;
// an unbound workspace refuses the first call, saying so.
func TestMCPRefusals(t *testing.T) {
	b, _ := bind.Fixed("logs/error_count@1")
	_, base := mcpWorld(t, b, nil)
	ctx := testenv.Context(t)
	cs := sdkSession(t, ctx, base)
	var last toolOutcome
	for i := range 3 {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "../../etc/passwd"}})
		if err != nil {
			t.Fatal(err)
		}
		last = sdkOutcome(t, res)
		if i < 2 && (!res.IsError || last.Error == "" || last.Done) {
			t.Fatalf("refused call %d: %+v", i, last)
		}
	}
	if !last.Done || last.Reward != 0 || !strings.Contains(last.Output, "Three invalid calls in a row end the episode") {
		t.Errorf("three refusals in a row: %+v, want the episode over with 0", last)
	}
	// Arguments that are not an object: a protocol error, not a step.
	if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "list_files", Arguments: []int{1}}); err == nil {
		t.Error("array arguments accepted")
	}

	unbound, _ := bind.File("/nonexistent-dir/task")
	_, base2 := mcpWorld(t, unbound, nil)
	cs2 := sdkSession(t, ctx, base2)
	res, err := cs2.CallTool(ctx, &sdk.CallToolParams{Name: "list_files", Arguments: map[string]any{}})
	if err != nil || !res.IsError || !strings.Contains(sdkOutcome(t, res).Error, "not bound to a task") {
		t.Errorf("a call on an unbound workspace: %v %+v", err, res)
	}
}

// rpc posts one JSON-RPC request in OpenEnv's dialect to base/mcp.
func rpc(t *testing.T, base, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(base+"/mcp", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s -> %d %s: %v", body, resp.StatusCode, b, err)
	}
	return resp.StatusCode, m
}

func rpcErrorCode(m map[string]any) float64 {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(float64)
	return c
}

// TestMCPOpenEnvDialect: OpenEnv's JSON-RPC on POST /mcp (no
// initialize): tools/list before anything, a stateless tools/call on a
// fresh episode of the bound task, an oracle episode to 1.0 in an HTTP
// session (openenv/session/create, tools/call with session_id,
// openenv/session/close), and a session asking for another task refused.
func TestMCPOpenEnvDialect(t *testing.T) {
	const taskID = "logs/error_count@1"
	b, _ := bind.Fixed(taskID)
	s, base := mcpWorld(t, b, nil)
	code, m := rpc(t, base, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	tools, _ := m["result"].(map[string]any)["tools"].([]any)
	if code != 200 || len(tools) != 7 || m["id"] != 1.0 {
		t.Fatalf("tools/list: %d %v", code, m)
	}
	if first, _ := tools[0].(map[string]any); first["inputSchema"] == nil || first["name"] != "list_files" {
		t.Errorf("tools/list entry %v", first)
	}
	_, m = rpc(t, base, `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"list_files","arguments":{}}}`)
	res, _ := m["result"].(map[string]any)
	data, _ := res["data"].(map[string]any)
	if data["task"] == "" || data["task"] == nil || res["isError"] != false || s.ActiveSessions() != 0 {
		t.Fatalf("stateless tools/call: %v", m)
	}

	_, m = rpc(t, base, `{"jsonrpc":"2.0","id":2,"method":"openenv/session/create","params":{"task_id":"sql/top_customer"}}`)
	if rpcErrorCode(m) != codeInvalidParams || !strings.Contains(m["error"].(map[string]any)["message"].(string), "bound to its task") {
		t.Errorf("a session naming another task: %v", m)
	}
	_, m = rpc(t, base, `{"jsonrpc":"2.0","id":3,"method":"openenv/session/create","params":{}}`)
	sid, _ := m["result"].(map[string]any)["session_id"].(string)
	if sid == "" || s.ActiveSessions() != 1 {
		t.Fatalf("session/create: %v (active %d)", m, s.ActiveSessions())
	}
	final := playMCP(t, taskID, func(tool string, args map[string]any) (toolOutcome, error) {
		req, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": args, "session_id": sid}})
		_, m := rpc(t, base, string(req))
		if m["error"] != nil {
			return toolOutcome{}, errors.New(string(req) + ": " + m["error"].(map[string]any)["message"].(string))
		}
		b, _ := json.Marshal(m["result"].(map[string]any)["data"])
		var o struct {
			Task, Output, Error string
			Done                bool
			Reward              float64
		}
		json.Unmarshal(b, &o)
		return toolOutcome{Task: o.Task, Output: o.Output, Error: o.Error, Done: o.Done, Reward: pyFloat(o.Reward)}, nil
	})
	if !final.Done || final.Reward != 1.0 {
		t.Fatalf("final %+v", final)
	}
	_, m = rpc(t, base, `{"jsonrpc":"2.0","id":4,"method":"openenv/session/close","params":{"session_id":"`+sid+`"}}`)
	if r, _ := m["result"].(map[string]any); r["closed"] != true || s.ActiveSessions() != 0 {
		t.Errorf("session/close: %v (active %d)", m, s.ActiveSessions())
	}
	_, m = rpc(t, base, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"list_files","session_id":"`+sid+`"}}`)
	if rpcErrorCode(m) != codeInvalidParams {
		t.Errorf("a call on a closed session: %v", m)
	}
}
