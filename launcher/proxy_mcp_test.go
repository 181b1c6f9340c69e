package launcher

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/oracle"
	"github.com/agentpen/agentpen/internal/testkit/sandboxtest"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/workbench/bind"
	"github.com/agentpen/agentpen/workbench/episode"
	"github.com/agentpen/agentpen/workbench/server"
	"github.com/agentpen/agentpen/workbench/tasks"
	"github.com/coder/websocket"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// realWorkbench serves a real workbench bound to task (as a campaign
// workspace's is) on a unix socket in dir, until the test ends.
func realWorkbench(t *testing.T, dir, name, task string) string {
	t.Helper()
	testenv.RequireRoot(t) // real episodes: the sandbox
	b, err := bind.Fixed(task)
	if err != nil {
		t.Fatal(err)
	}
	ecfg := episode.Config{Sandbox: sandboxtest.Shared(t), Binding: b}
	srv, err := server.New(server.Config{
		Factory: func() (server.Env, error) { return episode.New(ecfg) },
		Tools:   ecfg.Tools(),
	})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, name+".sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("workbench: %v", err)
		}
	})
	return sock
}

// newMCPFixture is a server whose workspaces are real workbenches, each
// bound to its campaign's task.
func newMCPFixture(t *testing.T, task string) (*testServer, string) {
	t.Helper()
	dir, err := shortTempDir(t)
	if err != nil {
		t.Fatal(err)
	}
	be := newFakeBackend(t)
	socks := map[string]string{}
	be.sockets = func(campaignID string, i int) string {
		name := fmt.Sprintf("%s-%d", campaignID, i)
		if socks[name] == "" {
			socks[name] = realWorkbench(t, dir, name, task)
		}
		return socks[name]
	}
	ts := newTestServer(t, be)
	f := &proxyFixture{testServer: ts}
	return ts, f.create(t, "camp-mcp", task).Workspaces[0].BaseURL
}

// mcpOutcome is a tool result's structured content.
type mcpOutcome struct {
	Task      string  `json:"task"`
	Output    string  `json:"output"`
	Error     string  `json:"error"`
	StepsLeft int     `json:"steps_left"`
	Done      bool    `json:"done"`
	Reward    float64 `json:"reward"`
}

