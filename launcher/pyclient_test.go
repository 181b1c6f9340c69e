package launcher

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentpen/agentpen/api"
	"github.com/agentpen/agentpen/events"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/store"
	"github.com/agentpen/agentpen/workbench/results"
)

// pyClient runs agentpen-client from this tree (python3 -m
// agentpen_client, clients/python on the path, nothing installed: the
// installed package is TestPythonPackage's) against url with stdin, env
// (AGENTPEN_TOKEN=token, unless token is "") and args, and returns its
// stdout, stderr and exit status.
func pyClient(t *testing.T, url, token, stdin string, args ...string) (string, string, int) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		testenv.Unavailable(t, "python3: "+err.Error())
	}
	src, err := filepath.Abs(filepath.Join("..", "clients", "python"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), py, append([]string{"-m", "agentpen_client", "--url", url}, args...)...)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+src, "PYTHONDONTWRITEBYTECODE=1", "AGENTPEN_TOKEN=", "AGENTPEN_URL=")
	if token != "" {
		cmd.Env = append(cmd.Env, "AGENTPEN_TOKEN="+token)
	}
	cmd.Stdin = strings.NewReader(stdin)
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

// TestPythonClient: the Python client's command line, from this tree,
// against a service on the fake adapter: create (synchronous and
// asynchronous, then wait), list, get, workspaces, claim, patch,
// keepalive, episodes (every page), play through a base_url (the episode
// client's WebSocket, a 16 MiB observation included), events, delete;
// an error answer is exit 1 with the problem's words, a bad usage exit 2;
// the token is AGENTPEN_TOKEN and never agentpen serve's variable, and
// is never printed.
func TestPythonClient(t *testing.T) {
	f := newProxyFixture(t)
	url := f.ts.URL
	const id = "py-client"
	spec := filepath.Join(t.TempDir(), "spec.json")
	var m map[string]any
	jsonUnmarshal(specJSON(id, "software/median@7"), &m)
	m["pool"] = 1
	os.WriteFile(spec, jsonMarshal(m), 0o600)
	out, errs, code := pyClient(t, url, testToken, "", "create", spec, "--launcher-timeout", "60")
	var v api.CampaignView
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil || v.State != "ready" || len(v.Workspaces) != 1 || v.Lifetime.LauncherTimeoutSeconds != 60 {
		t.Fatalf("create: exit %d %v\n%s%s", code, err, out, errs)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"list"}, `"campaign_id": "py-client"`},
		{[]string{"get", id}, `"state": "ready"`},
		{[]string{"workspaces", id}, v.Workspaces[0].BaseURL},
		{[]string{"patch", id, "--ttl", "7200", "--idle", "600"}, `"ttl_seconds": 7200`},
		{[]string{"keepalive", id}, `"launcher_timeout_seconds": 60`},
		{[]string{"tasks"}, `software/median`},
	} {
		if out, errs, code := pyClient(t, url, testToken, "", c.args...); code != 0 || !strings.Contains(out, c.want) {
			t.Errorf("%v: exit %d, want %s in\n%s%s", c.args, code, c.want, out, errs)
		}
	}
	var rs []store.Result
	for n := range 1100 { // more than one page
		rs = append(rs, fakeResult(0, n, results.EndSubmitted, 1))
	}
	f.be.mu.Lock()
	f.be.pending = map[string][]store.Result{id: rs}
	f.be.mu.Unlock()
	out, errs, code = pyClient(t, url, testToken, "", "episodes", id)
	var eps []store.Result
	if err := json.Unmarshal([]byte(out), &eps); code != 0 || err != nil || len(eps) != 1100 || eps[1099].EpisodeID != "e-0-1099" {
		t.Fatalf("episodes: exit %d %v, %d results\n%s", code, err, len(eps), errs)
	}
	// An episode through the base_url: the proxy binds the reset to the
	// workspace's task; the fake workbench echoes a step; BIG is a 16 MiB
	// answer.
	out, errs, code = pyClient(t, url, "", "reset\nstep read_file {\"path\": \"solution.py\"}\n", "play", v.Workspaces[0].BaseURL)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 || !strings.Contains(lines[0], `"task_id": "software/median@7"`) || !strings.Contains(lines[1], `"path": "solution.py"`) {
		t.Fatalf("play: exit %d\n%s%s", code, out, errs)
	}
	if _, errs, code := pyClient(t, url, "", "reset\n", "play", v.Workspaces[0].BaseURL+"x"); code != 1 || !strings.Contains(errs, "404") || strings.Contains(errs, v.Workspaces[0].BaseURL) {
		t.Fatalf("play of no workspace: exit %d %s", code, errs)
	}
	big := `import sys; sys.path.insert(0, sys.argv[2]); from agentpen_client.websocket import connect
ws = connect(sys.argv[1], "/ws"); ws.send_text("BIG"); m = ws.recv(); print(len(m)); ws.close()`
	src, _ := filepath.Abs(filepath.Join("..", "clients", "python"))
	if b, err := exec.CommandContext(t.Context(), "python3", "-c", big, v.Workspaces[0].BaseURL, src).CombinedOutput(); err != nil || strings.TrimSpace(string(b)) != "16777216" {
		t.Fatalf("a 16 MiB message: %v %s", err, b)
	}

	// A claim (last: the fake binds the pool's task to the first
	// workspace).
	if out, errs, code := pyClient(t, url, testToken, "", "claim", id, "sql/top_customer@3", "--attempt", "p1"); code != 0 || !strings.Contains(out, `"pool": "warm"`) {
		t.Errorf("claim: exit %d\n%s%s", code, out, errs)
	}
	for _, c := range []struct {
		name, token string
		args        []string
		code        int
		want        string
	}{
		{"unknown", testToken, []string{"get", "nope"}, 1, "404 Not Found"},
		{"invalid", testToken, []string{"patch", id, "--ttl", "5"}, 1, "body.ttl_seconds"},
		{"no_token", "", []string{"list"}, 1, "401"},
		{"usage", testToken, []string{"bogus"}, 2, "invalid choice"},
	} {
		if out, errs, code := pyClient(t, url, c.token, "", c.args...); code != c.code || out != "" || !strings.Contains(errs, c.want) {
			t.Errorf("%s: exit %d, want %d and %q\n%s%s", c.name, code, c.code, c.want, out, errs)
		}
	}
	// Serve's variable is not the client's: with it alone, no token.
	cmd := exec.CommandContext(t.Context(), "python3", "-m", "agentpen_client", "--url", url, "list")
	cmd.Env = append(os.Environ(), "PYTHONPATH="+src, "AGENTPEN_TOKEN=", "AGENTPEN_SERVE_TOKEN="+testToken)
	if b, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(b), "401") || strings.Contains(string(b), testToken) {
		t.Fatalf("with AGENTPEN_SERVE_TOKEN only: %v %s", err, b)
	}
	if out, errs, code := pyClient(t, url, testToken, "", "delete", id); code != 0 || !strings.Contains(out, `"status": "verified"`) {
		t.Fatalf("delete: exit %d\n%s%s", code, out, errs)
	}

	// Asynchronous: 202 at once, wait, then the events up to the state.
	os.WriteFile(spec, specJSON("py-async", "software/median@7"), 0o600)
	if out, errs, code := pyClient(t, url, testToken, "", "create", spec, "--async"); code != 0 || !strings.Contains(out, `"state": "creating"`) {
		t.Fatalf("create --async: exit %d\n%s%s", code, out, errs)
	}
	if out, errs, code := pyClient(t, url, testToken, "", "wait", "py-async"); code != 0 || !strings.Contains(out, `"state": "ready"`) {
		t.Fatalf("wait: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = pyClient(t, url, testToken, "", "events", "py-async", "--until-state")
	lines = strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) < 2 || !strings.Contains(lines[len(lines)-1], `"event": "state"`) || !strings.Contains(lines[len(lines)-1], `"state": "ready"`) {
		t.Fatalf("events: exit %d\n%s%s", code, out, errs)
	}
	for _, s := range []string{out, errs} {
		if strings.Contains(s, testToken) {
			t.Fatal("the token was printed")
		}
	}
}

