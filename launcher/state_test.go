package launcher

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/api"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/coder/websocket"
)

// getView GETs a campaign and decodes it, failing on any status but 200.
func (ts *testServer) getView(t *testing.T, id string) api.CampaignView {
	t.Helper()
	resp, b := ts.do(t, http.MethodGet, "/v1/campaigns/"+id, nil, true)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", id, resp.StatusCode, b)
	}
	var v api.CampaignView
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// listed returns the states the list shows, by campaign id.
func (ts *testServer) listed(t *testing.T) map[string]string {
	t.Helper()
	resp, b := ts.do(t, http.MethodGet, "/v1/campaigns", nil, true)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("list: %d %s", resp.StatusCode, b)
	}
	var out struct{ Campaigns []api.CampaignView }
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, v := range out.Campaigns {
		got[v.CampaignID] = v.State
		if v.State != campaign.StatusReady.String() && len(v.Workspaces) > 0 {
			t.Errorf("%s is %s and lists workspaces: %+v", v.CampaignID, v.State, v.Workspaces)
		}
	}
	return got
}

// TestInterruptedCreateServed: a campaign whose bring-up is in flight in
// another process (it holds the campaign's lock: Load's reconciliation
// leaves it alone) is listed, shown with its state, refused a second
// create in the API's terms, and removed by DELETE.
func TestInterruptedCreateServed(t *testing.T) {
	be := newFakeBackend(t)
	spec := specJSON("camp-k", "software/median@7", "sql/top_customer@3")
	id := be.killedCreate(t, spec)
	be.locked = map[string]bool{id: true}
	ts := newTestServer(t, be)
	if err := ts.Load(); err != nil {
		t.Fatal(err)
	}
	waitState(t, ts, id, campaign.StatusStartingOrFailed.String())
	if got := ts.listed(t); got[id] != campaign.StatusStartingOrFailed.String() {
		t.Fatalf("listed %v, want %s %s", got, id, campaign.StatusStartingOrFailed.String())
	}
	if v := ts.getView(t, id); v.State != campaign.StatusStartingOrFailed.String() || v.Generation != 1 || len(v.Workspaces) != 0 {
		t.Fatalf("GET: %+v", v)
	}
	resp, b := ts.do(t, http.MethodPost, "/v1/campaigns", spec, true)
	p := decodeProblem(t, resp, b)
	if resp.StatusCode != http.StatusConflict || !strings.Contains(p.Detail, "DELETE /v1/campaigns/"+id) || strings.Contains(p.Detail, "agentpen down") {
		t.Fatalf("create again: %d %q, want 409 naming DELETE /v1/campaigns/%s", resp.StatusCode, p.Detail, id)
	}
	if resp, b := ts.do(t, http.MethodPost, "/v1/campaigns/"+id+"/attestation", nil, true); resp.StatusCode != http.StatusConflict {
		t.Errorf("attest: %d %s, want 409", resp.StatusCode, b)
	}
	resp, b = ts.do(t, http.MethodDelete, "/v1/campaigns/"+id, nil, true)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"status":"verified"`) {
		t.Fatalf("delete: %d %s", resp.StatusCode, b)
	}
	if v := ts.getView(t, id); v.State != campaign.StatusRemoved.String() || v.Cleanup == nil || v.Cleanup.Status != "verified" {
		t.Fatalf("after the delete: %+v", v)
	}
	// The id is free again: a new generation.
	resp, b = ts.do(t, http.MethodPost, "/v1/campaigns", spec, true)
	if resp.StatusCode != http.StatusCreated || !strings.Contains(string(b), `"generation":2`) {
		t.Fatalf("create after the delete: %d %s", resp.StatusCode, b)
	}
}

// TestRemovedBehindTheBack: a campaign agentpen down removed (the API
// does not see it), or whose removal was killed halfway (a DELETE or a
// down interrupted), reads as what its journal says on the next request,
// and its base_urls stop working.
func TestRemovedBehindTheBack(t *testing.T) {
	for _, tt := range []struct {
		name   string
		act    func(be *fakeBackend, t *testing.T, id string)
		state  string
		delete []string // the adapter calls a DELETE then makes
	}{
		{"down", (*fakeBackend).downBehind, campaign.StatusRemoved.String(), nil},
		{"down_interrupted", (*fakeBackend).interruptedDown, campaign.StatusCleanupFailed.String(), []string{"Cleanup camp-1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newProxyFixture(t)
			v := f.create(t, "camp-1", "software/median@7")
			if code := rawGet(t, f.ts.URL, strings.TrimPrefix(v.Workspaces[0].BaseURL, f.ts.URL)+"/health"); code != http.StatusOK {
				t.Fatalf("the workspace before: %d", code)
			}
			tt.act(f.be, t, "camp-1")
			if got := f.getView(t, "camp-1"); got.State != tt.state || len(got.Workspaces) != 0 {
				t.Fatalf("GET: %+v, want state %s and no workspaces", got, tt.state)
			}
			if got := f.listed(t); got["camp-1"] != tt.state {
				t.Fatalf("listed %v", got)
			}
			if resp, b := f.do(t, http.MethodGet, "/v1/campaigns/camp-1/workspaces", nil, true); resp.StatusCode != http.StatusConflict {
				t.Errorf("workspaces: %d %s, want 409", resp.StatusCode, b)
			}
			if code := rawGet(t, f.ts.URL, strings.TrimPrefix(v.Workspaces[0].BaseURL, f.ts.URL)+"/health"); code != http.StatusNotFound {
				t.Errorf("the base_url of a campaign no longer up: %d, want 404", code)
			}
			before := len(f.be.mutating())
			resp, b := f.do(t, http.MethodDelete, "/v1/campaigns/camp-1", nil, true)
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"status":"verified"`) {
				t.Fatalf("delete: %d %s", resp.StatusCode, b)
			}
			if got := f.be.mutating()[before:]; !slices.Equal(got, tt.delete) {
				t.Errorf("the delete made %v, want %v", got, tt.delete)
			}
		})
	}
}

