package launcher

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentpen/agentpen/api"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/store"
	"github.com/danielgtaylor/huma/v2"
)

// launcherTokens is the token text of the ownership tests' servers: the
// operator (testToken, so ts.do is the operator) and two launchers.
const launcherTokens = "# the ownership tests\noperator:" + testToken + "\nalice:" + tokAlice + "\nbob:" + tokBob + "\n"

// newLaunchersServer is a test server with launcherTokens.
func newLaunchersServer(t *testing.T, be *fakeBackend, text string) *testServer {
	t.Helper()
	return newTestServerConfig(t, be, func(c *Config) { c.Tokens = mustTokens(t, text) })
}

// doAs sends a request with token (and header pairs).
func (ts *testServer) doAs(t *testing.T, token, method, path string, body []byte, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, ts.ts.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := ts.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if method == http.MethodGet && strings.HasSuffix(path, "/events") && resp.StatusCode == http.StatusOK {
		// A stream follows a campaign while it lives: read up to its
		// first state event.
		return resp, readToState(resp.Body)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// readToState reads an event stream up to the end of its first state
// event (or its end).
func readToState(r io.Reader) []byte {
	var out bytes.Buffer
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	state := false
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if strings.HasPrefix(sc.Text(), "data: ") && strings.Contains(sc.Text(), `"event":"state"`) {
			state = true
		}
		if state && sc.Text() == "" {
			break
		}
	}
	return out.Bytes()
}

// createAs creates a campaign with token, synchronously, and returns it.
func (ts *testServer) createAs(t *testing.T, token, id string) api.CampaignView {
	t.Helper()
	resp, b := ts.doAs(t, token, http.MethodPost, "/v1/campaigns", specJSON(id, "software/median@7", "sql/top_customer@3"))
	var v api.CampaignView
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(b, &v) != nil || len(v.Workspaces) != 2 {
		t.Fatalf("create %s: %d %s", id, resp.StatusCode, b)
	}
	return v
}

// listAs lists the campaigns token sees: the body and the ids.
func (ts *testServer) listAs(t *testing.T, token string) (string, []api.CampaignView) {
	t.Helper()
	resp, b := ts.doAs(t, token, http.MethodGet, "/v1/campaigns", nil)
	var l listOutput
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &l.Body) != nil {
		t.Fatalf("list: %d %s", resp.StatusCode, b)
	}
	return string(b), l.Body.Campaigns
}

func ids(vs []api.CampaignView) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.CampaignID)
	}
	return out
}

// campaignRouteBodies are the bodies of the operations on one campaign
// (every route under /v1/campaigns/{id}): a route added there must be
// added here, or TestOwnersOnEveryRoute fails.
var campaignRouteBodies = map[routeKey]string{
	"GET /v1/campaigns/{id}":              "",
	"PATCH /v1/campaigns/{id}":            `{"ttl_seconds": 7200}`,
	"DELETE /v1/campaigns/{id}":           "",
	"GET /v1/campaigns/{id}/workspaces":   "",
	"POST /v1/campaigns/{id}/attestation": "",
	"GET /v1/campaigns/{id}/attestation":  "",
	"GET /v1/campaigns/{id}/cleanup":      "",
	"GET /v1/campaigns/{id}/verification": "",
	"GET /v1/campaigns/{id}/events":       "",
	"GET /v1/campaigns/{id}/episodes":     "",
	"POST /v1/campaigns/{id}/workspaces":  `{"task_id": "config/debug_in_prod"}`,
	"POST /v1/campaigns/{id}/keepalive":   "",
}