// TestPythonClientResumes: the Python client's event stream, through a
// proxy that drops the connection after a few hundred bytes each time,
// follows a campaign from its start to its removal: every journal event
// once, in order, and the final state, whose stream then ends.
func TestPythonClientResumes(t *testing.T) {
	checkNoLeaks(t)
	be := newFakeBackend(t)
	ts := newTestServer(t, be)
	const id = "py-cut"
	if resp, b := ts.do(t, http.MethodPost, "/v1/campaigns", specJSON(id, "software/median@7", "sql/top_customer@3"), true); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	proxy := newCutProxy(t, ts.ts.Listener.Addr().String())
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	src, _ := filepath.Abs(filepath.Join("..", "clients", "python"))
	cmd := exec.CommandContext(ctx, "python3", "-m", "agentpen_client", "--url", "http://"+proxy.addr, "events", id)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+src, "AGENTPEN_TOKEN="+testToken)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 1<<20)
	var got []events.Event
	var deleted sync.WaitGroup
	for sc.Scan() {
		var ev events.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("%v: %s", err, sc.Bytes())
		}
		got = append(got, ev)
		if ev.Type == events.State && len(got) < 20 {
			// Caught up with a ready campaign: remove it, while the
			// client follows.
			deleted.Go(func() {
				req, _ := http.NewRequest(http.MethodDelete, ts.ts.URL+"/v1/campaigns/"+id, nil)
				req.Header.Set("Authorization", "Bearer "+testToken)
				if resp, err := ts.ts.Client().Do(req); err == nil {
					resp.Body.Close()
				}
			})
		}
	}
	deleted.Wait()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("events: %v\n%s", err, errb.String())
	}
	recs, _ := journalRecords(t, be, id)
	want := events.FromRecords(id, recs)
	var seqs, wantSeqs []int
	for _, ev := range got {
		if ev.Type != events.State {
			seqs = append(seqs, ev.Seq)
		}
	}
	for _, ev := range want {
		wantSeqs = append(wantSeqs, ev.Seq)
	}
	if !slices.Equal(seqs, wantSeqs) {
		t.Fatalf("the client got the journal events %v, the journal holds %v", seqs, wantSeqs)
	}
	if last := got[len(got)-1]; last.Type != events.State || last.State != "removed" {
		t.Fatalf("it ended with %+v", last)
	}
	if n := proxy.conns.Load(); n < 3 {
		t.Fatalf("%d connections: the stream was not cut", n)
	}
	t.Logf("%d events through %d connections", len(got), proxy.conns.Load())
}
