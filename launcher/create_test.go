package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentpen/agentpen/api"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

// mutate decodes the valid spec, lets edit change it, and re-encodes it.
func mutate(edit func(m map[string]any)) []byte {
	var m map[string]any
	json.Unmarshal(specJSON("camp-1", "software/median@7", "sql/top_customer@3"), &m)
	edit(m)
	b, _ := json.Marshal(m)
	return b
}

func ws(m map[string]any, i int) map[string]any {
	return m["workspaces"].([]any)[i].(map[string]any)
}

// TestCreateBadSpec: one case per bad field: 400 for a body that is not a
// spec (JSON that does not parse into one), 422 for a spec that breaks a
// rule, a problem that names the field by its path under body, and
// nothing asked of the adapter.
func TestCreateBadSpec(t *testing.T) {
	notASpec := map[string]bool{"malformed": true, "trailing": true, "wrong_type": true}
	for _, tt := range badSpecs() {
		t.Run(tt.name, func(t *testing.T) {
			be := newFakeBackend(t)
			ts := newTestServer(t, be)
			resp, b := ts.do(t, http.MethodPost, "/v1/campaigns", tt.body, true)
			want := http.StatusUnprocessableEntity
			if notASpec[tt.name] {
				want = http.StatusBadRequest
			}
			if resp.StatusCode != want {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, want, b)
			}
			p := decodeProblem(t, resp, b)
			var got []string
			for _, e := range p.Errors {
				got = append(got, e.Location)
				if e.Message == "" {
					t.Errorf("%s: no message", e.Location)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("locations %v, want %v (%s)", got, tt.want, b)
			}
			if m := be.mutating(); len(m) > 0 {
				t.Errorf("a refused spec reached the adapter: %v", m)
			}
			if resp, b := ts.do(t, http.MethodGet, "/v1/campaigns", nil, true); !strings.Contains(string(b), `"campaigns":[]`) {
				t.Errorf("after a refused create: %d %s", resp.StatusCode, b)
			}
			// Task ids a launcher sent are its own: they go back to it,
			// never to the log.
			if strings.Contains(ts.logs.String(), "nope/") || strings.Contains(ts.logs.String(), "software/") {
				t.Errorf("a task id reached the log: %s", ts.logs.String())
			}
		})
	}
}

// badSpec is a spec with something wrong, and the locations (under
// "body", in order) the API names for it.
type badSpec struct {
	name string
	body []byte
	want []string
}