// campaignRoutesInOrder are the routes of campaignRouteBodies, DELETE
// last.
func campaignRoutesInOrder(t *testing.T, s *Server) []routeKey {
	t.Helper()
	var doc []routeKey
	for _, r := range documentedRoutes(s) {
		if strings.Contains(string(r), " "+campaignRoutes) {
			doc = append(doc, r)
		}
	}
	var table []routeKey
	for r := range campaignRouteBodies {
		table = append(table, r)
	}
	slices.Sort(doc)
	slices.Sort(table)
	if !slices.Equal(doc, table) {
		t.Fatalf("the routes on one campaign are %v; the test covers %v: add the new ones to campaignRouteBodies", doc, table)
	}
	slices.SortStableFunc(table, func(a, b routeKey) int {
		return boolInt(strings.HasPrefix(string(a), "DELETE")) - boolInt(strings.HasPrefix(string(b), "DELETE"))
	})
	return table
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// callRoute calls route r on campaign id with token.
func (ts *testServer) callRoute(t *testing.T, token string, r routeKey, id string) (*http.Response, []byte) {
	t.Helper()
	method, path, _ := strings.Cut(string(r), " ")
	return ts.doAs(t, token, method, strings.ReplaceAll(path, "{id}", id), []byte(campaignRouteBodies[r]))
}

// TestOwnersOnEveryRoute: token A's campaign does not exist for token B
// on every route under /v1/campaigns/{id}: each answers B exactly what it
// answers for an id no campaign has (the status, the content type and
// the body, the id aside), and does nothing to it; B's list holds
// neither A's id nor its base_urls. A and the operator see it and act on
// it; B sees and acts on its own.
func TestOwnersOnEveryRoute(t *testing.T) {
	be := newFakeBackend(t)
	ts := newLaunchersServer(t, be, launcherTokens)
	routes := campaignRoutesInOrder(t, ts.Server)
	a := ts.createAs(t, tokAlice, "camp-a")
	b := ts.createAs(t, tokBob, "camp-b")
	if a.Owner != "alice" || b.Owner != "bob" {
		t.Fatalf("owners %q %q", a.Owner, b.Owner)
	}
	var secrets []string // what B must never read of A's campaign
	for _, ws := range a.Workspaces {
		secrets = append(secrets, ws.BaseURL, ws.BaseURL[strings.LastIndexByte(ws.BaseURL, '/')+1:], ws.AgentID)
	}
	secrets = append(secrets, "camp-a", a.StateDir, "alice")

	before := len(be.mutating())
	for _, r := range routes {
		resp, body := ts.callRoute(t, tokBob, r, "camp-a")
		uresp, ubody := ts.callRoute(t, testToken, r, "camp-nowhere") // the operator: the operation's own 404
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s of A's campaign as B: %d %s", r, resp.StatusCode, body)
			continue
		}
		decodeProblem(t, resp, body)
		if got, want := strings.ReplaceAll(string(body), "camp-a", "camp-nowhere"), string(ubody); got != want || uresp.StatusCode != http.StatusNotFound ||
			resp.Header.Get("Content-Type") != uresp.Header.Get("Content-Type") {
			t.Errorf("%s: A's campaign answers B\n%d %s %s\nan unknown one answers\n%d %s %s", r, resp.StatusCode, resp.Header.Get("Content-Type"), body,
				uresp.StatusCode, uresp.Header.Get("Content-Type"), ubody)
		}
		if _, b2 := ts.callRoute(t, tokBob, r, "camp-nowhere"); string(b2) != string(ubody) {
			t.Errorf("%s: an unknown id answers B %s, the operator %s", r, b2, ubody)
		}
		for _, s := range secrets[:len(secrets)-3] {
			if strings.Contains(string(body), s) {
				t.Errorf("%s: B read %q", r, s)
			}
		}
	}
	if m := be.mutating(); len(m) != before {
		t.Fatalf("B's requests acted on the adapter: %v", m[before:])
	}
	if v := ts.viewAs(t, tokAlice, "camp-a"); v.State != "ready" || !slices.Equal(baseURLs(v), baseURLs(a)) {
		t.Fatalf("A's campaign after B's requests: %+v", v)
	}

	// The lists.
	body, vs := ts.listAs(t, tokBob)
	if !slices.Equal(ids(vs), []string{"camp-b"}) {
		t.Errorf("B lists %v", ids(vs))
	}
	for _, s := range secrets {
		if strings.Contains(body, s) {
			t.Errorf("B's list holds %q: %s", s, body)
		}
	}
	if _, vs := ts.listAs(t, tokAlice); !slices.Equal(ids(vs), []string{"camp-a"}) {
		t.Errorf("A lists %v", ids(vs))
	}
	_, vs = ts.listAs(t, testToken)
	if !slices.Equal(ids(vs), []string{"camp-a", "camp-b"}) || vs[0].Owner != "alice" || vs[1].Owner != "bob" || len(vs[0].Workspaces) != 2 {
		t.Errorf("the operator lists %+v", vs)
	}

	// Each launcher acts on its own; the operator on both (DELETE last).
	for _, r := range routes {
		for _, c := range []struct {
			token, id string
		}{{tokAlice, "camp-a"}, {tokBob, "camp-b"}, {testToken, "camp-b"}} {
			if resp, body := ts.callRoute(t, c.token, r, c.id); strings.Contains(string(body), noSuchCampaign(c.id)) {
				t.Errorf("%s of %s: %d %s", r, c.id, resp.StatusCode, body)
			}
		}
	}
	if v := ts.getView(t, "camp-b"); v.State != "removed" || v.RemovalReason != campaign.ReasonDelete {
		t.Errorf("camp-b after the deletes: %+v", v)
	}
}

