package server

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/internal/testkit/workbenchtest"
	"github.com/agentpen/agentpen/workbench/bind"
	"github.com/agentpen/agentpen/workbench/client"
	"github.com/coder/websocket"
)

// TestMCPOnWebSockets: OpenEnv's MCP on /ws (list_tools before any
// reset, call_tool actions, {"type":"mcp"} frames) and on WebSocket
// /mcp plays the bound task: a reset naming another task is refused,
// and the MCP calls after it play the workspace's own episode.
func TestMCPOnWebSockets(t *testing.T) {
	const taskID = "logs/error_count@1"
	b, _ := bind.Fixed(taskID)
	s, base := mcpWorld(t, b, nil)
	ctx := testenv.Context(t)

	c := workbenchtest.Dial(t, ctx, base)
	raw, err := roundTrip(ctx, c, map[string]any{"type": "step", "data": map[string]any{"type": "list_tools"}})
	if err != nil {
		t.Fatal(err)
	}
	var lt struct {
		Observation struct {
			Tools []struct {
				Name        string          `json:"name"`
				InputSchema json.RawMessage `json:"input_schema"`
			} `json:"tools"`
		} `json:"observation"`
	}
	if json.Unmarshal(raw, &lt) != nil || len(lt.Observation.Tools) != 7 || len(lt.Observation.Tools[0].InputSchema) == 0 {
		t.Fatalf("list_tools before a reset: %s", raw)
	}
	if st, _ := roundTrip(ctx, c, map[string]any{"type": "state"}); !strings.Contains(string(st), `"step_count":0`) || !strings.Contains(string(st), `"episode_id":null`) {
		t.Errorf("list_tools started an episode: %s", st)
	}
	var se *client.ServerError
	if _, err := c.Reset(ctx, client.ResetOptions{TaskID: "sql/top_customer"}); !errors.As(err, &se) || !strings.Contains(se.Message, "bound to its task") {
		t.Fatalf("reset naming another task: %v", err)
	}
	// call_tool: the episode starts on the bound task, the task leads the result.
	raw, err = roundTrip(ctx, c, map[string]any{"type": "step", "data": map[string]any{"type": "call_tool", "tool_name": "list_files", "arguments": map[string]any{}}})
	if err != nil {
		t.Fatal(err)
	}
	var ct struct {
		Observation struct {
			ToolName string `json:"tool_name"`
			Result   struct {
				Content []textContent `json:"content"`
				Data    toolOutcome   `json:"data"`
			} `json:"result"`
			Error any `json:"error"`
		} `json:"observation"`
		Metadata map[string]any `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &ct); err != nil || ct.Observation.ToolName != "list_files" || ct.Observation.Result.Data.Task == "" || ct.Metadata["task_id"] != taskID || ct.Observation.Error != nil {
		t.Fatalf("call_tool: %v %s", err, raw)
	}
	if !strings.HasPrefix(ct.Observation.Result.Content[0].Text, "Task:\n") {
		t.Errorf("the first result's text does not lead with the task: %.100q", ct.Observation.Result.Content[0].Text)
	}
	// {"type":"mcp"}: the same session's episode (no task again).
	frame, _ := json.Marshal(map[string]any{"type": "mcp", "data": map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": map[string]any{"name": "read_file", "arguments": map[string]any{"path": "app.log"}}}})
	if err := c.Conn().Write(ctx, websocket.MessageText, frame); err != nil {
		t.Fatal(err)
	}
	_, frame, err = c.Conn().Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var mf struct {
		Type string `json:"type"`
		Data struct {
			ID     float64 `json:"id"`
			Result struct {
				Data toolOutcome `json:"data"`
			} `json:"result"`
		} `json:"data"`
	}
	if json.Unmarshal(frame, &mf) != nil || mf.Type != "mcp" || mf.Data.ID != 7 || mf.Data.Result.Data.Task != "" || mf.Data.Result.Data.StepsLeft != 18 {
		t.Errorf("a {\"type\":\"mcp\"} tools/call: %s", frame)
	}

	// WebSocket /mcp: its own environment; JSON-RPC per frame.
	wc, _, err := websocket.Dial(ctx, strings.Replace(base, "http://", "ws://", 1)+"/mcp", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer wc.CloseNow()
	ask := func(req string) map[string]any {
		t.Helper()
		if err := wc.Write(ctx, websocket.MessageText, []byte(req)); err != nil {
			t.Fatal(err)
		}
		_, b, err := wc.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		json.Unmarshal(b, &m)
		return m
	}
	if m := ask(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); len(m["result"].(map[string]any)["tools"].([]any)) != 7 {
		t.Errorf("WS /mcp tools/list: %v", m)
	}
	if m := ask(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_files"}}`); m["result"].(map[string]any)["data"].(map[string]any)["task"] == "" {
		t.Errorf("WS /mcp tools/call: %v", m)
	}
	if m := ask(`not json`); rpcErrorCode(m) != codeParseError {
		t.Errorf("WS /mcp garbage: %v", m)
	}
	if s.ActiveSessions() != 2 {
		t.Errorf("active sessions %d, want the /ws and the /mcp connection", s.ActiveSessions())
	}
}