// TestCleanupReportOfLatestGeneration: up, down, up again: the cleanup
// report of generation 1 is not served as generation 2's.
func TestCleanupReportOfLatestGeneration(t *testing.T) {
	be := newFakeBackend(t)
	ts := newTestServer(t, be)
	spec := specJSON("camp-1", "software/median@7")
	for gen := 1; gen <= 2; gen++ {
		if resp, b := ts.do(t, http.MethodPost, "/v1/campaigns", spec, true); resp.StatusCode != http.StatusCreated {
			t.Fatalf("create %d: %d %s", gen, resp.StatusCode, b)
		}
		resp, b := ts.do(t, http.MethodGet, "/v1/campaigns/camp-1/cleanup", nil, true)
		p := decodeProblem(t, resp, b)
		if resp.StatusCode != http.StatusNotFound || (gen == 2 && !strings.Contains(p.Detail, "cleanup-1-1.json")) {
			t.Fatalf("generation %d is up; its cleanup report: %d %s", gen, resp.StatusCode, b)
		}
		if v := ts.getView(t, "camp-1"); v.Cleanup != nil {
			t.Errorf("generation %d is up and shows a cleanup: %+v", gen, v.Cleanup)
		}
		if resp, b := ts.do(t, http.MethodDelete, "/v1/campaigns/camp-1", nil, true); resp.StatusCode != http.StatusOK {
			t.Fatalf("delete %d: %d %s", gen, resp.StatusCode, b)
		}
		resp, b = ts.do(t, http.MethodGet, "/v1/campaigns/camp-1/cleanup", nil, true)
		var rep struct {
			Status      string
			Generations []struct{ N int }
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &rep) != nil || rep.Status != "verified" || rep.Generations[len(rep.Generations)-1].N != gen {
			t.Fatalf("generation %d removed; its cleanup report: %d %s", gen, resp.StatusCode, b)
		}
	}
}

