package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

// logLines decodes serve's JSON log: every line one JSON object.
func logLines(t *testing.T, stderr string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(stderr))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("a log line that is not JSON: %q", sc.Text())
		}
		out = append(out, m)
	}
	return out
}

// findLine is the first line whose fields hold every key and value of want.
func findLine(lines []map[string]any, want map[string]any) map[string]any {
	for _, l := range lines {
		ok := true
		for k, v := range want {
			if v == nil {
				_, ok = l[k]
			} else {
				ok = fmt.Sprint(l[k]) == fmt.Sprint(v)
			}
			if !ok {
				break
			}
		}
		if ok {
			return l
		}
	}
	return nil
}

// TestServeLogCanary: agentpen serve --log-format json, on the real
// daemon, through a create, an episode's calls, an attestation, a delete
// and requests refused for every reason, logs its start (address, state
// root, version), each operation (campaign, outcome, duration), each
// refused request with its class, and its stop; and no line holds the
// bearer token, the grader's key, the server key, a capability or a task
// id (the canaries are all unique to this run).
func TestServeLogCanary(t *testing.T) {
	testenv.RequireRoot(t)
	e := newCLIEnv(t)
	apiKey := "canary-grader-key-" + fmt.Sprint(time.Now().UnixNano())
	e.env["AGENTPEN_API_KEY"] = apiKey
	id := fmt.Sprintf("serve-log-%d", time.Now().UnixNano())
	t.Cleanup(func() { e.run("down", id) })
	taskIDs := []string{"software/median@2", "sql/top_customer@3"}
	s := campaign.CampaignSpec{CampaignID: id, Server: campaign.ServerSpec{Image: testenv.WorkbenchImage()}}
	for i, tid := range taskIDs {
		s.Workspaces = append(s.Workspaces, campaign.WorkspaceSpec{TaskID: tid, AttemptID: fmt.Sprint(i), Image: testenv.WorkbenchImage()})
	}
	spec, _ := json.Marshal(s)
	p := startServe(t, e, "--log-format", "json")

	// Refused: no token, a bad token, a spec naming an unknown task, an
	// unknown capability, a campaign that is not there.
	good := p.token
	p.token = "wrong-token-0123456789"
	if code, _ := p.call(http.MethodGet, "/v1/campaigns", nil); code != http.StatusUnauthorized {
		t.Fatalf("a wrong token: %d", code)
	}
	p.token = good
	bad := strings.Replace(string(spec), "software/median@2", "nope/canary-task-9f3e", 1)
	if code, b := p.call(http.MethodPost, "/v1/campaigns", []byte(bad)); code != http.StatusUnprocessableEntity {
		t.Fatalf("an unknown task: %d %s", code, b)
	}
	if code, _ := p.call(http.MethodGet, "/episode/AAAAcanaryCapabilityAAAAAAAAAAAAAAAAAAAAAAA/health", nil); code != http.StatusNotFound {
		t.Fatalf("an unknown capability: %d", code)
	}
	if code, _ := p.call(http.MethodGet, "/v1/campaigns/not-here", nil); code != http.StatusNotFound {
		t.Fatalf("a campaign not there: %d", code)
	}
	// What a launcher does: a task as the agent sees it, a create, the
	// episode's calls through base_urls, an attestation, a delete.
	if code, _ := p.call(http.MethodGet, "/v1/tasks/"+strings.Replace(taskIDs[0], "/", "%2F", 1), nil); code != http.StatusOK {
		t.Fatalf("GET a task: %d", code)
	}
	code, b := p.call(http.MethodPost, "/v1/campaigns", spec)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, b)
	}
	v := p.view(id)
	var caps []string
	for _, ws := range v.Workspaces {
		caps = append(caps, ws.BaseURL[strings.LastIndexByte(ws.BaseURL, '/')+1:])
		if code, b := p.call(http.MethodPost, ws.BaseURL+"/reset", []byte(`{"task_id":"`+taskIDs[1]+`"}`)); code != http.StatusOK && code != http.StatusUnprocessableEntity {
			t.Fatalf("reset through %s: %d %s", ws.BaseURL, code, b)
		}
	}
	if code, b := p.call(http.MethodPost, "/v1/campaigns/"+id+"/attestation", nil); code != http.StatusOK {
		t.Fatalf("attest: %d %s", code, b)
	}
	if code, b := p.call(http.MethodDelete, "/v1/campaigns/"+id, nil); code != http.StatusOK {
		t.Fatalf("delete: %d %s", code, b)
	}
	if code := p.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("serve exit %d:\n%s", code, p.stderr.String())
	}
	out := p.stderr.String()
	lines := logLines(t, out)

	serverKey, err := os.ReadFile(filepath.Join(e.state, "keys", "server.key"))
	if err != nil {
		t.Fatal(err)
	}
	canaries := map[string]string{"bearer token": good, "grader key": apiKey, "server key": strings.TrimSpace(string(serverKey)),
		"unknown task id": "nope/canary-task-9f3e", "unknown capability": "AAAAcanaryCapability"}
	for _, tid := range taskIDs {
		canaries["task id "+tid] = tid
		canaries["task family "+tid] = tid[:strings.IndexByte(tid, '@')]
	}
	for i, c := range caps {
		canaries[fmt.Sprint("capability ", i)] = c
	}
	for what, c := range canaries {
		if strings.Contains(out, c) {
			t.Errorf("the log holds the %s (%.8q...)", what, c)
		}
	}
	for _, want := range []map[string]any{
		{"msg": "agentpen serve started", "listen": nil, "state_root": e.state, "version": nil},
		{"msg": "create", "campaign": id, "outcome": "ready", "duration_ms": nil},
		{"msg": "attest", "campaign": id, "outcome": "ok", "duration_ms": nil},
		{"msg": "delete", "campaign": id, "outcome": "verified", "duration_ms": nil},
		{"msg": "http", "status": 401, "refused": "unauthorized"},
		{"msg": "http", "status": 422, "refused": "invalid", "route": "/v1/campaigns"},
		{"msg": "http", "status": 404, "refused": "not_found", "route": "/episode/{capability}/health"},
		{"msg": "http", "status": 404, "refused": "not_found", "route": "/v1/campaigns/{id}"},
		{"msg": "agentpen serve stopped"},
	} {
		if findLine(lines, want) == nil {
			t.Errorf("no log line with %v", want)
		}
	}
	if t.Failed() {
		t.Logf("serve's log:\n%s", out)
	}
}
