package launcher

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/api"
	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/cleanup"
	"github.com/agentpen/agentpen/custody"
	"github.com/agentpen/agentpen/internal/testkit/leakcheck"
	"github.com/agentpen/agentpen/internal/testkit/testlog"
	"github.com/agentpen/agentpen/store"
)

// testToken is the bearer token of the unit tests' servers.
const testToken = "test-token-0123456789abcdef-9e2f4a"

// mustTokens parses a token text (testToken alone: the operator's).
func mustTokens(t testing.TB, text string) *Tokens {
	t.Helper()
	toks, err := ParseTokens("test tokens", text)
	if err != nil {
		t.Fatal(err)
	}
	return toks
}

// fakeImage is a well-formed image pin (nothing is pulled or created).
var fakeImage = "sha256:" + strings.Repeat("ab", 32)

// fakeBackend is the adapter as the service sees it, with no daemon: it
// keeps real state directories (journal, specs, reports) in a state root
// of its own (the store), which the service reads back, so what the
// service derives from the journal is tested on real journals. Bring-up
// makes a plan and gives each workspace the socket sockets returns (a
// fake workbench the test serves); every call is counted.
type fakeBackend struct {
	dir     string
	root    *store.Root
	sockets func(campaignID string, i int) string

	mu       sync.Mutex
	calls    []string
	up       map[string]*adapter.Campaign // the latest bring-up of each id
	attestOK bool
	verified bool
	bringUp  func(ctx context.Context) error // nil: succeed at once
	// pending are results the next CollectResults of a campaign stores.
	pending map[string][]store.Result
	// collecting makes collections take turns.
	collecting sync.Mutex
	images     []api.Image
	imageErr   error
	prepare    func(p *campaign.Plan) error // nil: nothing to refuse
	activity   map[string]time.Time         // LastActivity by campaign
	locked     map[string]bool              // campaigns another process holds
	claimGate  func()                       // nil: none; else each Claim calls it first
}