// TestAttestationFailedAfterCreate: an attestation that fails after the
// create says the campaign is no longer what was attested: its state says
// so, its workspaces are no longer served (open sessions are closed), and
// an attestation that passes again serves them at the same base_urls.
func TestAttestationFailedAfterCreate(t *testing.T) {
	checkNoLeaks(t)
	f := newProxyFixture(t)
	v := f.create(t, "camp-1", "software/median@7")
	c := dialEpisode(t, v.Workspaces[0].BaseURL)
	f.be.mu.Lock()
	f.be.attestOK = false
	f.be.mu.Unlock()
	resp, b := f.do(t, http.MethodPost, "/v1/campaigns/camp-1/attestation", nil, true)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"ok":false`) {
		t.Fatalf("attest: %d %s", resp.StatusCode, b)
	}
	_, _, err := c.Read(testenv.Context(t))
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.StatusGoingAway || !strings.Contains(ce.Reason, "attestation") {
		t.Fatalf("the open session: %v, want close 1001 naming the attestation", err)
	}
	got := f.getView(t, "camp-1")
	if got.State != campaign.StatusAttestationFailed.String() || len(got.Workspaces) != 0 || got.Attestation == nil || got.Attestation.OK {
		t.Fatalf("GET after a failed attestation: %+v", got)
	}
	if code := rawGet(t, f.ts.URL, strings.TrimPrefix(v.Workspaces[0].BaseURL, f.ts.URL)+"/health"); code != http.StatusNotFound {
		t.Errorf("the base_url after a failed attestation: %d, want 404", code)
	}
	if resp, b := f.do(t, http.MethodGet, "/v1/campaigns/camp-1/workspaces", nil, true); resp.StatusCode != http.StatusConflict || !strings.Contains(string(b), campaign.StatusAttestationFailed.String()) {
		t.Errorf("workspaces: %d %s", resp.StatusCode, b)
	}
	// A restarted service reads the same from the files.
	again := newTestServerKey(t, f.be, f.key)
	again.Load()
	if got := again.getView(t, "camp-1"); got.State != campaign.StatusAttestationFailed.String() {
		t.Errorf("after a restart: %s", got.State)
	}
	f.be.mu.Lock()
	f.be.attestOK = true
	f.be.mu.Unlock()
	if resp, b := f.do(t, http.MethodPost, "/v1/campaigns/camp-1/attestation", nil, true); resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"ok":true`) {
		t.Fatalf("attest again: %d %s", resp.StatusCode, b)
	}
	if got := f.getView(t, "camp-1"); got.State != campaign.StatusReady.String() || len(got.Workspaces) != 1 || got.Workspaces[0].BaseURL != v.Workspaces[0].BaseURL {
		t.Fatalf("after an attestation that passed: %+v", got)
	}
	if code := rawGet(t, f.ts.URL, strings.TrimPrefix(v.Workspaces[0].BaseURL, f.ts.URL)+"/health"); code != http.StatusOK {
		t.Errorf("the base_url after an attestation that passed: %d", code)
	}
}

// TestCleanupAllEveryCampaign: --cleanup-on-exit removes every campaign
// of the state root that has anything live (a ready one, one whose
// create was killed), leaves the removed alone, and says each failure
// once.
func TestCleanupAllEveryCampaign(t *testing.T) {
	be := newFakeBackend(t)
	ts := newTestServer(t, be)
	for _, id := range []string{"camp-a", "camp-gone"} {
		if resp, b := ts.do(t, http.MethodPost, "/v1/campaigns", specJSON(id, "software/median@7"), true); resp.StatusCode != http.StatusCreated {
			t.Fatalf("create %s: %d %s", id, resp.StatusCode, b)
		}
	}
	be.downBehind(t, "camp-gone")
	be.killedCreate(t, specJSON("camp-k", "software/median@7"))
	before := len(be.mutating())
	if err := ts.CleanupAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := be.mutating()[before:]; !slices.Equal(got, []string{"Cleanup camp-a", "Cleanup camp-k"}) {
		t.Fatalf("removed %v, want camp-a and camp-k", got)
	}
	for id, state := range ts.listed(t) {
		if state != campaign.StatusRemoved.String() {
			t.Errorf("%s is %s after CleanupAll", id, state)
		}
	}
	// A cleanup that is not verified: the error names the campaign once.
	be.killedCreate(t, specJSON("camp-x", "software/median@7"))
	be.mu.Lock()
	be.verified = false
	be.mu.Unlock()
	err := ts.CleanupAll(t.Context())
	if !errors.Is(err, adapter.ErrNotVerified) || strings.Count(err.Error(), `campaign "camp-x"`) != 1 || strings.Count(err.Error(), "camp-x:") != 0 ||
		strings.Count(err.Error(), "not verified") != 1 {
		t.Fatalf("CleanupAll: %v, want camp-x and not verified once each", err)
	}
}