// badSpecs are the bad specs TestCreateBadSpec sends and
// TestSpecSchemaAgrees holds the JSON Schema to: one case per bad field.
func badSpecs() []badSpec {
	return []badSpec{
		{"malformed", []byte("{\"campaign_id\": \"x\",\n \"server\": {"), []string{"body"}},
		{"trailing", []byte(`{"campaign_id":"x"} {}`), []string{"body"}},
		{"wrong_type", mutate(func(m map[string]any) { m["workspaces"] = "many" }), []string{"body.workspaces"}},
		{"unknown_fields", mutate(func(m map[string]any) {
			m["server"].(map[string]any)["imgae"] = "x"
			ws(m, 1)["taks_id"] = "y"
		}), []string{"body.server.imgae", "body.workspaces[1].taks_id"}},
		{"campaign_id", mutate(func(m map[string]any) { m["campaign_id"] = "has space" }), []string{"body.campaign_id"}},
		{"egress", mutate(func(m map[string]any) { m["egress"] = "open" }), []string{"body.egress"}},
		{"no_workspaces", mutate(func(m map[string]any) { m["workspaces"] = []any{} }), []string{"body.workspaces"}},
		{"server_image_untagged", mutate(func(m map[string]any) { m["server"].(map[string]any)["image"] = "agentpen/workbench" }), []string{"body.server.image"}},
		{"server_image_latest", mutate(func(m map[string]any) { m["server"].(map[string]any)["image"] = "agentpen/workbench:latest" }), []string{"body.server.image"}},
		{"workspace_image", mutate(func(m map[string]any) { ws(m, 1)["image"] = "latest" }), []string{"body.workspaces[1].image"}},
		{"task_id_syntax", mutate(func(m map[string]any) { ws(m, 0)["task_id"] = "../etc" }), []string{"body.workspaces[0].task_id"}},
		{"task_id_unknown", mutate(func(m map[string]any) { ws(m, 1)["task_id"] = "software/nonexistent" }), []string{"body.workspaces[1].task_id"}},
		{"task_id_variant", mutate(func(m map[string]any) { ws(m, 0)["task_id"] = "software/median@x" }), []string{"body.workspaces[0].task_id"}},
		{"task_ids_unknown_both", mutate(func(m map[string]any) {
			ws(m, 0)["task_id"] = "nope/one"
			ws(m, 1)["task_id"] = "nope/two"
		}), []string{"body.workspaces[0].task_id", "body.workspaces[1].task_id"}},
		{"plan_and_catalogue", mutate(func(m map[string]any) {
			m["egress"] = "open"
			ws(m, 1)["task_id"] = "nope/two"
		}), []string{"body.egress", "body.workspaces[1].task_id"}},
		{"attempt_id", mutate(func(m map[string]any) { ws(m, 0)["attempt_id"] = "a b" }), []string{"body.workspaces[0].attempt_id"}},
		{"extra_env_secret", mutate(func(m map[string]any) { ws(m, 0)["extra_env"] = map[string]any{"MY_TOKEN": "x"} }), []string{"body.workspaces[0].extra_env.MY_TOKEN"}},
		// The service's own token (or any AGENTPEN_* variable but the
		// grader key) copied into the grader: it was, and attested ok.
		{"secret_env_service_token", mutate(func(m map[string]any) { m["server"].(map[string]any)["secret_env"] = []any{"AGENTPEN_SERVE_TOKEN"} }), []string{"body.server.secret_env[0]"}},
		{"api_key_env_service_token", mutate(func(m map[string]any) { m["server"].(map[string]any)["api_key_env"] = "AGENTPEN_SERVE_TOKEN" }), []string{"body.server.api_key_env"}},
		{"labels_reserved", mutate(func(m map[string]any) { m["labels"] = map[string]any{"io.agentpen.role": "x"} }), []string{"body.labels"}},
		{"publish_internal", mutate(func(m map[string]any) { m["server"].(map[string]any)["publish_loopback"] = "127.0.0.1:18080" }), []string{"body.server.publish_loopback"}},
		{"server_port", mutate(func(m map[string]any) { m["server"].(map[string]any)["port"] = 70000 }), []string{"body.server.port"}},
		{"ttl_negative", mutate(func(m map[string]any) { m["ttl_seconds"] = -1 }), []string{"body.ttl_seconds"}},
		{"ttl_too_short", mutate(func(m map[string]any) { m["ttl_seconds"] = 5 }), []string{"body.ttl_seconds"}},
		{"idle_too_long", mutate(func(m map[string]any) { m["idle_timeout_seconds"] = campaign.MaxIdleTimeoutSeconds + 1 }), []string{"body.idle_timeout_seconds"}},
		{"duplicate_workspace", mutate(func(m map[string]any) {
			ws(m, 1)["task_id"] = ws(m, 0)["task_id"]
			ws(m, 1)["attempt_id"] = ws(m, 0)["attempt_id"]
		}), []string{"body.workspaces[1]"}},
	}
}

// TestCreateTooLarge: a body over the spec's limit is refused.
func TestCreateTooLarge(t *testing.T) {
	be := newFakeBackend(t)
	ts := newTestServer(t, be)
	big := []byte(`{"campaign_id":"x","labels":{"a":"` + strings.Repeat("a", campaign.MaxSpecBytes) + `"}}`)
	resp, b := ts.do(t, http.MethodPost, "/v1/campaigns", big, true)
	if resp.StatusCode != http.StatusRequestEntityTooLarge && resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	decodeProblem(t, resp, b)
	if m := be.mutating(); len(m) > 0 {
		t.Errorf("reached the adapter: %v", m)
	}
}