// playMCPOracle plays task's oracle through call: the first call starts
// the episode and carries the task.
func playMCPOracle(t *testing.T, task string, call func(tool string, args map[string]any) (mcpOutcome, error)) oracle.Result {
	t.Helper()
	first, err := call("list_files", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	tk, err := tasks.Build(task)
	if err != nil {
		t.Fatal(err)
	}
	if first.Task != tk.Instruction {
		t.Fatalf("the first call's task %.80q is not %s's", first.Task, task)
	}
	orc, err := oracle.Load(task)
	if err != nil {
		t.Fatal(err)
	}
	final, err := oracle.Play(tk.Kind, first.Task, orc, tk.Files[0].Path, func(tool string, args map[string]any) (oracle.Result, error) {
		o, err := call(tool, args)
		return oracle.Result{Output: o.Output, Error: o.Error, Done: o.Done, Reward: o.Reward}, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return final
}

// TestProxyMCPGoSDK: an unmodified standard MCP client (the official Go
// SDK's) reaches the workspace's tools at <base_url>/mcp and plays an
// oracle episode of the workspace's task to reward 1.0.
func TestProxyMCPGoSDK(t *testing.T) {
	const task = "logs/error_count@1"
	_, base := newMCPFixture(t, task)
	ctx := testenv.Context(t)
	c := sdk.NewClient(&sdk.Implementation{Name: "agentpen-test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: base + "/mcp"}, nil)
	if err != nil {
		t.Fatalf("connect through the base_url: %v", err)
	}
	defer cs.Close()
	lt, err := cs.ListTools(ctx, nil)
	if err != nil || len(lt.Tools) != 7 {
		t.Fatalf("tools/list: %v %v", err, lt)
	}
	final := playMCPOracle(t, task, func(tool string, args map[string]any) (mcpOutcome, error) {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			return mcpOutcome{}, err
		}
		var o mcpOutcome
		b, _ := json.Marshal(res.StructuredContent)
		return o, json.Unmarshal(b, &o)
	})
	if !final.Done || final.Reward != 1.0 {
		t.Fatalf("final %+v, want done with 1.0", final)
	}
}

// TestProxyMCPOpenEnv: OpenEnv's dialect through the base_url: JSON-RPC
// on POST /mcp (an HTTP session playing the oracle to 1.0; a session
// naming another task refused by the proxy), WebSocket /mcp, and
// list_tools through /ws before any reset (which the proxy lets
// through: it needs no episode).
func TestProxyMCPOpenEnv(t *testing.T) {
	const task = "logs/error_count@1"
	_, base := newMCPFixture(t, task)
	post := func(body string) map[string]any {
		t.Helper()
		resp, err := http.Post(base+"/mcp", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		b, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(b, &m); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", body, resp.StatusCode, b)
		}
		return m
	}
	if m := post(`{"jsonrpc":"2.0","id":1,"method":"openenv/session/create","params":{"task_id":"sql/top_customer"}}`); !strings.Contains(fmt.Sprint(m["error"]), "bound to its task") || m["id"] != 1.0 {
		t.Errorf("a session naming another task through the base_url: %v", m)
	}
	m := post(`{"jsonrpc":"2.0","id":2,"method":"openenv/session/create","params":{}}`)
	sid, _ := m["result"].(map[string]any)["session_id"].(string)
	if sid == "" {
		t.Fatalf("session/create: %v", m)
	}
	final := playMCPOracle(t, task, func(tool string, args map[string]any) (mcpOutcome, error) {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": args, "session_id": sid}})
		m := post(string(b))
		if m["error"] != nil {
			return mcpOutcome{}, fmt.Errorf("%v", m["error"])
		}
		var o mcpOutcome
		d, _ := json.Marshal(m["result"].(map[string]any)["data"])
		return o, json.Unmarshal(d, &o)
	})
	if !final.Done || final.Reward != 1.0 {
		t.Fatalf("final %+v", final)
	}
	post(`{"jsonrpc":"2.0","id":4,"method":"openenv/session/close","params":{"session_id":"` + sid + `"}}`)

	ctx := testenv.Context(t)
	wc, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/mcp", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer wc.CloseNow()
	wc.Write(ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_files"}}`))
	_, b, err := wc.Read(ctx)
	if err != nil || !strings.Contains(string(b), `"task":`) {
		t.Errorf("WebSocket /mcp through the base_url: %v %.200s", err, b)
	}
	ws := dialEpisode(t, base)
	ws.Write(ctx, websocket.MessageText, []byte(`{"type":"step","data":{"type":"list_tools"}}`))
	_, b, err = ws.Read(ctx)
	if err != nil || !strings.Contains(string(b), `"input_schema"`) {
		t.Errorf("list_tools before a reset through the base_url: %v %.200s", err, b)
	}
}

// tsSDK returns a directory with the official TypeScript MCP SDK
// installed from testdata/mcp-ts (its package-lock.json pins it),
// installing it once per lock file into the test cache. A host without
// Node.js or the npm registry skips, or fails in CI.
func tsSDK(t *testing.T) string {
	t.Helper()
	src := filepath.Join("..", "testdata", "mcp-ts")
	lock, err := os.ReadFile(filepath.Join(src, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, bin := range []string{"node", "npm"} {
		if _, err := exec.LookPath(bin); err != nil {
			testenv.Unavailable(t, bin+" is not installed (apt-get install nodejs npm): the TypeScript MCP SDK test needs it")
		}
	}
	sum := sha256.Sum256(lock)
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "agentpen-test", "mcp-ts-"+hex.EncodeToString(sum[:6]))
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")); err == nil {
		return dir
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "install-")
	if err != nil {
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if tmp, err = os.MkdirTemp(filepath.Dir(dir), "install-"); err != nil {
			t.Fatal(err)
		}
	}
	defer os.RemoveAll(tmp)
	for _, f := range []string{"package.json", "package-lock.json"} {
		b, _ := os.ReadFile(filepath.Join(src, f))
		os.WriteFile(filepath.Join(tmp, f), b, 0o644)
	}
	ctx := testenv.Context(t)
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts")
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		testenv.Unavailable(t, fmt.Sprintf("npm ci of the TypeScript MCP SDK failed (is the npm registry reachable?): %v\n%s", err, out))
	}
	if err := os.Rename(tmp, dir); err != nil && !errors.Is(err, os.ErrExist) {
		if _, serr := os.Stat(dir); serr != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestProxyMCPTypeScript: the official TypeScript SDK (@modelcontextprotocol/sdk
// from npm, pinned by testdata/mcp-ts) connects to <base_url>/mcp, lists
// the tools and plays an oracle episode to reward 1.0 (the Go test
// drives testdata/mcp-ts/bridge.mjs one call at a time).
func TestProxyMCPTypeScript(t *testing.T) {
	const task = "software/median@2"
	dir := tsSDK(t)
	_, base := newMCPFixture(t, task)
	script, err := filepath.Abs(filepath.Join("..", "testdata", "mcp-ts", "bridge.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	// The script imports the SDK from its own directory's node_modules.
	bridge := filepath.Join(dir, "bridge.mjs")
	b, _ := os.ReadFile(script)
	if err := os.WriteFile(bridge, b, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t)
	cmd := exec.CommandContext(ctx, "node", bridge, base+"/mcp")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	lines.Buffer(make([]byte, 1<<20), 16<<20)
	next := func() []byte {
		t.Helper()
		if !lines.Scan() {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("the TypeScript client stopped: %v\n%s", lines.Err(), stderr.String())
		}
		return lines.Bytes()
	}
	var listed struct {
		Tools []struct {
			Name        string         `json:"name"`
			InputSchema map[string]any `json:"inputSchema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(next(), &listed); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range listed.Tools {
		names = append(names, tool.Name)
		if tool.InputSchema["type"] != "object" {
			t.Errorf("%s: schema %v", tool.Name, tool.InputSchema)
		}
	}
	if !slices.Contains(names, "submit") || len(names) != 7 {
		t.Fatalf("the TypeScript client listed %v", names)
	}
	final := playMCPOracle(t, task, func(tool string, args map[string]any) (mcpOutcome, error) {
		req, _ := json.Marshal(map[string]any{"tool": tool, "args": args})
		if _, err := stdin.Write(append(req, '\n')); err != nil {
			return mcpOutcome{}, err
		}
		var r struct {
			Structured mcpOutcome `json:"structured"`
			IsError    bool       `json:"isError"`
			Error      string     `json:"error"`
		}
		if err := json.Unmarshal(next(), &r); err != nil {
			return mcpOutcome{}, err
		}
		if r.Error != "" {
			return mcpOutcome{}, errors.New(r.Error)
		}
		if r.IsError != (r.Structured.Error != "") {
			t.Errorf("%s: isError %v with error %q", tool, r.IsError, r.Structured.Error)
		}
		return r.Structured, nil
	})
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("the TypeScript client: %v\n%s", err, stderr.String())
	}
	if !final.Done || final.Reward != 1.0 {
		t.Fatalf("final %+v, want done with 1.0", final)
	}
}