func newFakeBackend(t *testing.T) *fakeBackend {
	dir := t.TempDir()
	root, err := store.CreateRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return &fakeBackend{dir: dir, root: root, up: map[string]*adapter.Campaign{}, attestOK: true, verified: true,
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

// open opens a campaign of the fake's state root.
func (f *fakeBackend) open(id string) (*store.Campaign, error) { return f.root.Open(id) }

// Prepare is the adapter's check before a bring-up: prepare, when set,
// says what it finds.
func (f *fakeBackend) Prepare(ctx context.Context, p *campaign.Plan) error {
	f.mu.Lock()
	prepare := f.prepare
	f.mu.Unlock()
	if prepare != nil {
		return prepare(p)
	}
	return nil
}

// Up brings the plan up (journalled, with fake sockets), attests it and,
// failing closed as adapter.Up does, removes one that did not attest.
func (f *fakeBackend) Up(ctx context.Context, root *store.Root, p *campaign.Plan, opts adapter.UpOptions) (*adapter.UpResult, error) {
	id := p.CampaignID
	f.record("BringUp " + id)
	if f.bringUp != nil {
		if err := f.bringUp(ctx); err != nil {
			return &adapter.UpResult{}, err
		}
	}
	f.mu.Lock()
	err := f.begin(p)
	if err == nil {
		err = f.createAll(p, len(p.Agents), true)
	}
	if err != nil {
		f.mu.Unlock()
		return &adapter.UpResult{}, err
	}
	c := &adapter.Campaign{Plan: p, Dir: f.root.CampaignDir(id)}
	for i, ag := range p.Agents {
		c.Workspaces = append(c.Workspaces, adapter.Workspace{Workspace: api.Workspace{Index: i, AgentID: ag.AgentID, TaskID: ag.Spec.TaskID, Socket: f.sockets(id, i)}})
	}
	f.up[id] = c
	f.mu.Unlock()
	sc, err := f.open(id)
	if err != nil {
		return nil, err
	}
	defer sc.Close()
	rep, path, err := f.Attest(ctx, sc, opts.Attest)
	res := &adapter.UpResult{Campaign: copyCampaign(c), Report: rep, ReportPath: path}
	if err != nil || !rep.OK {
		res.Removal, res.RemovalPath, _ = f.Cleanup(ctx, sc, campaign.ReasonNotAttested)
		return res, fmt.Errorf("campaign %s: %w", id, adapter.ErrNotAttested)
	}
	return res, nil
}

// begin refuses an id with live resources (as the adapter does, in its
// words), writes the spec and opens the next generation. f.mu is held.
func (f *fakeBackend) begin(p *campaign.Plan) error {
	id := p.CampaignID
	gen := 1
	if st, err := f.state(id); err == nil {
		if live := st.Live(); len(live) > 0 {
			return fmt.Errorf("campaign %q %w: its generation %d has %d resources not verified removed (journal in %s); run agentpen down %s first",
				id, adapter.ErrCampaignExists, st.Latest().N, len(live), f.root.CampaignDir(id), id)
		}
		gen = st.Latest().N + 1
	}
	p.Bind(gen, campaign.NewInstance())
	sc, err := f.root.Create(id)
	if err != nil {
		return err
	}
	defer sc.Close()
	if err := sc.WriteSpec(gen, p.Spec); err != nil {
		return err
	}
	recs := []campaign.Record{{Op: campaign.OpBegin, Gen: gen, Instance: p.Instance, Owner: p.Owner}}
	if !p.Lifetime.IsZero() {
		recs = append(recs, p.Lifetime.Record(gen))
	}
	// Through the campaign the spec went into: a new one's directory is
	// put in place by its first record (store.Root.Create).
	return journalIn(sc, recs...)
}

// plan validates a spec as the service does (no catalogue).
func (f *fakeBackend) plan(t *testing.T, spec []byte) *campaign.Plan {
	t.Helper()
	popts, err := f.root.PlanOptions()
	if err != nil {
		t.Fatal(err)
	}
	p, err := campaign.ParseSpec(bytes.NewReader(spec), nil, popts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func adapterUpOptions() adapter.UpOptions { return adapter.UpOptions{} }

func jsonMarshal(v any) []byte { b, _ := json.Marshal(v); return b }

func jsonUnmarshal(b []byte, v any) {
	if err := json.Unmarshal(b, v); err != nil {
		panic(err)
	}
}

// createAll journals the grader and the first n workspaces as created,
// and readiness when ready; with n < len(p.Agents) the next workspace's
// container is an intent only (a bring-up killed there).
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
		recs = append(recs, campaign.Record{Op: campaign.OpAttesting, Gen: g})
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
	sc, err := f.root.Create(id)
	if err != nil {
		return err
	}
	defer sc.Close()
	return journalIn(sc, recs...)
}

// journalIn appends records to the open campaign's journal.
func journalIn(sc *store.Campaign, recs ...campaign.Record) error {
	j, err := sc.OpenJournal()
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

// state reads the campaign's state (store.ErrNoCampaign when it has
// none), from the files each time.
func (f *fakeBackend) state(id string) (store.State, error) {
	sc, err := f.open(id)
	if err != nil {
		return store.State{}, err
	}
	defer sc.Close()
	return sc.Read()
}

// Attest writes a report (ok as attestOK says) and journals its verdict,
// as adapter.Attest does.
func (f *fakeBackend) Attest(ctx context.Context, c *store.Campaign, _ adapter.AttestOptions) (*attest.Report, string, error) {
	f.record("Attest " + c.ID)
	f.mu.Lock()
	rep := &attest.Report{Schema: attest.Schema, CampaignID: c.ID, OK: f.attestOK, FailedChecks: []string{}, AttestedAt: time.Now()}
	f.mu.Unlock()
	// Two checks, as the real report words them: the capabilities fail
	// when the fake is told to fail.
	rep.Hardening.Checks = map[string]attest.Check{
		"server.caps":       {Observed: []string{}, Expected: []string{}, Pass: true},
		"server.privileged": {Observed: false, Expected: false, Pass: true},
	}
	if !rep.OK {
		rep.FailedChecks = []string{"hardening.server.caps"}
		rep.Hardening.Checks["server.caps"] = attest.Check{Observed: []string{"NET_RAW"}, Expected: []string{}, Reason: "the observed value is not the expected one"}
	}
	b, err := rep.Marshal()
	if err != nil {
		return nil, "", err
	}
	st, err := c.Read()
	if err != nil {
		return nil, "", err
	}
	rf, err := c.WriteReport(store.KindAttestation, st.Latest().N, b)
	if err != nil {
		return nil, "", err
	}
	verdict := campaign.AttestOK
	if !rep.OK {
		verdict = campaign.AttestFailed
	}
	return rep, c.ReportPath(rf.Name), f.journal(c.ID, campaign.Record{Op: campaign.OpAttested, Gen: st.Latest().N, Status: verdict, Report: rf.Name, Digest: rf.Digest})
}

func (f *fakeBackend) Cleanup(ctx context.Context, c *store.Campaign, reason string) (*cleanup.Report, string, error) {
	f.record("Cleanup " + c.ID)
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.verified {
		rep, path, err := f.writeCleanup(c.ID, 0, reason)
		if err != nil {
			return nil, "", err
		}
		return rep, path, fmt.Errorf("campaign %q: %w: %s", c.ID, adapter.ErrNotVerified, strings.Join(rep.FailedChecks, ", "))
	}
	return f.writeCleanup(c.ID, -1, reason)
}

// writeCleanup journals the removal of up to n live resources (-1: all),
// then, when all are gone, the verdict and its report, as
// adapter.Cleanup does; n 0 is a cleanup that removed nothing and failed.
func (f *fakeBackend) writeCleanup(id string, n int, reason string) (*cleanup.Report, string, error) {
	st, err := f.state(id)
	if err != nil {
		return nil, "", err
	}
	rep := &cleanup.Report{Schema: cleanup.Schema, CampaignID: id, Status: cleanup.Verified, OK: true, FailedChecks: []string{}, Removed: []cleanup.Entry{}}
	for _, g := range st.Generations {
		rep.Generations = append(rep.Generations, cleanup.GenerationInfo{N: g.N, Instance: g.Instance})
		rep.Generation, rep.Instance = g.N, g.Instance
	}
	recs := []campaign.Record{{Op: campaign.OpRemovalStarted, Reason: reason}}
	for i, r := range st.Live() {
		if i == n {
			break
		}
		recs = append(recs, campaign.Record{Op: campaign.OpRemoved, Gen: r.Gen, Kind: r.Kind, Role: r.Role, Name: r.Name, ID: r.ID})
		rep.Removed = append(rep.Removed, cleanup.Entry{Kind: r.Kind, Role: r.Role, Name: r.Name, ID: r.ID, Gen: r.Gen})
	}
	if n >= 0 && n < len(st.Live()) {
		if n > 0 {
			return rep, "", f.journal(id, recs...) // interrupted: no verdict, no report
		}
		rep.Status, rep.OK, rep.FailedChecks = cleanup.Failed, false, []string{"labelled_absent"}
	}
	sc, err := f.open(id)
	if err != nil {
		return nil, "", err
	}
	defer sc.Close()
	b, _ := json.Marshal(rep)
	rf, err := sc.WriteReport(store.KindCleanup, rep.Generation, b)
	if err != nil {
		return nil, "", err
	}
	recs = append(recs, campaign.Record{Op: campaign.OpCleanup, Status: string(rep.Status), Report: rf.Name, Digest: rf.Digest})
	return rep, sc.ReportPath(rf.Name), f.journal(id, recs...)
}

// killedCreate leaves the campaign as a bring-up killed halfway leaves
// it: the grader and its first workspace created, the next workspace's
// container an intent, no readiness.
func (f *fakeBackend) killedCreate(t *testing.T, spec []byte) string {
	t.Helper()
	p, err := campaign.ParseSpec(bytes.NewReader(spec), nil, campaign.PlanOptions{AgentKey: []byte("fake-backend-agent-key-32-bytes!")})
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	err = f.begin(p)
	if err == nil {
		err = f.createAll(p, 1, false)
	}
	if err != nil {
		t.Fatal(err)
	}
	return p.CampaignID
}

// downBehind removes the campaign as agentpen down does, behind the
// service's back: every live resource journalled removed, the verdict,
// its report.
func (f *fakeBackend) downBehind(t *testing.T, id string) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, _, err := f.writeCleanup(id, -1, campaign.ReasonDown); err != nil {
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
	if _, _, err := f.writeCleanup(id, 2, campaign.ReasonDown); err != nil {
		t.Fatal(err)
	}
}

// Load returns the latest bring-up's campaign (its fake sockets) when the
// journal says it is up, as adapter.Load does from the files.
func (f *fakeBackend) Load(c *store.Campaign) (*adapter.Campaign, error) {
	f.record("Load " + c.ID)
	st, err := c.Read()
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	camp := f.up[c.ID]
	g := st.Latest()
	if !st.Status.Up() || camp == nil || camp.Plan.Instance != g.Instance {
		return nil, fmt.Errorf("campaign %q generation %d: %w", c.ID, g.N, adapter.ErrNotUp)
	}
	return copyCampaign(camp), nil
}

// copyCampaign is c as the adapter answers it: a value of the caller's
// own, which the service appends claimed workspaces to while the fake
// reads its own (concurrent claims share the campaign).
func copyCampaign(c *adapter.Campaign) *adapter.Campaign {
	cc := *c
	cc.Workspaces = slices.Clone(c.Workspaces)
	return &cc
}

// CollectResults stores the campaign's pending results, as the adapter
// stores what its workspaces wrote. Collections take turns, as the
// adapter's do on the results file's lock: one that finds nothing new
// returns after the one that took the results stored them.
func (f *fakeBackend) CollectResults(c *store.Campaign) (adapter.Collected, error) {
	f.collecting.Lock()
	defer f.collecting.Unlock()
	f.mu.Lock()
	rs := f.pending[c.ID]
	delete(f.pending, c.ID)
	f.mu.Unlock()
	if len(rs) == 0 {
		return adapter.Collected{}, nil
	}
	l, err := c.OpenResultsLog()
	if err != nil {
		return adapter.Collected{}, err
	}
	defer l.Close()
	if err := l.Append(rs); err != nil {
		return adapter.Collected{}, err
	}
	return adapter.Collected{New: len(rs), Records: rs}, nil
}

// Images lists the fake daemon's images.
// PlanOptions are the state root's.
func (f *fakeBackend) PlanOptions(root *store.Root) (campaign.PlanOptions, error) {
	return root.PlanOptions()
}

// Dial dials the workspace's socket (each is the test's own server).
func (f *fakeBackend) Dial(ctx context.Context, ws adapter.Workspace) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", ws.Socket)
}

func (f *fakeBackend) Images(context.Context) ([]api.Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.images, f.imageErr
}

// SetLifetime journals the lifetime of an up campaign, as the adapter
// does.
func (f *fakeBackend) SetLifetime(ctx context.Context, c *store.Campaign, l campaign.Lifetime) error {
	f.record("SetLifetime " + c.ID)
	st, err := f.state(c.ID)
	if err != nil {
		return err
	}
	if !st.Status.Up() {
		return fmt.Errorf("campaign %q: %w", c.ID, adapter.ErrNotUp)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.journal(c.ID, l.Record(st.Latest().N))
}

// setActivity says when the campaign's workspaces last served an episode.
func (f *fakeBackend) setActivity(id string, t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.activity == nil {
		f.activity = map[string]time.Time{}
	}
	f.activity[id] = t
}

// LastActivity is what setActivity said (zero: never).
func (f *fakeBackend) LastActivity(c *store.Campaign) (time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.activity[c.ID], nil
}

// Reconcile decides as the adapter does (campaign.Lifecycle's
// ReconcileReason, or Due with ExpiryOnly) and removes what it says,
// journalling a rollback; a campaign locked by another process is left
// alone with store.ErrLocked.
func (f *fakeBackend) Reconcile(ctx context.Context, c *store.Campaign, opts adapter.ReconcileOptions) (adapter.Reconciled, error) {
	f.record("Reconcile " + c.ID)
	f.mu.Lock()
	locked, last := f.locked[c.ID], f.activity[c.ID]
	f.mu.Unlock()
	if locked {
		return adapter.Reconciled{}, fmt.Errorf("campaign %q: %w (pid 1)", c.ID, store.ErrLocked)
	}
	st, err := f.state(c.ID)
	if err != nil {
		return adapter.Reconciled{}, err
	}
	res := adapter.Reconciled{Status: st.Status}
	if opts.ExpiryOnly {
		res.Reason, _ = st.Due(opts.Now, last)
		if gone, _ := st.LauncherGone(opts.Now, opts.LauncherSeen); res.Reason == "" && gone {
			res.Reason = campaign.ReasonLauncherGone
		}
	} else {
		res.Reason = st.ReconcileReason(opts.Now, last)
	}
	if res.Reason == "" {
		return res, nil
	}
	f.record("Cleanup " + c.ID + " (" + res.Reason + ")")
	f.mu.Lock()
	defer f.mu.Unlock()
	res.Report, res.ReportPath, err = f.writeCleanup(c.ID, -1, res.Reason)
	if err == nil && res.Reason == campaign.ReasonRollback {
		err = f.journal(c.ID, campaign.Record{Op: campaign.OpRolledBack, Gen: st.Latest().N, Note: "rolled back by reconcile"})
	}
	return res, err
}

// DiscardEmpty removes an empty campaign's directory, as the adapter does
// when nothing on the daemon carries its id (the fake daemon holds
// nothing).
func (f *fakeBackend) DiscardEmpty(ctx context.Context, root *store.Root, l store.Listing, dryRun bool) (bool, error) {
	f.record("DiscardEmpty " + l.ID)
	if l.State.Status != campaign.StatusEmpty || dryRun {
		return l.State.Status == campaign.StatusEmpty, nil
	}
	return true, root.RemoveEmpty(l.Key)
}

// SweepCreates removes every staging directory (no other process runs).
func (f *fakeBackend) SweepCreates(ctx context.Context, root *store.Root) (int, error) {
	staged, err := root.Staged()
	for _, st := range staged {
		err = errors.Join(err, root.RemoveStaged(st))
	}
	return len(staged), err
}

// CampaignDir is the campaign's state directory.
func (f *fakeBackend) CampaignDir(id string) string { return f.root.CampaignDir(id) }

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
	logs *testlog.Buffer
	key  []byte
}

func newTestServer(t *testing.T, be *fakeBackend) *testServer {
	t.Helper()
	key := bytes.Repeat([]byte{7}, KeyBytes)
	return newTestServerKey(t, be, key)
}

func newTestServerKey(t *testing.T, be *fakeBackend, key []byte) *testServer {
	t.Helper()
	return newTestServerOf(t, be, key, nil)
}

// newTestServerClock is a test server whose lifetimes run on clock.
func newTestServerClock(t *testing.T, be *fakeBackend, clock Clock) *testServer {
	t.Helper()
	return newTestServerOf(t, be, bytes.Repeat([]byte{7}, KeyBytes), func(c *Config) { c.Clock = clock })
}

// newTestServerConfig is a test server with edit's changes to its
// configuration.
func newTestServerConfig(t *testing.T, be *fakeBackend, edit func(*Config)) *testServer {
	t.Helper()
	return newTestServerOf(t, be, bytes.Repeat([]byte{7}, KeyBytes), edit)
}

func newTestServerOf(t *testing.T, be *fakeBackend, key []byte, edit func(*Config)) *testServer {
	t.Helper()
	logs := &testlog.Buffer{}
	ts := httptest.NewUnstartedServer(nil)
	cfg := Config{Root: be.root, Tokens: mustTokens(t, testToken), Key: key, PublicURL: "http://" + ts.Listener.Addr().String(),
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), ShutdownGrace: 5 * time.Second}
	if edit != nil {
		edit(&cfg)
	}
	s, err := newServer(cfg, be)
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
	leakcheck.AfterTest(t, reflect.TypeFor[Server]().PkgPath()+".", "coder/websocket")
}

// Claim binds the task to the campaign's first workspace, journalling
// the claim as the adapter does, when its spec asks for a pool; else it
// is refused as the adapter refuses it (the real adapter's pools are
// tested on the daemon).
func (f *fakeBackend) Claim(ctx context.Context, c *store.Campaign, task, attempt string, opts adapter.AttestOptions) (adapter.Claimed, error) {
	f.record("Claim " + c.ID)
	f.mu.Lock()
	gate := f.claimGate
	f.mu.Unlock()
	if gate != nil {
		gate()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	camp := f.up[c.ID]
	if camp == nil || camp.Plan.Spec.Pool == 0 {
		return adapter.Claimed{}, fmt.Errorf("campaign %s: %w", c.ID, adapter.ErrNoPool)
	}
	st, err := f.state(c.ID)
	if err != nil {
		return adapter.Claimed{}, err
	}
	ag := camp.Plan.Agents[0]
	rec := campaign.Record{Op: campaign.OpClaim, Gen: st.Latest().N, Kind: campaign.KindContainer, Role: campaign.RoleWork, Name: ag.Name, Task: task, Attempt: attempt}
	for _, r := range st.Live() {
		if r.Name == ag.Name {
			rec.ID = r.ID
		}
	}
	if err := f.journal(c.ID, rec); err != nil {
		return adapter.Claimed{}, err
	}
	ws := camp.Workspaces[0]
	ws.TaskID, ws.Pooled = task, true
	return adapter.Claimed{Workspace: ws, Warm: true, At: time.Now()}, nil
}

// Warn journals a warning of the next removal when one is due, as the
// adapter does.
func (f *fakeBackend) Warn(ctx context.Context, c *store.Campaign, now time.Time, lead time.Duration) (campaign.Expiry, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, err := f.state(c.ID)
	if err != nil {
		return campaign.Expiry{}, false, err
	}
	e, due, _ := st.Warning(now, f.activity[c.ID], lead)
	if !due {
		return e, false, nil
	}
	f.calls = append(f.calls, "Warn "+c.ID+" ("+e.Reason+")")
	return e, true, f.journal(c.ID, e.Record(st.Latest().N))
}

// VerifySignatures verifies as the adapter does, with the state root's
// key: the fake's reports are not signed, so it never verifies.
func (f *fakeBackend) VerifySignatures(ctx context.Context, c *store.Campaign) (*custody.Result, error) {
	key, err := c.SigningKey()
	if err != nil {
		return nil, err
	}
	return custody.Verify(ctx, c, key.Public().(ed25519.PublicKey), custody.Options{}), nil
}

// Refill makes nothing.
func (f *fakeBackend) Refill(ctx context.Context, c *store.Campaign, opts adapter.AttestOptions) (int, error) {
	return 0, nil
}