func baseURLs(v api.CampaignView) []string {
	var out []string
	for _, ws := range v.Workspaces {
		out = append(out, ws.BaseURL)
	}
	return out
}

// viewAs gets a campaign with token.
func (ts *testServer) viewAs(t *testing.T, token, id string) api.CampaignView {
	t.Helper()
	resp, b := ts.doAs(t, token, http.MethodGet, "/v1/campaigns/"+id, nil)
	var v api.CampaignView
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &v) != nil {
		t.Fatalf("GET %s: %d %s", id, resp.StatusCode, b)
	}
	return v
}

// TestOwnersCreate: a create of an id another launcher's campaign holds
// (ready, removed, or being created) is a 409 that says the id is taken
// and nothing of whose or what; the owner may create it again; the
// journal's begin record names the owner. A campaign agentpen up made
// (no owner) and an unusable one are the operator's alone.
func TestOwnersCreate(t *testing.T) {
	be := newFakeBackend(t)
	release := make(chan struct{})
	var hold atomic.Bool
	be.bringUp = func(ctx context.Context) error {
		if hold.Load() {
			<-release
		}
		return nil
	}
	ts := newLaunchersServer(t, be, launcherTokens)
	var once sync.Once
	unhold := func() { hold.Store(false); once.Do(func() { close(release) }) }
	t.Cleanup(unhold) // before the server's Close
	a := ts.createAs(t, tokAlice, "camp-a")
	taken := func(what, id string) {
		t.Helper()
		resp, b := ts.doAs(t, tokBob, http.MethodPost, "/v1/campaigns", specJSON(id, "software/median@7"))
		p := decodeProblem(t, resp, b)
		if resp.StatusCode != http.StatusConflict || !strings.Contains(p.Detail, `campaign id "`+id+`" is taken`) {
			t.Fatalf("%s: B's create: %d %s", what, resp.StatusCode, b)
		}
		for _, s := range []string{"alice", "ready", "removed", "creating", "generation", a.StateDir, "DELETE"} {
			if strings.Contains(string(b), s) {
				t.Errorf("%s: B's refusal says %q: %s", what, s, b)
			}
		}
	}
	taken("ready", "camp-a")
	if resp, b := ts.doAs(t, tokAlice, http.MethodDelete, "/v1/campaigns/camp-a", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("A's delete: %d %s", resp.StatusCode, b)
	}
	taken("removed", "camp-a")
	if v := ts.createAs(t, tokAlice, "camp-a"); v.Generation != 2 || v.Owner != "alice" {
		t.Fatalf("A's create again: %+v", v)
	}
	recs, _ := journalRecords(t, be, "camp-a")
	var owners []string
	for _, r := range recs {
		if r.Op == campaign.OpBegin {
			owners = append(owners, r.Owner)
		}
	}
	if !slices.Equal(owners, []string{"alice", "alice"}) {
		t.Fatalf("begin records' owners %q", owners)
	}

	// Being created for A (its journal not written yet): B neither sees
	// it nor takes its id.
	hold.Store(true)
	resp, b := ts.doAs(t, tokAlice, http.MethodPost, "/v1/campaigns", specJSON("camp-c", "software/median@7"), "Prefer", "respond-async")
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("A's async create: %d %s", resp.StatusCode, b)
	}
	if v := ts.viewAs(t, tokAlice, "camp-c"); v.State != "creating" || v.Owner != "alice" {
		t.Fatalf("A's creating campaign: %+v", v)
	}
	resp, b = ts.doAs(t, tokBob, http.MethodGet, "/v1/campaigns/camp-c", nil)
	if p := decodeProblem(t, resp, b); resp.StatusCode != http.StatusNotFound || p.Detail != noSuchCampaign("camp-c") {
		t.Fatalf("B's GET of A's creating campaign: %d %s", resp.StatusCode, b)
	}
	if _, vs := ts.listAs(t, tokBob); slices.Contains(ids(vs), "camp-c") {
		t.Fatalf("B lists A's creating campaign: %v", ids(vs))
	}
	taken("creating", "camp-c")
	if _, vs := ts.listAs(t, testToken); !slices.Contains(ids(vs), "camp-c") {
		t.Fatalf("the operator does not list A's creating campaign: %v", ids(vs))
	}
	unhold()
	waitState(t, ts, "camp-c", "ready")

	// agentpen up's campaign, and an unusable one: the operator's.
	p := be.plan(t, specJSON("camp-up", "software/median@7"))
	if _, err := be.Up(t.Context(), be.root, p, adapterUpOptions()); err != nil {
		t.Fatal(err)
	}
	ts.createAs(t, tokAlice, "camp-u")
	f, err := os.OpenFile(filepath.Join(be.CampaignDir("camp-u"), campaign.JournalFile), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("{not a record}\n")
	f.Close()
	for _, id := range []string{"camp-up", "camp-u"} {
		resp, b := ts.doAs(t, tokAlice, http.MethodGet, "/v1/campaigns/"+id, nil)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("A's GET of %s: %d %s", id, resp.StatusCode, b)
		}
		if v := ts.getView(t, id); v.Owner != map[string]string{"camp-up": "", "camp-u": "alice"}[id] {
			t.Errorf("the operator's GET of %s: owner %q", id, v.Owner)
		}
	}
	if _, vs := ts.listAs(t, tokAlice); !slices.Equal(ids(vs), []string{"camp-a", "camp-c"}) {
		t.Errorf("A lists %v", ids(vs))
	}
	if _, vs := ts.listAs(t, testToken); !slices.Equal(ids(vs), []string{"camp-a", "camp-c", "camp-u", "camp-up"}) {
		t.Errorf("the operator lists %v", ids(vs))
	}
	taken("agentpen up's", "camp-up")
}