// TestNoSuchCampaign: an id the state root has no journal of is a 404
// that names it once.
func TestNoSuchCampaign(t *testing.T) {
	ts := newTestServer(t, newFakeBackend(t))
	for _, tt := range []struct{ method, path string }{
		{http.MethodGet, "/v1/campaigns/nope"},
		{http.MethodDelete, "/v1/campaigns/nope"},
		{http.MethodGet, "/v1/campaigns/nope/workspaces"},
		{http.MethodPost, "/v1/campaigns/nope/attestation"},
		{http.MethodGet, "/v1/campaigns/nope/attestation"},
		{http.MethodGet, "/v1/campaigns/nope/cleanup"},
	} {
		resp, b := ts.do(t, tt.method, tt.path, nil, true)
		p := decodeProblem(t, resp, b)
		if resp.StatusCode != http.StatusNotFound || strings.Count(p.Detail, `"nope"`) != 1 || strings.Count(p.Detail, "nope") != 1 {
			t.Errorf("%s %s: %d %q, want 404 naming the campaign once", tt.method, tt.path, resp.StatusCode, p.Detail)
		}
	}
}

// TestUnusableCampaign: a campaign whose journal is corrupt, or whose
// state directory another user can write, is listed and shown as
// unusable with the reason, serves no workspace, and is neither removed
// nor attested: nothing is done on the word of a journal that cannot be
// trusted.
func TestUnusableCampaign(t *testing.T) {
	for _, tt := range []struct {
		name   string
		damage func(t *testing.T, dir string)
		why    string
	}{
		{"corrupt", func(t *testing.T, dir string) {
			f, err := os.OpenFile(filepath.Join(dir, campaign.JournalFile), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteString("{not a record}\n{\"op\":\"note\"}\n"); err != nil {
				t.Fatal(err)
			}
		}, "corrupt"},
		{"group_writable", func(t *testing.T, dir string) {
			if err := os.Chmod(dir, 0o770); err != nil {
				t.Fatal(err)
			}
		}, "writ"},
		// A symbolic link where the directory was: listed, never skipped
		// (it was missing from the list and from agentpen ls).
		{"symlinked", func(t *testing.T, dir string) {
			moved := filepath.Join(t.TempDir(), "moved")
			if err := os.Rename(dir, moved); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(moved, dir); err != nil {
				t.Fatal(err)
			}
		}, "link"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			be := newFakeBackend(t)
			ts := newTestServer(t, be)
			resp, b := ts.do(t, http.MethodPost, "/v1/campaigns", specJSON("camp-u", "software/median@7"), true)
			if resp.StatusCode != http.StatusCreated {
				t.Fatalf("create: %d %s", resp.StatusCode, b)
			}
			tt.damage(t, be.CampaignDir("camp-u"))
			v := ts.getView(t, "camp-u")
			if v.State != campaign.StatusUnusable.String() || !strings.Contains(v.Error, tt.why) || len(v.Workspaces) != 0 {
				t.Fatalf("GET: %+v, want %s with an error saying %q", v, campaign.StatusUnusable.String(), tt.why)
			}
			// Listed by its id, or by its directory's name when its spec
			// is in a directory not trusted enough to read it from.
			if got := ts.listed(t); len(got) != 1 || got["camp-u"] != campaign.StatusUnusable.String() && got[filepath.Base(be.CampaignDir("camp-u"))] != campaign.StatusUnusable.String() {
				t.Fatalf("listed %v", got)
			}
			before := len(be.mutating())
			for _, m := range []string{http.MethodDelete, http.MethodPost} {
				path := "/v1/campaigns/camp-u"
				if m == http.MethodPost {
					path += "/attestation"
				}
				resp, b := ts.do(t, m, path, nil, true)
				if resp.StatusCode != http.StatusConflict {
					t.Errorf("%s %s: %d %s, want 409", m, path, resp.StatusCode, b)
				}
			}
			// --cleanup-on-exit leaves it alone and says so.
			if err := ts.CleanupAll(t.Context()); err == nil || !strings.Contains(err.Error(), "unusable, left alone") {
				t.Errorf("CleanupAll: %v, want the campaign named as left alone", err)
			}
			// A create of its id is refused as unusable, not as live.
			resp, b = ts.do(t, http.MethodPost, "/v1/campaigns", specJSON("camp-u", "software/median@7"), true)
			if p := decodeProblem(t, resp, b); resp.StatusCode != http.StatusConflict || !strings.Contains(p.Detail, "unusable") || strings.Contains(p.Detail, "DELETE") {
				t.Errorf("create again: %d %q, want 409 saying it is unusable (not that DELETE removes it)", resp.StatusCode, p.Detail)
			}
			for _, path := range []string{"/v1/campaigns/camp-u/attestation", "/v1/campaigns/camp-u/cleanup"} {
				if resp, b := ts.do(t, http.MethodGet, path, nil, true); resp.StatusCode != http.StatusConflict {
					t.Errorf("GET %s: %d %s, want 409", path, resp.StatusCode, b)
				}
			}
			if after := be.mutating(); len(after) != before {
				t.Fatalf("the backend was asked to act on an unusable campaign: %v", after[before:])
			}
		})
	}
}

