package launcher

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/api"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/store"
	"github.com/agentpen/agentpen/workbench/results"
)

// pyClient runs clients/python/agentpen_client.py against ts with args
// and returns its stdout, stderr and exit status.
func pyClient(t *testing.T, ts *testServer, token string, args ...string) (string, string, int) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		testenv.Unavailable(t, "python3: "+err.Error())
	}
	cmd := exec.CommandContext(t.Context(), py, append([]string{filepath.Join("..", "clients", "python", "agentpen_client.py"), "--url", ts.ts.URL}, args...)...)
	cmd.Env = append(os.Environ(), "AGENTPEN_SERVE_TOKEN="+token, "PYTHONDONTWRITEBYTECODE=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// TestPythonClient: the single-file Python client creates, lists, reads,
// pages the episodes of and deletes a campaign of a fake backend, and
// turns an error answer into exit 1 with the problem's words (and a bad
// token into a 401), never printing the token.
func TestPythonClient(t *testing.T) {
	be := newFakeBackend(t)
	ts := newTestServer(t, be)
	const id = "py-client"
	spec := filepath.Join(t.TempDir(), "spec.json")
	os.WriteFile(spec, specJSON(id, "software/median@7"), 0o600)
	out, errs, code := pyClient(t, ts, testToken, "create", spec)
	var v api.CampaignView
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil || v.State != "ready" || len(v.Workspaces) != 1 {
		t.Fatalf("create: exit %d %v\n%s%s", code, err, out, errs)
	}
	if out, _, code := pyClient(t, ts, testToken, "list"); code != 0 || !strings.Contains(out, `"campaign_id": "py-client"`) {
		t.Fatalf("list: exit %d\n%s", code, out)
	}
	if out, _, code := pyClient(t, ts, testToken, "workspaces", id); code != 0 || !strings.Contains(out, v.Workspaces[0].BaseURL) {
		t.Fatalf("workspaces: exit %d\n%s", code, out)
	}
	var rs []store.Result
	for n := range 1100 { // more than one page
		rs = append(rs, fakeResult(0, n, results.EndSubmitted, 1))
	}
	be.mu.Lock()
	be.pending = map[string][]store.Result{id: rs}
	be.mu.Unlock()
	out, errs, code = pyClient(t, ts, testToken, "episodes", id)
	var eps []store.Result
	if err := json.Unmarshal([]byte(out), &eps); code != 0 || err != nil || len(eps) != 1100 || eps[1099].EpisodeID != "e-0-1099" {
		t.Fatalf("episodes: exit %d %v, %d results\n%s", code, err, len(eps), errs)
	}
	if out, errs, code := pyClient(t, ts, testToken, "get", "nope"); code != 1 || out != "" || !strings.Contains(errs, "404") {
		t.Fatalf("get of an unknown campaign: exit %d\n%s%s", code, out, errs)
	}
	const wrong = "wrong-token-3f9c0a17e5d24b68"
	if out, errs, code := pyClient(t, ts, wrong, "list"); code != 1 || !strings.Contains(errs, "401") || strings.Contains(out+errs, wrong) {
		t.Fatalf("a bad token: exit %d\n%s%s", code, out, errs)
	}
	if out, errs, code := pyClient(t, ts, testToken, "delete", id); code != 0 || !strings.Contains(out, `"status": "verified"`) {
		t.Fatalf("delete: exit %d\n%s%s", code, out, errs)
	}
	// Asynchronous: 202 at once, then the event stream to its end.
	os.WriteFile(spec, specJSON("py-async", "software/median@7"), 0o600)
	if out, errs, code := pyClient(t, ts, testToken, "create", spec, "--async"); code != 0 || !strings.Contains(out, `"state": "creating"`) {
		t.Fatalf("create --async: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = pyClient(t, ts, testToken, "events", "py-async")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) < 2 || !strings.Contains(lines[len(lines)-1], `"event": "state"`) || !strings.Contains(lines[len(lines)-1], `"state": "ready"`) {
		t.Fatalf("events: exit %d\n%s%s", code, out, errs)
	}
	if _, _, code := pyClient(t, ts, testToken, "bogus"); code != 2 {
		t.Fatalf("bad usage: exit %d, want 2", code)
	}
}