// TestCreateGetDelete walks one campaign through the API on the fake
// adapter: 201 with base_urls, get, list, workspaces, delete (the cleanup
// report), then removed.
func TestCreateGetDelete(t *testing.T) {
	checkNoLeaks(t)
	be := newFakeBackend(t)
	ts := newTestServer(t, be)
	resp, b := ts.do(t, http.MethodPost, "/v1/campaigns", specJSON("camp-1", "software/median@7", "sql/top_customer@3"), true)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	if resp.Header.Get("Location") != "/v1/campaigns/camp-1" {
		t.Errorf("Location %q", resp.Header.Get("Location"))
	}
	var v api.CampaignView
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if v.State != campaign.StatusReady.String() || len(v.Workspaces) != 2 || v.Attestation == nil || !v.Attestation.OK {
		t.Fatalf("view %+v", v)
	}
	for i, w := range v.Workspaces {
		if !strings.HasPrefix(w.BaseURL, ts.ts.URL+episodePrefix+"/") || len(w.BaseURL) != len(ts.ts.URL+episodePrefix+"/")+43 {
			t.Errorf("workspace %d base_url %q", i, w.BaseURL)
		}
		if !strings.HasPrefix(w.AgentID, "agent-") || w.Index != i {
			t.Errorf("workspace %d: %+v", i, w)
		}
	}
	if v.Workspaces[0].TaskID != "software/median@7" {
		t.Errorf("task %q", v.Workspaces[0].TaskID)
	}
	// A second create of the same id is a conflict.
	if resp, b := ts.do(t, http.MethodPost, "/v1/campaigns", specJSON("camp-1", "software/median@7"), true); resp.StatusCode != http.StatusConflict {
		t.Errorf("second create: %d %s", resp.StatusCode, b)
	}
	for _, path := range []string{"/v1/campaigns/camp-1", "/v1/campaigns/camp-1/workspaces", "/v1/campaigns"} {
		resp, b := ts.do(t, http.MethodGet, path, nil, true)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), v.Workspaces[1].BaseURL) {
			t.Errorf("GET %s: %d %s", path, resp.StatusCode, b)
		}
	}
	_, metrics := ts.do(t, http.MethodGet, "/metrics", nil, true)
	for _, want := range []string{"agentpen_campaigns 1\n", "agentpen_workspaces 2\n", `agentpen_bringup_duration_seconds_count{outcome="ready"} 1`,
		"agentpen_live_episodes 0\n", `agentpen_proxy_errors_total{kind="dial"} 0`, `agentpen_http_requests_total{code="201",route="/v1/campaigns"} 1`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	resp, b = ts.do(t, http.MethodDelete, "/v1/campaigns/camp-1", nil, true)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"status":"verified"`) {
		t.Fatalf("delete: %d %s", resp.StatusCode, b)
	}
	_, metrics = ts.do(t, http.MethodGet, "/metrics", nil, true)
	for _, want := range []string{"agentpen_campaigns 0\n", "agentpen_workspaces 0\n", `agentpen_cleanup_duration_seconds_count{status="verified"} 1`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics after delete lack %q", want)
		}
	}
	// Removed: still listed and shown, with its cleanup, and nothing to
	// hand out.
	if resp, b := ts.do(t, http.MethodGet, "/v1/campaigns/camp-1", nil, true); resp.StatusCode != http.StatusOK ||
		!strings.Contains(string(b), `"state":"removed"`) || !strings.Contains(string(b), `"status":"verified"`) || strings.Contains(string(b), "base_url") {
		t.Errorf("GET after delete: %d %s", resp.StatusCode, b)
	}
	resp, b = ts.do(t, http.MethodGet, "/v1/campaigns/camp-1/workspaces", nil, true)
	if p := decodeProblem(t, resp, b); resp.StatusCode != http.StatusConflict || !strings.Contains(p.Detail, "is removed") {
		t.Errorf("workspaces after delete: %d %s", resp.StatusCode, b)
	}
	// A second DELETE answers the stored report and removes nothing.
	before := len(be.mutating())
	if resp, b := ts.do(t, http.MethodDelete, "/v1/campaigns/camp-1", nil, true); resp.StatusCode != http.StatusOK || len(be.mutating()) != before {
		t.Errorf("second delete: %d %s, calls %v", resp.StatusCode, b, be.mutating()[before:])
	}
	if resp, b := ts.do(t, http.MethodGet, "/v1/campaigns/bad%20id", nil, true); resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "path.id") {
		t.Errorf("bad id: %d %s", resp.StatusCode, b)
	}
}

// TestDeleteNotVerified: a cleanup that is not verified is not a
// success: 500, a problem naming the failed check, and the campaign stays
// listed as cleanup_failed with its workspaces revoked.
func TestDeleteNotVerified(t *testing.T) {
	be := newFakeBackend(t)
	ts := newTestServer(t, be)
	resp, b := ts.do(t, http.MethodPost, "/v1/campaigns", specJSON("camp-1", "software/median@7"), true)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	var v api.CampaignView
	json.Unmarshal(b, &v)
	be.mu.Lock()
	be.verified = false
	be.mu.Unlock()
	resp, b = ts.do(t, http.MethodDelete, "/v1/campaigns/camp-1", nil, true)
	if resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("delete: %d %s", resp.StatusCode, b)
	}
	p := decodeProblem(t, resp, b)
	if !strings.Contains(p.Detail, "NOT verified") || len(p.Errors) == 0 || p.Errors[0].Location != "cleanup.labelled_absent" {
		t.Errorf("problem %+v", p)
	}
	resp, b = ts.do(t, http.MethodGet, "/v1/campaigns/camp-1", nil, true)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"state":"cleanup_failed"`) || strings.Contains(string(b), "base_url") {
		t.Errorf("after a failed cleanup: %d %s", resp.StatusCode, b)
	}
	if resp, _ := http.Get(v.Workspaces[0].BaseURL + "/health"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("the workspace is still reachable: %d", resp.StatusCode)
	}
	// A retry that verifies removes it.
	be.mu.Lock()
	be.verified = true
	be.mu.Unlock()
	if resp, b := ts.do(t, http.MethodDelete, "/v1/campaigns/camp-1", nil, true); resp.StatusCode != http.StatusOK {
		t.Errorf("retry: %d %s", resp.StatusCode, b)
	}
}

