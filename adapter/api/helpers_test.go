package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/cleanup"
	"github.com/agentpen/agentpen/internal/logbuf"
)

// testToken is the bearer token of the unit tests' servers.
const testToken = "test-token-0123456789abcdef"

// fakeImage is a well-formed image pin (nothing is pulled or created).
var fakeImage = "sha256:" + strings.Repeat("ab", 32)

// fakeBackend is the adapter as the service sees it, with no daemon:
// bring-up makes a plan and gives each workspace the socket sockets
// returns (a fake workbench the test serves); every call is counted.
type fakeBackend struct {
	dir     string
	sockets func(campaignID string, i int) string

	mu       sync.Mutex
	calls    []string
	up       map[string]*adapter.Campaign
	attestOK bool
	verified bool
	bringUp  func(ctx context.Context) error // nil: succeed at once
}

func newFakeBackend(t *testing.T) *fakeBackend {
	dir := t.TempDir()
	return &fakeBackend{dir: dir, up: map[string]*adapter.Campaign{}, attestOK: true, verified: true,
		sockets: func(string, int) string { return filepath.Join(dir, "nobody.sock") }}
}

func (f *fakeBackend) record(s string) {
	f.mu.Lock()
	f.calls = append(f.calls, s)
	f.mu.Unlock()
}

func (f *fakeBackend) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeBackend) BringUp(ctx context.Context, spec campaign.CampaignSpec) (*adapter.Campaign, error) {
	f.record("BringUp " + spec.CampaignID)
	if f.bringUp != nil {
		if err := f.bringUp(ctx); err != nil {
			return nil, err
		}
	}
	p, err := campaign.NewPlan(spec)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.up[spec.CampaignID]; ok {
		return nil, fmt.Errorf("campaign %q: %w", spec.CampaignID, adapter.ErrCampaignExists)
	}
	p.Bind(1, campaign.NewInstance())
	c := &adapter.Campaign{Plan: p, Dir: f.CampaignDir(spec.CampaignID)}
	for i, ag := range p.Agents {
		c.Workspaces = append(c.Workspaces, adapter.Workspace{AgentID: ag.AgentID, Socket: f.sockets(spec.CampaignID, i)})
	}
	f.up[spec.CampaignID] = c
	return c, nil
}

func (f *fakeBackend) Attest(ctx context.Context, id string, _ adapter.AttestOptions) (*attest.Report, error) {
	f.record("Attest " + id)
	return &attest.Report{Schema: attest.Schema, CampaignID: id, OK: f.attestOK}, nil
}

func (f *fakeBackend) Cleanup(ctx context.Context, id string) (*cleanup.Report, error) {
	f.record("Cleanup " + id)
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.verified {
		return &cleanup.Report{Schema: cleanup.Schema, CampaignID: id, Status: cleanup.Failed, FailedChecks: []string{"labelled_absent"}},
			fmt.Errorf("campaign %q: %w", id, adapter.ErrNotVerified)
	}
	delete(f.up, id)
	return &cleanup.Report{Schema: cleanup.Schema, CampaignID: id, Status: cleanup.Verified, OK: true, FailedChecks: []string{}}, nil
}

func (f *fakeBackend) Load(id string) (*adapter.Campaign, error) {
	f.record("Load " + id)
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.up[id]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("campaign %q: %w", id, adapter.ErrNoCampaign)
}

func (f *fakeBackend) Campaigns() ([]adapter.CampaignState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []adapter.CampaignState
	for id, c := range f.up {
		out = append(out, adapter.CampaignState{CampaignID: id, Ready: true, Generations: []campaign.Generation{{N: c.Plan.Generation, Instance: c.Plan.Instance,
			Resources: []campaign.Resource{{Kind: campaign.KindContainer, ID: "x"}}}}})
	}
	return out, nil
}

func (f *fakeBackend) CampaignDir(id string) string {
	return filepath.Join(f.dir, "campaigns", campaign.Key(id))
}

