package docker_test

import (
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/adapter/docker"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/workbenchtest"
	"github.com/agentpen/agentpen/workbench/client"
)

// boundAgent is the hostile agent that wants another task
// (testdata/agents/served/bound_task.py).
const boundAgent = "../../testdata/agents/served/bound_task.py"

// checkBound proves a workspace of a real campaign serves only its task
// (bound by the bind file agentpen wrote in its run directory): on its
// unix socket, as a launcher on the host reaches it, a reset naming
// another task is refused over HTTP and WebSocket with an error saying
// the workspace is bound, and a bare one plays its own; and agent code
// inside the workspace can neither read the bind file nor get a reset of
// another task from the episode server.
func checkBound(t *testing.T, ws adapter.Workspace, bound, other string) {
	t.Helper()
	hc := docker.UnixHTTPClient(ws.Socket, 30*time.Second)
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
	ctx := t.Context()
	s := workbenchtest.Dial(t, ctx, ws.Socket)
	if _, err := s.Reset(ctx, client.ResetOptions{TaskID: other}); err == nil || !strings.Contains(err.Error(), "bound to its task") {
		t.Errorf("WS reset naming %s on %s's socket: %v, want refused as bound", other, ws.AgentID, err)
	}
	r, err := s.Reset(ctx, client.ResetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Metadata["task_id"] != bound {
		t.Errorf("a bare WS reset on %s's socket played %v, want %s", ws.AgentID, r.Metadata["task_id"], bound)
	}
	src, err := os.ReadFile(boundAgent)
	if err != nil {
		t.Fatal(err)
	}
	code := strings.NewReplacer("{{SOCKET}}", campaign.WorkbenchSocket, "{{BIND_FILE}}", campaign.WorkbenchTaskFile,
		"{{OTHER_TASK}}", other, "{{TCP}}", "127.0.0.1:1").Replace(string(src))
	r, err = s.Step(ctx, "run_python", workbenchtest.Args(map[string]any{"code": code}))
	if err != nil || r.Observation.Error != "" {
		t.Fatalf("run_python: %v %+v", err, r)
	}
	res := r.Observation
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
