package api

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
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
	"github.com/agentpen/agentpen/internal/testenv"
)

// testToken is the bearer token of the unit tests' servers.
const testToken = "test-token-0123456789abcdef"

// fakeImage is a well-formed image pin (nothing is pulled or created).
var fakeImage = "sha256:" + strings.Repeat("ab", 32)

// fakeBackend is the adapter as the service sees it, with no daemon: it
// keeps real state directories (journal, spec, attestation.json,
// cleanup.json) in a state root of its own, which the real adapter reads
// back (State, Campaigns, CampaignDir), so what the service derives from
// the journal is tested on real journals. Bring-up makes a plan and gives
// each workspace the socket sockets returns (a fake workbench the test
// serves); every call is counted.
type fakeBackend struct {
	dir     string
	files   *adapter.Adapter // reads the state root; never dials a daemon
	sockets func(campaignID string, i int) string

	mu       sync.Mutex
	calls    []string
	up       map[string]*adapter.Campaign // the latest bring-up of each id
	attestOK bool
	verified bool
	bringUp  func(ctx context.Context) error // nil: succeed at once
}

func newFakeBackend(t *testing.T) *fakeBackend {
	dir := t.TempDir()
	return &fakeBackend{dir: dir, files: &adapter.Adapter{StateRoot: dir}, up: map[string]*adapter.Campaign{}, attestOK: true, verified: true,
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
	f.mu.Lock()
	defer f.mu.Unlock()
	p, err := f.begin(spec)
	if err != nil {
		return nil, err
	}
	if err := f.createAll(p, len(p.Agents), true); err != nil {
		return nil, err
	}
	c := &adapter.Campaign{Plan: p, Dir: f.CampaignDir(spec.CampaignID)}
	for i, ag := range p.Agents {
		c.Workspaces = append(c.Workspaces, adapter.Workspace{AgentID: ag.AgentID, Socket: f.sockets(spec.CampaignID, i)})
	}
	f.up[spec.CampaignID] = c
	return c, nil
}

// BringUpAttested is BringUp then Attest, as the adapter's.
func (f *fakeBackend) BringUpAttested(ctx context.Context, spec campaign.CampaignSpec, opts adapter.AttestOptions) (*adapter.Campaign, *attest.Report, error) {
	c, err := f.BringUp(ctx, spec)
	if err != nil {
		return nil, nil, err
	}
	rep, err := f.Attest(ctx, spec.CampaignID, opts)
	return c, rep, err
}

// begin refuses an id with live resources (as the adapter does, in its
// words), writes the spec and opens the next generation. f.mu is held.
func (f *fakeBackend) begin(spec campaign.CampaignSpec) (*campaign.Plan, error) {
	p, err := campaign.NewPlan(spec)
	if err != nil {
		return nil, err
	}
	gen := 1
	if st, err := f.State(spec.CampaignID); err == nil {
		if live := st.Live(); len(live) > 0 {
			return nil, fmt.Errorf("campaign %q %w: its generation %d has %d resources not verified removed (journal in %s); run agentpen down %s first",
				spec.CampaignID, adapter.ErrCampaignExists, st.Latest().N, len(live), st.Dir, spec.CampaignID)
		}
		gen = st.Latest().N + 1
	}
	p.Bind(gen, campaign.NewInstance())
	dir := f.CampaignDir(spec.CampaignID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	b, _ := json.Marshal(spec)
	if err := os.WriteFile(filepath.Join(dir, adapter.SpecFile), b, 0o600); err != nil {
		return nil, err
	}
	return p, f.journal(p.CampaignID, campaign.Record{Op: campaign.OpBegin, Gen: gen, Instance: p.Instance})
}

// createAll journals the grader and the first n workspaces as created,
// and the ready note when ready; with n < len(p.Agents) the next
// workspace's container is an intent only (a bring-up killed there).
func (f *fakeBackend) createAll(p *campaign.Plan, n int, ready bool) error {
	g := p.Generation
	created := func(kind campaign.Kind, role, name, id string, labels map[string]string) []campaign.Record {
		return []campaign.Record{
			{Op: campaign.OpIntent, Gen: g, Kind: kind, Role: role, Name: name, Labels: labels},
			{Op: campaign.OpCreated, Gen: g, Kind: kind, Role: role, Name: name, ID: id, Labels: labels},
		}
	}
	runDir := filepath.Join(f.dir, "run", p.Instance)
	recs := created(campaign.KindDir, campaign.RoleServer, "grader", filepath.Join(runDir, "grader"), nil)
	recs = append(recs, created(campaign.KindContainer, campaign.RoleServer, p.Server.Name, randID(), nil)...)
	for i, ag := range p.Agents {
		if i == n {
			recs = append(recs, campaign.Record{Op: campaign.OpIntent, Gen: g, Kind: campaign.KindContainer, Role: campaign.RoleWork, Name: ag.Name})
			break
		}
		recs = append(recs, created(campaign.KindDir, campaign.RoleWork, ag.AgentID, filepath.Join(runDir, ag.AgentID), nil)...)
		recs = append(recs, created(campaign.KindContainer, campaign.RoleWork, ag.Name, randID(), map[string]string{campaign.LabelUIDBlock: "100000"})...)
	}
	if ready {
		recs = append(recs, campaign.Record{Op: campaign.OpNote, Gen: g, Note: "ready"})
	}
	return f.journal(p.CampaignID, recs...)
}

func randID() string {
	b := make([]byte, 32)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// journal appends records to the campaign's journal.
func (f *fakeBackend) journal(id string, recs ...campaign.Record) error {
	j, err := campaign.OpenJournal(f.CampaignDir(id))
	if err != nil {
		return err
	}
	defer j.Close()
	for _, r := range recs {
		if err := j.Append(r); err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeBackend) Attest(ctx context.Context, id string, _ adapter.AttestOptions) (*attest.Report, error) {
	f.record("Attest " + id)
	f.mu.Lock()
	rep := &attest.Report{Schema: attest.Schema, CampaignID: id, OK: f.attestOK, FailedChecks: []string{}, AttestedAt: time.Now()}
	f.mu.Unlock()
	if !rep.OK {
		rep.FailedChecks = []string{"hardening.server.caps"}
	}
	b, err := rep.Marshal()
	if err != nil {
		return nil, err
	}
	return rep, os.WriteFile(filepath.Join(f.CampaignDir(id), attest.FileName), b, 0o600)
}

func (f *fakeBackend) Cleanup(ctx context.Context, id string) (*cleanup.Report, error) {
	f.record("Cleanup " + id)
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.State(id); err != nil {
		return nil, err
	}
	if !f.verified {
		rep, err := f.writeCleanup(id, 0)
		if err != nil {
			return nil, err
		}
		return rep, fmt.Errorf("campaign %q: %w: %s", id, adapter.ErrNotVerified, strings.Join(rep.FailedChecks, ", "))
	}
	return f.writeCleanup(id, -1)
}

// writeCleanup journals the removal of up to n live resources (-1: all),
// then, when all are gone, the verdict, and writes cleanup.json, as
// adapter.Cleanup does; n 0 is a cleanup that removed nothing and failed.
func (f *fakeBackend) writeCleanup(id string, n int) (*cleanup.Report, error) {
	st, err := f.State(id)
	if err != nil {
		return nil, err
	}
	rep := &cleanup.Report{Schema: cleanup.Schema, CampaignID: id, Status: cleanup.Verified, OK: true, FailedChecks: []string{}, Removed: []cleanup.Entry{}}
	for _, g := range st.Generations {
		rep.Generations = append(rep.Generations, cleanup.GenerationInfo{N: g.N, Instance: g.Instance})
	}
	var recs []campaign.Record
	for i, r := range st.Live() {
		if i == n {
			break
		}
		recs = append(recs, campaign.Record{Op: campaign.OpRemoved, Gen: r.Gen, Kind: r.Kind, Role: r.Role, Name: r.Name, ID: r.ID})
		rep.Removed = append(rep.Removed, cleanup.Entry{Kind: r.Kind, Role: r.Role, Name: r.Name, ID: r.ID, Gen: r.Gen})
	}
	if n >= 0 && n < len(st.Live()) {
		if n > 0 {
			return rep, f.journal(id, recs...) // interrupted: no verdict, no report
		}
		rep.Status, rep.OK, rep.FailedChecks = cleanup.Failed, false, []string{"labelled_absent"}
	}
	recs = append(recs, campaign.Record{Op: campaign.OpNote, Note: "cleanup " + string(rep.Status)})
	if err := f.journal(id, recs...); err != nil {
		return nil, err
	}
	b, _ := json.Marshal(rep)
	return rep, os.WriteFile(filepath.Join(f.CampaignDir(id), adapter.CleanupReportFile), b, 0o600)
}

// killedCreate leaves the campaign as a bring-up killed halfway leaves
// it: the grader and its first workspace created, the next workspace's
// container an intent, no ready note.
func (f *fakeBackend) killedCreate(t *testing.T, spec []byte) string {
	t.Helper()
	var s campaign.CampaignSpec
	if err := json.Unmarshal(spec, &s); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	p, err := f.begin(s)
	if err == nil {
		err = f.createAll(p, 1, false)
	}
	if err != nil {
		t.Fatal(err)
	}
	return s.CampaignID
}

// downBehind removes the campaign as agentpen down does, behind the
// service's back: every live resource journalled removed, the verdict,
// cleanup.json.
func (f *fakeBackend) downBehind(t *testing.T, id string) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.writeCleanup(id, -1); err != nil {
		t.Fatal(err)
	}
}

// interruptedDown leaves the campaign as a removal killed halfway leaves
// it: its first two live resources (the grader's directory and
// container) journalled removed, no verdict.
func (f *fakeBackend) interruptedDown(t *testing.T, id string) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.writeCleanup(id, 2); err != nil {
		t.Fatal(err)
	}
}

// Load returns the latest bring-up's campaign (its fake sockets) when the
// journal says it is up, as adapter.Load does from the files.
func (f *fakeBackend) Load(id string) (*adapter.Campaign, error) {
	f.record("Load " + id)
	st, err := f.State(id)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.up[id]
	g := st.Latest()
	if !st.Ready || len(g.Live()) == 0 || c == nil || c.Plan.Instance != g.Instance {
		return nil, fmt.Errorf("campaign %q generation %d: %w", id, g.N, adapter.ErrNotUp)
	}
	return c, nil
}

func (f *fakeBackend) Campaigns() ([]adapter.CampaignState, error) { return f.files.Campaigns() }

// State is the campaign's journal state (adapter.ErrNoCampaign when it
// has none), read from the files each time.
func (f *fakeBackend) State(id string) (adapter.CampaignState, error) { return f.files.State(id) }

func (f *fakeBackend) CampaignDir(id string) string { return f.files.CampaignDir(id) }

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
		// Until the test's deadline: goroutines end a moment after the
		// test, later on a loaded machine.
		var leaked []string
		if !testenv.Until(t, func() bool { leaked = leakedGoroutines(); return len(leaked) == 0 }) {
			t.Errorf("%d goroutines leaked:\n%s", len(leaked), strings.Join(leaked, "\n\n"))
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
