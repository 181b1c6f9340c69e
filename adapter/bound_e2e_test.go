package adapter_test

import (
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/campaign"
)

// boundAgent is the hostile agent that wants another task
// (testdata/agents/served/bound_task.py).
const boundAgent = "../testdata/agents/served/bound_task.py"

// checkBound proves a workspace of a real campaign serves only its task
// (bound by the bind file agentpen wrote in its run directory): on its
// unix socket, as a launcher on the host reaches it, a reset naming
// another task is refused over HTTP and WebSocket with an error saying
// the workspace is bound, and a bare one plays its own; and agent code
// inside the workspace can neither read the bind file nor get a reset of
// another task from the episode server.
func checkBound(t *testing.T, ws adapter.Workspace, bound, other string) {
	t.Helper()
	hc := adapter.UnixHTTPClient(ws.Socket, 30*time.Second)
	defer hc.CloseIdleConnections()
	for _, tt := range []struct{ body, want string }{
		{`{"task_id":"` + other + `"}`, "bound to its task"},
		{`{"seed":5}`, `"task_id":"` + bound + `"`},
	} {
		resp, err := hc.Post("http://workbench/reset", "application/json", strings.NewReader(tt.body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), tt.want) {
			t.Errorf("HTTP /reset %s on %s's socket: %d %.300s, want %q", tt.body, ws.AgentID, resp.StatusCode, b, tt.want)
		}
	}
	s, err := dialSession(t, t.Context(), ws.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	if _, err := s.reset(other); err == nil || !strings.Contains(err.Error(), "bound to its task") {
		t.Errorf("WS reset naming %s on %s's socket: %v, want refused as bound", other, ws.AgentID, err)
	}
	d, err := s.call(map[string]any{"type": "reset", "data": map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if md, _ := d["metadata"].(map[string]any); md["task_id"] != bound {
		t.Errorf("a bare WS reset on %s's socket played %v, want %s", ws.AgentID, md["task_id"], bound)
	}
	src, err := os.ReadFile(boundAgent)
	if err != nil {
		t.Fatal(err)
	}
	code := strings.NewReplacer("{{SOCKET}}", campaign.WorkbenchSocket, "{{BIND_FILE}}", campaign.WorkbenchTaskFile,
		"{{OTHER_TASK}}", other, "{{TCP}}", "127.0.0.1:1").Replace(string(src))
	res, err := s.step("run_python", map[string]any{"code": code})
	if err != nil || res.Error != "" {
		t.Fatalf("run_python: %v %q", err, res.Error)
	}
	t.Logf("agent code in %s printed:\n%s", ws.AgentID, res.Output)
	if !strings.Contains(res.Output, "bind file: denied 13") || !strings.Contains(res.Output, "unix ws:") {
		t.Errorf("the agent did not try (or was not denied by permissions): %q", res.Output)
	}
	for _, bad := range []string{"BIND READ", "LISTED", "SERVED", "answered", bound} {
		if strings.Contains(res.Output, bad) {
			t.Errorf("agent code in %s got through (%q)", ws.AgentID, bad)
		}
	}
}