// journalRecords reads the campaign's journal records and its raw text.
func journalRecords(t *testing.T, be *fakeBackend, id string) ([]campaign.Record, string) {
	t.Helper()
	c, err := be.open(id)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	recs, _, err := c.Records()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(be.CampaignDir(id), campaign.JournalFile))
	if err != nil {
		t.Fatal(err)
	}
	return recs, string(b)
}

// TestOwnersUnderTheLock: the operations that change a campaign check
// its owner again under its lock, so a request that passed the route's
// check before the campaign changed hands acts on nothing.
func TestOwnersUnderTheLock(t *testing.T) {
	be := newFakeBackend(t)
	ts := newLaunchersServer(t, be, launcherTokens)
	ts.createAs(t, tokAlice, "camp-a")
	bob := withCaller(t.Context(), Caller{Name: "bob"})
	if rep, err := ts.remove(bob, ts.entry("camp-a"), campaign.ReasonDelete); rep != nil || !errors.Is(err, store.ErrNoCampaign) {
		t.Fatalf("B's removal: %v %v", rep, err)
	}
	if _, _, _, _, err := ts.operate(bob, "camp-a", "attest"); err == nil || !strings.Contains(err.Error(), noSuchCampaign("camp-a")) {
		t.Fatalf("B's operation: %v", err)
	}
	if m := be.mutating(); slices.Contains(m, "Cleanup camp-a") {
		t.Fatalf("B's removal reached the adapter: %v", m)
	}
	// The service's own work (no caller) acts on every campaign.
	if rep, err := ts.remove(context.Background(), ts.entry("camp-a"), campaign.ReasonTTL); err != nil || !rep.OK {
		t.Fatalf("the service's removal: %v %v", rep, err)
	}
}

// TestOwnersMetricsAndLog: /metrics (it counts every launcher's
// campaigns) is the operator's; the access log and each operation's
// line name the caller.
func TestOwnersMetricsAndLog(t *testing.T) {
	ts := newLaunchersServer(t, newFakeBackend(t), launcherTokens)
	if resp, b := ts.doAs(t, tokBob, http.MethodGet, "/metrics", nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("B's /metrics: %d %s", resp.StatusCode, b)
	} else {
		decodeProblem(t, resp, b)
	}
	if resp, b := ts.doAs(t, testToken, http.MethodGet, "/metrics", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("the operator's /metrics: %d %s", resp.StatusCode, b)
	}
	ts.createAs(t, tokAlice, "camp-a")
	ts.doAs(t, tokBob, http.MethodGet, "/v1/campaigns/camp-a", nil)
	for _, want := range []string{
		`"msg":"http","request_id":`,
		`"route":"/v1/campaigns/{id}","status":404,"bytes":`,
		`"caller":"bob","refused":"not_found"`,
		`"msg":"create","campaign":"camp-a","outcome":"ready"`,
		`"caller":"alice"`,
		`"route":"/metrics","status":403`,
	} {
		if !strings.Contains(ts.logs.String(), want) {
			t.Errorf("no log line with %s:\n%s", want, ts.logs.String())
		}
	}
}

