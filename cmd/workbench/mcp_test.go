package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/oracle"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/workbench/tasks"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestServeMCP: a bare `workbench serve --task ID` plays that task to
// reward 1.0 over standard MCP (the Go SDK's client) and over OpenEnv's
// dialect (JSON-RPC on POST /mcp in a session), and says which task in
// the results' _meta.
func TestServeMCP(t *testing.T) {
	testenv.RequireRoot(t)
	const task = "logs/error_count@1"
	ls := startServe(t, "--task", task)
	ctx := testenv.Context(t)
	tk, _ := tasks.Build(task)
	orc, err := oracle.Load(task)
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		Task, Output, Error string
		Done                bool
		Reward              float64
	}
	play := func(call func(tool string, args map[string]any) (outcome, error)) {
		t.Helper()
		first, err := call("list_files", map[string]any{})
		if err != nil || first.Task != tk.Instruction {
			t.Fatalf("first call: %v, task %.60q", err, first.Task)
		}
		final, err := oracle.Play(tk.Kind, first.Task, orc, tk.Files[0].Path, func(tool string, args map[string]any) (oracle.Result, error) {
			o, err := call(tool, args)
			return oracle.Result{Output: o.Output, Error: o.Error, Done: o.Done, Reward: o.Reward}, err
		})
		if err != nil || !final.Done || final.Reward != 1.0 {
			t.Fatalf("final %+v, %v", final, err)
		}
	}

	c := sdk.NewClient(&sdk.Implementation{Name: "agentpen-test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: ls.URL + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var said any
	play(func(tool string, args map[string]any) (outcome, error) {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			return outcome{}, err
		}
		if md, ok := res.Meta["io.agentpen/metadata"].(map[string]any); ok {
			said = md["task_id"]
		}
		var o outcome
		b, _ := json.Marshal(res.StructuredContent)
		return o, json.Unmarshal(b, &o)
	})
	if said != task {
		t.Errorf("the results' _meta says task %v, want %s", said, task)
	}

	post := func(body any) map[string]any {
		b, _ := json.Marshal(body)
		resp, err := http.Post(ls.URL+"/mcp", "application/json", strings.NewReader(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		return m
	}
	m := post(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create"})
	sid, _ := m["result"].(map[string]any)["session_id"].(string)
	if sid == "" {
		t.Fatalf("session/create: %v", m)
	}
	play(func(tool string, args map[string]any) (outcome, error) {
		m := post(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": args, "session_id": sid}})
		var o outcome
		b, _ := json.Marshal(m["result"].(map[string]any)["data"])
		return o, json.Unmarshal(b, &o)
	})
}
