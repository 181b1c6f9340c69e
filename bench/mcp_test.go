package main

import (
	"context"
	"net"
	"net/http"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentpen/agentpen/internal/testkit/testlatency"
	wbclient "github.com/agentpen/agentpen/workbench/client"
)

// BenchmarkMCPToolCall: list_files as an MCP tools/call (the official Go
// SDK's client, streamable HTTP, one session one episode) against the
// same call as an OpenEnv step over the WebSocket, on the same `workbench
// serve` and socket, interleaved; the difference is what MCP adds. Each
// episode's first call (which resets it) is not timed.
func BenchmarkMCPToolCall(b *testing.B) {
	const task = "data/csv_region_total"
	srv := startServe(b)
	ctx := b.Context()
	ws := srv.dial(b)
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", srv.Socket)
	}}}
	client := sdk.NewClient(&sdk.Implementation{Name: "agentpen-bench", Version: "1"}, nil)
	var cs *sdk.ClientSession
	open := func() {
		if cs != nil {
			cs.Close()
		}
		var err error
		if cs, err = client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: "http://workbench/mcp", HTTPClient: hc}, nil); err != nil {
			b.Fatal(err)
		}
		if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "list_files", Arguments: map[string]any{}}); err != nil {
			b.Fatal(err)
		}
		if _, err := ws.Reset(ctx, wbclient.ResetOptions{TaskID: task}); err != nil {
			b.Fatal(err)
		}
	}
	defer func() { cs.Close() }()
	var mcp, step testlatency.Samples
	steps := 18
	for i := 0; i < b.N; i++ {
		if steps == 18 {
			open() // an episode has 20 tool calls
			steps = 0
		}
		step.Time(func() {
			if _, err := ws.Step(ctx, "list_files", nil); err != nil {
				b.Fatal(err)
			}
		})
		mcp.Time(func() {
			res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "list_files", Arguments: map[string]any{}})
			if err != nil || res.IsError {
				b.Fatalf("tools/call: %v %+v", err, res)
			}
		})
		steps++
	}
	mcp.Report(b, "")
	step.Report(b, "raw-")
}