// TestTamperedReport: a report the journal names that is missing, or not
// what the journal recorded, is named in the view's error and refused by
// its route (409), and the campaign keeps the state its journal says
// (it read as unusable, which refuses DELETE, over a report).
func TestTamperedReport(t *testing.T) {
	be := newFakeBackend(t)
	ts := newTestServer(t, be)
	if resp, b := ts.do(t, http.MethodPost, "/v1/campaigns", specJSON("camp-t", "software/median@7"), true); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	path := filepath.Join(be.CampaignDir("camp-t"), "attestation-1-1.json")
	if err := os.WriteFile(path, []byte(`{"schema":"agentpen.attestation.v1","ok":true,"forged":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	v := ts.getView(t, "camp-t")
	if v.State != campaign.StatusReady.String() || !strings.Contains(v.Error, "does not match the digest its journal recorded") || v.Attestation != nil {
		t.Fatalf("view with a tampered report: %+v", v)
	}
	resp, b := ts.do(t, http.MethodGet, "/v1/campaigns/camp-t/attestation", nil, true)
	if p := decodeProblem(t, resp, b); resp.StatusCode != http.StatusConflict || !strings.Contains(p.Detail, "attestation-1-1.json") {
		t.Fatalf("GET the tampered report: %d %s", resp.StatusCode, b)
	}
	if resp, b := ts.do(t, http.MethodDelete, "/v1/campaigns/camp-t", nil, true); resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE: %d %s", resp.StatusCode, b)
	}
}

// TestPoolView: a generation's pool slots are counted by where each is:
// claimed (live or removed), warm (live, attested, unclaimed), refilling
// (an intent, or live and not yet attested) only while the campaign is
// up; a slot removed unclaimed is not counted; no slot, no pool.
func TestPoolView(t *testing.T) {
	claim := &campaign.Claim{TaskID: "t"}
	slots := []campaign.Slot{
		{N: 0, ContainerID: "a", Live: true, Attested: true, Claim: claim},
		{N: 1, ContainerID: "b", Claim: claim}, // claimed, since removed
		{N: 2, ContainerID: "c", Live: true, Attested: true},
		{N: 3, ContainerID: "d", Live: true},
		{N: 4},                   // an intent
		{N: 5, ContainerID: "f"}, // removed unclaimed
	}
	if got := poolView(slots, true); got == nil || *got != (api.PoolView{Warm: 1, Claimed: 2, Refilling: 2}) {
		t.Errorf("up: %+v", got)
	}
	if got := poolView(slots, false); got == nil || got.Refilling != 0 {
		t.Errorf("not up: %+v", got)
	}
	if got := poolView(nil, true); got != nil {
		t.Errorf("no pool: %+v", got)
	}
}