// TestCreateNotAttested: a campaign that does not attest is removed and
// never handed out: it is listed as removed, with no base_url.
func TestCreateNotAttested(t *testing.T) {
	be := newFakeBackend(t)
	be.attestOK = false
	ts := newTestServer(t, be)
	resp, b := ts.do(t, http.MethodPost, "/v1/campaigns", specJSON("camp-1", "software/median@7"), true)
	if resp.StatusCode != http.StatusInternalServerError || strings.Contains(string(b), "base_url") {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	if got := be.mutating(); !slices.Equal(got, []string{"BringUp camp-1", "Attest camp-1", "Cleanup camp-1"}) {
		t.Errorf("calls %v", got)
	}
	if _, b := ts.do(t, http.MethodGet, "/v1/campaigns", nil, true); !strings.Contains(string(b), `"state":"removed"`) || strings.Contains(string(b), "base_url") {
		t.Errorf("listed: %s", b)
	}
}

// TestCreateClientGone: a client that goes away cancels its bring-up.
func TestCreateClientGone(t *testing.T) {
	be := newFakeBackend(t)
	started, cancelled := make(chan struct{}), make(chan error, 1)
	deadline := testenv.Context(t)
	be.bringUp = func(ctx context.Context) error {
		close(started)
		// Only the cancellation ends it: a bring-up the client's going
		// away does not cancel fails at the test's deadline.
		select {
		case <-ctx.Done():
			cancelled <- ctx.Err()
			return ctx.Err()
		case <-deadline.Done():
			cancelled <- nil
			return nil
		}
	}
	ts := newTestServer(t, be)
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.ts.URL+"/v1/campaigns", strings.NewReader(string(specJSON("camp-1", "software/median@7"))))
	req.Header.Set("Authorization", "Bearer "+testToken)
	go func() { <-started; cancel() }()
	if _, err := ts.ts.Client().Do(req); !errors.Is(err, context.Canceled) {
		t.Fatalf("request: %v", err)
	}
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Fatalf("the bring-up was not cancelled: %v", err)
	}
}

// TestOperationsSerialised: a delete waits for the create of the same
// campaign; another campaign's create does not.
func TestOperationsSerialised(t *testing.T) {
	be := newFakeBackend(t)
	release := make(chan struct{})
	var once sync.Once
	first := make(chan struct{})
	be.bringUp = func(ctx context.Context) error {
		isFirst := false
		once.Do(func() { isFirst = true; close(first) })
		if isFirst {
			<-release
		}
		return nil
	}
	ts := newTestServer(t, be)
	done := make(chan int, 3)
	go func() {
		resp, _ := ts.do(t, http.MethodPost, "/v1/campaigns", specJSON("camp-a", "software/median@7"), true)
		done <- resp.StatusCode
	}()
	<-first
	// Another campaign proceeds while camp-a is held.
	if resp, b := ts.do(t, http.MethodPost, "/v1/campaigns", specJSON("camp-b", "software/median@7"), true); resp.StatusCode != http.StatusCreated {
		t.Fatalf("camp-b: %d %s", resp.StatusCode, b)
	}
	go func() {
		resp, _ := ts.do(t, http.MethodDelete, "/v1/campaigns/camp-a", nil, true)
		done <- resp.StatusCode
	}()
	select {
	case code := <-done:
		t.Fatalf("an operation on camp-a ended (%d) while its create was held", code)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	got := []int{<-done, <-done}
	slices.Sort(got)
	if !slices.Equal(got, []int{http.StatusOK, http.StatusCreated}) {
		t.Fatalf("statuses %v, want the create then the delete", got)
	}
	if calls := be.mutating(); slices.Index(calls, "Cleanup camp-a") < slices.Index(calls, "Attest camp-a") {
		t.Errorf("the delete ran before the create finished: %v", calls)
	}
}