// mutating reports the calls that would create or remove something.
func (f *fakeBackend) mutating() []string {
	var out []string
	for _, c := range f.Calls() {
		if strings.HasPrefix(c, "BringUp") || strings.HasPrefix(c, "Cleanup") || strings.HasPrefix(c, "Attest") {
			out = append(out, c)
		}
	}
	return out
}

// testServer is a Server over a fake backend, served by httptest.
type testServer struct {
	*Server
	be   *fakeBackend
	ts   *httptest.Server
	logs *logbuf.Buffer
	key  []byte
}

func newTestServer(t *testing.T, be *fakeBackend) *testServer {
	t.Helper()
	key := bytes.Repeat([]byte{7}, KeyBytes)
	return newTestServerKey(t, be, key)
}

func newTestServerKey(t *testing.T, be *fakeBackend, key []byte) *testServer {
	t.Helper()
	logs := &logbuf.Buffer{}
	ts := httptest.NewUnstartedServer(nil)
	s, err := newServer(Config{Token: []byte(testToken), Key: key, PublicURL: "http://" + ts.Listener.Addr().String(),
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), ShutdownGrace: 5 * time.Second}, be)
	if err != nil {
		t.Fatal(err)
	}
	ts.Config.Handler = s.Handler()
	ts.Start()
	t.Cleanup(func() {
		s.Close(context.Background())
		ts.Close()
	})
	return &testServer{Server: s, be: be, ts: ts, logs: logs, key: key}
}

// do sends a request with the token (auth false: without one).
func (ts *testServer) do(t *testing.T, method, path string, body []byte, auth bool) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, ts.ts.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth {
		req.Header.Set("Authorization", "Bearer "+testToken)
	}
	resp, err := ts.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// problemBody decodes an RFC 9457 problem and checks its content type.
type problemBody struct {
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Errors []struct {
		Message  string `json:"message"`
		Location string `json:"location"`
		Value    any    `json:"value"`
	} `json:"errors"`
}

func decodeProblem(t *testing.T, resp *http.Response, b []byte) problemBody {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
		t.Fatalf("status %d: content type %q, want application/problem+json; body %s", resp.StatusCode, ct, b)
	}
	var p problemBody
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("problem body %s: %v", b, err)
	}
	if p.Status != resp.StatusCode || p.Title != http.StatusText(resp.StatusCode) {
		t.Fatalf("problem %+v does not match status %d", p, resp.StatusCode)
	}
	return p
}

// specJSON is a valid spec of n workspaces on the default tasks.
func specJSON(id string, taskIDs ...string) []byte {
	s := campaign.CampaignSpec{CampaignID: id, Server: campaign.ServerSpec{Image: fakeImage}}
	for i, tid := range taskIDs {
		s.Workspaces = append(s.Workspaces, campaign.WorkspaceSpec{TaskID: tid, AttemptID: fmt.Sprint("a", i), Image: fakeImage})
	}
	b, _ := json.Marshal(s)
	return b
}

// checkNoLeaks fails the test when, after the test and its cleanups,
// goroutines of this package or of the WebSocket library are still
// running (house rule 10).
func checkNoLeaks(t *testing.T) {
	t.Helper()
	t.Cleanup(func() {
		deadline := time.Now().Add(10 * time.Second)
		for {
			leaked := leakedGoroutines()
			if len(leaked) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("%d goroutines leaked:\n%s", len(leaked), strings.Join(leaked, "\n\n"))
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

func leakedGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "testing.tRunner") || strings.Contains(g, "checkNoLeaks") || strings.Contains(g, "leakedGoroutines") {
			continue
		}
		if strings.Contains(g, "agentpen/adapter/api.") || strings.Contains(g, "coder/websocket") {
			out = append(out, g)
		}
	}
	return out
}

// scanFiles fails when any file under dir holds one of the secrets.
func scanFiles(t *testing.T, dir string, secrets ...string) {
	t.Helper()
	filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(path)
		for _, s := range secrets {
			if s != "" && bytes.Contains(b, []byte(s)) {
				t.Errorf("%s holds a secret (%.6s...)", path, s)
			}
		}
		return nil
	})
}