// TestTokenCanary: through creates, reads, event streams, attestations,
// lifetimes, deletes and refusals by three named tokens and a wrong one,
// no token's value reaches the log, an event, an answer, or any file of
// the state root (the journal included), while the names do.
func TestTokenCanary(t *testing.T) {
	checkNoLeaks(t)
	be := newFakeBackend(t)
	canary := func(who string) string { return "canary-" + who + "-" + randID()[:40] }
	op, alice, bob, wrong := canary("op"), canary("alice"), canary("bob"), canary("wrong")
	ts := newLaunchersServer(t, be, "operator:"+op+"\nalice:"+alice+"\nbob:"+bob+"\n")
	var answers bytes.Buffer
	call := func(token, method, path string, body []byte, header ...string) {
		_, b := ts.doAs(t, token, method, path, body, header...)
		answers.Write(b)
	}
	call(alice, http.MethodPost, "/v1/campaigns", specJSON("camp-a", "software/median@7"))
	call(bob, http.MethodPost, "/v1/campaigns", specJSON("camp-b", "software/median@7"), "Prefer", "respond-async")
	call(bob, http.MethodPost, "/v1/campaigns", specJSON("camp-a", "software/median@7"))
	for _, tok := range []string{alice, bob, op, wrong} {
		for _, id := range []string{"camp-a", "camp-b"} {
			for _, r := range []routeKey{"GET /v1/campaigns/{id}/events", "GET /v1/campaigns/{id}", "GET /v1/campaigns/{id}/workspaces",
				"POST /v1/campaigns/{id}/attestation", "PATCH /v1/campaigns/{id}", "GET /v1/campaigns/{id}/attestation"} {
				_, b := ts.callRoute(t, tok, r, id)
				answers.Write(b)
			}
		}
		call(tok, http.MethodGet, "/v1/campaigns", nil)
		call(tok, http.MethodGet, "/metrics", nil)
	}
	call(alice, http.MethodDelete, "/v1/campaigns/camp-a", nil)
	call(op, http.MethodDelete, "/v1/campaigns/camp-b", nil)
	call(alice, http.MethodGet, "/v1/campaigns/camp-a/events", nil)
	req, _ := http.NewRequest(http.MethodGet, ts.ts.URL+"/v1/campaigns", nil)
	req.Header.Set("Authorization", "Basic "+alice)
	if resp, err := ts.ts.Client().Do(req); err == nil {
		resp.Body.Close()
	}

	files := testenv.ReadTree(t, be.dir)
	files["the log"], files["the answers"] = ts.logs.String(), answers.String()
	if len(files) < 8 {
		t.Fatalf("only %d files read", len(files))
	}
	for where, text := range files {
		for _, tok := range []string{op, alice, bob, wrong} {
			if strings.Contains(text, tok) || strings.Contains(text, tok[len(tok)-24:]) {
				t.Errorf("%s holds a token (%.14s...)", where, tok)
			}
		}
	}
	// The names are there: in the journal, the events, the log.
	_, journal := journalRecords(t, be, "camp-a")
	for where, want := range map[string]string{"journal": `"owner":"alice"`, "events": `"owner":"alice"`, "log": `"caller":"bob"`} {
		text := map[string]string{"journal": journal, "events": answers.String(), "log": ts.logs.String()}[where]
		if !strings.Contains(text, want) {
			t.Errorf("the %s has no %s", where, want)
		}
	}
}

// TestOwnersDocumented: the document says, on every operation on one
// campaign, that another launcher's is a 404; and that /metrics is the
// operator's.
func TestOwnersDocumented(t *testing.T) {
	ts := newTestServer(t, newFakeBackend(t))
	n := 0
	for path, item := range ts.OpenAPI().Paths {
		if !strings.HasPrefix(path, campaignRoutes) {
			continue
		}
		for _, op := range []*huma.Operation{item.Get, item.Post, item.Patch, item.Delete, item.Put} {
			if op == nil {
				continue
			}
			n++
			if r := op.Responses["404"]; r == nil || !strings.Contains(r.Description, "another launcher's") {
				t.Errorf("%s %s: its 404 does not say another launcher's campaign is one", op.Method, path)
			}
		}
	}
	if n != len(campaignRouteBodies) {
		t.Errorf("%d operations on one campaign, want %d", n, len(campaignRouteBodies))
	}
	if ts.OpenAPI().Paths["/metrics"].Get.Responses["403"] == nil {
		t.Error("/metrics documents no 403")
	}
}
