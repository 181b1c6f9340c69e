package server

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentpen/agentpen/internal/testkit/workbenchtest"
	"github.com/agentpen/agentpen/workbench/bind"
	"github.com/agentpen/agentpen/workbench/client"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestActivityOnResetAndStep: the server reports episode traffic (a reset
// or a step, over HTTP or a WebSocket) and nothing else: health, state,
// schema and invalid requests are not activity.
func TestActivityOnResetAndStep(t *testing.T) {
	var n atomic.Int32
	_, ts := startServer(t, newFakeWorld(), func(c *Config) { c.Activity = func() { n.Add(1) } })
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/health", ""}, {"GET", "/state", ""}, {"GET", "/schema", ""}, {"GET", "/metadata", ""},
		{"POST", "/reset", `{"seed":-1}`}, {"POST", "/step", `{}`},
	} {
		do(t, r.method, ts.URL+r.path, r.body)
	}
	if got := n.Load(); got != 0 {
		t.Fatalf("%d activities without a reset or a step", got)
	}
	do(t, "POST", ts.URL+"/reset", `{}`)
	do(t, "POST", ts.URL+"/step", `{"action":{"tool":"echo","args":{"text":"x"}}}`)
	if got := n.Load(); got != 2 {
		t.Fatalf("HTTP reset and step: %d activities, want 2", got)
	}
	ctx := t.Context()
	c := workbenchtest.Dial(t, ctx, ts.URL)
	if _, err := c.Reset(ctx, client.ResetOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Step(ctx, "echo", json.RawMessage(`{"text":"x"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.State(ctx); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if got := n.Load(); got != 4 {
		t.Fatalf("after a WebSocket reset, step and state: %d activities, want 4", got)
	}
}

// TestSocketActivity: SocketActivity sets each socket's modification time
// to its clock's now, at most once a second, and never follows a link put
// where a socket was (the link's target keeps its time).
func TestSocketActivity(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "wb.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	target := filepath.Join(dir, "victim")
	os.WriteFile(target, nil, 0o600)
	link := filepath.Join(dir, "link.sock")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, p := range []string{sock, target} {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	touch := SocketActivity([]string{sock, link}, func() time.Time { return now })
	mtime := func(p string) time.Time {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi.ModTime().UTC()
	}
	touch()
	if got := mtime(sock); !got.Equal(now) {
		t.Fatalf("socket time %v, want %v", got, now)
	}
	if got := mtime(target); !got.Equal(old) {
		t.Fatalf("the link's target was touched: %v", got)
	}
	first := now
	now = now.Add(500 * time.Millisecond)
	touch()
	if got := mtime(sock); !got.Equal(first) {
		t.Fatalf("touched again within a second: %v", got)
	}
	now = now.Add(time.Second)
	touch()
	if got := mtime(sock); !got.Equal(now) {
		t.Fatalf("a second later: %v, want %v", got, now)
	}
}

// TestActivityOverMCPAndPlayPage: a tool call over MCP (OpenEnv's
// dialect over HTTP, stateless or in a session; a call_tool through HTTP
// /step; the official SDK's standard MCP), a session created with a
// reset, and the play page's reset and step are each activity; listing
// the tools, a session created without a reset and the page's metadata
// are not. Before, only /reset, /step and /ws counted, so a campaign
// played over MCP was removed as idle.
func TestActivityOverMCPAndPlayPage(t *testing.T) {
	const taskID = "logs/error_count@1"
	b, _ := bind.Fixed(taskID)
	var n atomic.Int32
	_, base := mcpWorld(t, b, func(c *Config) { c.Activity = func() { n.Add(1) } })
	want := int32(0)
	expect := func(what string, more int32) {
		t.Helper()
		want += more
		if got := n.Load(); got != want {
			t.Fatalf("after %s: %d activities, want %d", what, got, want)
		}
	}
	rpc(t, base, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	do(t, "GET", base+"/web/metadata", "")
	_, m := rpc(t, base, `{"jsonrpc":"2.0","id":2,"method":"openenv/session/create","params":{}}`)
	sid, _ := m["result"].(map[string]any)["session_id"].(string)
	expect("tools/list, the page's metadata, a session without a reset", 0)
	if sid == "" {
		t.Fatalf("session/create: %v", m)
	}
	rpc(t, base, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"list_files","arguments":{}}}`)
	expect("a stateless tools/call", 1)
	rpc(t, base, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"list_files","session_id":"`+sid+`"}}`)
	expect("a session's tools/call", 1)
	rpc(t, base, `{"jsonrpc":"2.0","id":5,"method":"openenv/session/create","params":{"task_id":"`+taskID+`"}}`)
	expect("a session created with a reset", 1)
	if code, body := post(t, base+"/step", `{"action":{"type":"call_tool","tool_name":"list_files","arguments":{}}}`); code != 200 {
		t.Fatalf("call_tool through /step: %d %s", code, body)
	}
	expect("a call_tool through HTTP /step", 1)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cs := sdkSession(t, ctx, base)
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	expect("standard MCP's tools/list", 0)
	if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "list_files", Arguments: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	expect("standard MCP's tools/call", 1)
	if code, body := post(t, base+"/web/reset", `{}`); code != 200 {
		t.Fatalf("/web/reset: %d %s", code, body)
	}
	expect("the play page's reset", 1)
	if code, body := post(t, base+"/web/step", `{"action":{"tool":"list_files"}}`); code != 200 {
		t.Fatalf("/web/step: %d %s", code, body)
	}
	expect("the play page's step", 1)
}
