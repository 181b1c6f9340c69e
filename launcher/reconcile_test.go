package launcher

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentpen/agentpen/api"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/events"
	"github.com/agentpen/agentpen/internal/testkit/fakeclock"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

// waitState waits until GET says the campaign is in state.
func waitState(t *testing.T, ts *testServer, id, state string) api.CampaignView {
	t.Helper()
	var v api.CampaignView
	testenv.WaitFor(t, id+" to read "+state, func() bool {
		v = ts.getView(t, id)
		return v.State == state
	})
	return v
}

// readyWithLifetime brings a campaign up through the fake (as agentpen up
// or an earlier serve did) with lifetime l.
func (f *fakeBackend) readyWithLifetime(t *testing.T, id string, l campaign.Lifetime) {
	t.Helper()
	p := f.plan(t, specJSON(id, "software/median@7"))
	p.Lifetime = l
	if _, err := f.Up(context.Background(), f.root, p, adapterUpOptions()); err != nil {
		t.Fatal(err)
	}
}

// TestReconcileAtLoad: a service that starts on a state root an earlier
// one left (killed) reconciles every campaign with its journal: a
// bring-up that did not finish is rolled back, a removal that did not
// finish is finished with its own reason, a campaign past its deadline is
// removed (ttl), the rest is served; each action is in the campaign's
// events and the log; a campaign reads deleting until its reconciliation
// is done.
func TestReconcileAtLoad(t *testing.T) {
	be := newFakeBackend(t)
	clock := fakeclock.New()
	clock.Advance(time.Since(fakeclock.Epoch)) // the clock at the journal's time
	killed := be.killedCreate(t, specJSON("killed", "software/median@7"))
	be.readyWithLifetime(t, "down-cut", campaign.Lifetime{})
	be.interruptedDown(t, "down-cut")
	be.readyWithLifetime(t, "expired", campaign.Lifetime{Accepted: clock.Now().Add(-time.Hour), TTL: time.Minute})
	be.readyWithLifetime(t, "fine", campaign.Lifetime{Accepted: clock.Now(), TTL: time.Hour})
	be.readyWithLifetime(t, "forever", campaign.Lifetime{})
	ts := newTestServerClock(t, be, clock)
	if err := ts.Load(); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{killed: campaign.ReasonRollback, "down-cut": campaign.ReasonDown, "expired": campaign.ReasonTTL}
	for id, reason := range want {
		v := waitState(t, ts, id, campaign.StatusRemoved.String())
		if v.RemovalReason != reason {
			t.Errorf("%s: removal reason %q, want %q", id, v.RemovalReason, reason)
		}
		evs := readSSE(t, ts.openEvents(t, t.Context(), id, "").Body, 0)
		var seen []events.Type
		for _, e := range evs {
			if e.ev.Type == events.RemovalStarted && e.ev.Reason != reason {
				t.Errorf("%s: removal_started %q, want %q", id, e.ev.Reason, reason)
			}
			seen = append(seen, e.ev.Type)
		}
		if !slices.Contains(seen, events.RemovalStarted) || !slices.Contains(seen, events.Cleanup) || seen[len(seen)-1] != events.State {
			t.Errorf("%s: events %v", id, seen)
		}
		if id == killed && !slices.Contains(seen, events.RolledBack) {
			t.Errorf("the rolled back create's events say nothing of it: %v", seen)
		}
		if !strings.Contains(ts.logs.String(), `"msg":"reconcile","campaign":"`+id+`","outcome":"`+reason+`: removed, cleanup verified"`) {
			t.Errorf("%s: no reconcile line in the log:\n%s", id, ts.logs.String())
		}
	}
	for _, id := range []string{"fine", "forever"} {
		if v := ts.getView(t, id); v.State != "ready" || len(v.Workspaces) != 1 {
			t.Errorf("%s: %+v, want it served", id, v)
		}
	}
	if calls := be.Calls(); slices.Contains(calls, "Cleanup fine") || slices.Contains(calls, "Cleanup forever") {
		t.Errorf("a campaign to serve was removed: %v", calls)
	}
}

// TestLifetimeExpiry: a campaign created through the API with a ttl is
// removed at its deadline on the service's clock, not a moment before,
// reason ttl; one with an idle timeout is removed once no episode went
// through it for that long, each reset moving the deadline; PATCH
// extends them.
func TestLifetimeExpiry(t *testing.T) {
	// Each part on a service of its own whose clock starts at the wall
	// clock's now: the journal's times (readiness, extensions) are the
	// wall clock's.
	start := func(t *testing.T) (*fakeBackend, *fakeclock.Clock, *testServer) {
		be := newFakeBackend(t)
		clock := fakeclock.New()
		clock.Advance(time.Since(fakeclock.Epoch))
		ts := newTestServerClock(t, be, clock)
		if err := ts.Load(); err != nil {
			t.Fatal(err)
		}
		return be, clock, ts
	}
	create := func(t *testing.T, ts *testServer, id string, edit func(m map[string]any)) api.CampaignView {
		var m map[string]any
		jsonUnmarshal(specJSON(id, "software/median@7"), &m)
		edit(m)
		resp, b := ts.do(t, http.MethodPost, "/v1/campaigns", jsonMarshal(m), true)
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("create %s: %d %s", id, resp.StatusCode, b)
		}
		return ts.getView(t, id)
	}
	t.Run("ttl", func(t *testing.T) {
		_, clock, ts := start(t)
		v := create(t, ts, "ttl-1", func(m map[string]any) { m["ttl_seconds"] = 20 })
		if v.Lifetime == nil || v.Lifetime.TTLSeconds != 20 || v.Lifetime.ExpiresAt == nil || !v.Lifetime.ExpiresAt.Equal(v.Lifetime.AcceptedAt.Add(20*time.Second)) {
			t.Fatalf("lifetime %+v", v.Lifetime)
		}
		clock.Advance(19 * time.Second)
		if v := ts.getView(t, "ttl-1"); v.State != "ready" {
			t.Fatalf("a second before its deadline: %s", v.State)
		}
		clock.Advance(time.Second)
		v = waitState(t, ts, "ttl-1", "removed")
		if v.RemovalReason != campaign.ReasonTTL || v.Cleanup == nil || v.Cleanup.Status != "verified" {
			t.Fatalf("after its deadline: %+v", v)
		}
		if resp, b := ts.do(t, http.MethodPatch, "/v1/campaigns/ttl-1", []byte(`{"ttl_seconds":3600}`), true); resp.StatusCode != http.StatusConflict {
			t.Errorf("patch of a removed campaign: %d %s", resp.StatusCode, b)
		}
	})
	t.Run("idle", func(t *testing.T) {
		be, clock, ts := start(t)
		create(t, ts, "idle-1", func(m map[string]any) { m["idle_timeout_seconds"] = 30 })
		clock.Advance(25 * time.Second)
		be.setActivity("idle-1", clock.Now()) // a reset, 25 s in
		clock.Advance(10 * time.Second)       // 35 s since ready, 10 s since the reset
		if v := ts.getView(t, "idle-1"); v.State != "ready" {
			t.Fatalf("10 s after a reset: %s", v.State)
		}
		// PATCH: a longer idle timeout, and a ttl; the new deadlines hold.
		resp, b := ts.do(t, http.MethodPatch, "/v1/campaigns/idle-1", []byte(`{"idle_timeout_seconds":60,"ttl_seconds":3600}`), true)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"idle_timeout_seconds":60`) || !strings.Contains(string(b), `"ttl_seconds":3600`) {
			t.Fatalf("patch: %d %s", resp.StatusCode, b)
		}
		clock.Advance(40 * time.Second) // 50 s after the reset
		if v := ts.getView(t, "idle-1"); v.State != "ready" {
			t.Fatalf("within the extended idle timeout: %s", v.State)
		}
		clock.Advance(25 * time.Second) // 75 s after the reset, with no episode since
		if v := waitState(t, ts, "idle-1", "removed"); v.RemovalReason != campaign.ReasonIdle {
			t.Fatalf("idle: %+v", v)
		}
	})
	t.Run("patch_refused", func(t *testing.T) {
		_, clock, ts := start(t)
		create(t, ts, "patch-1", func(m map[string]any) {})
		for _, c := range []struct {
			body string
			code int
			loc  string
		}{
			{`{}`, http.StatusBadRequest, ""},
			{`{"ttl_seconds":5}`, http.StatusUnprocessableEntity, "body.ttl_seconds"},
			{`{"idle_timeout_seconds":-1}`, http.StatusUnprocessableEntity, ""},
			{`{"ttl_seconds":10}`, http.StatusUnprocessableEntity, "body.ttl_seconds"}, // accepted minutes ago
		} {
			clock.Advance(time.Minute)
			resp, b := ts.do(t, http.MethodPatch, "/v1/campaigns/patch-1", []byte(c.body), true)
			if resp.StatusCode != c.code || c.loc != "" && !strings.Contains(string(b), c.loc) {
				t.Errorf("patch %s: %d %s, want %d naming %s", c.body, resp.StatusCode, b, c.code, c.loc)
			}
		}
		if v := ts.getView(t, "patch-1"); v.State != "ready" || v.Lifetime != nil {
			t.Fatalf("after refused patches: %+v", v)
		}
	})
}

// TestLifetimePolicyAtCreate: a create with no lifetime gets the
// service's defaults; one asking for more than its maxima is refused
// naming the field, and nothing is made.
func TestLifetimePolicyAtCreate(t *testing.T) {
	be := newFakeBackend(t)
	ts := newTestServerConfig(t, be, func(c *Config) {
		c.Lifetime = campaign.LifetimePolicy{DefaultTTL: time.Hour, MaxTTL: 2 * time.Hour, DefaultIdle: 10 * time.Minute, MaxIdle: time.Hour}
	})
	if resp, b := ts.do(t, http.MethodPost, "/v1/campaigns", specJSON("camp-1", "software/median@7"), true); resp.StatusCode != http.StatusCreated ||
		!strings.Contains(string(b), `"ttl_seconds":3600`) || !strings.Contains(string(b), `"idle_timeout_seconds":600`) {
		t.Fatalf("defaults: %d %s", resp.StatusCode, b)
	}
	var m map[string]any
	jsonUnmarshal(specJSON("camp-2", "software/median@7"), &m)
	m["ttl_seconds"], m["idle_timeout_seconds"] = 3*3600, 7200
	resp, b := ts.do(t, http.MethodPost, "/v1/campaigns", jsonMarshal(m), true)
	p := decodeProblem(t, resp, b)
	if resp.StatusCode != http.StatusUnprocessableEntity || len(p.Errors) != 2 || p.Errors[0].Location != "body.ttl_seconds" || p.Errors[1].Location != "body.idle_timeout_seconds" {
		t.Fatalf("over the maxima: %d %s", resp.StatusCode, b)
	}
	if slices.Contains(be.Calls(), "BringUp camp-2") {
		t.Fatal("a refused create reached the adapter")
	}
	// A workspace running its own command stamps no workbench socket: no
	// idle timeout it did not ask for.
	var own map[string]any
	jsonUnmarshal(specJSON("camp-3", "software/median@7"), &own)
	own["workspaces"].([]any)[0].(map[string]any)["command"] = []string{"sleep", "600"}
	if resp, b := ts.do(t, http.MethodPost, "/v1/campaigns", jsonMarshal(own), true); resp.StatusCode != http.StatusCreated ||
		!strings.Contains(string(b), `"ttl_seconds":3600`) || strings.Contains(string(b), `"idle_timeout_seconds"`) {
		t.Fatalf("own command: %d %s", resp.StatusCode, b)
	}
}

// TestEmptyAtLoad: a service that starts on a state root where a create
// stopped before its first record removes what that left: the
// directory of a create killed before it (never listed) at once, and the
// directory of a campaign whose journal holds none (an older agentpen's)
// once nothing on the daemon carries its id, logged; until then it reads
// empty, never removed.
func TestEmptyAtLoad(t *testing.T) {
	be := newFakeBackend(t)
	be.readyWithLifetime(t, "fine", campaign.Lifetime{})
	dir := be.root.CampaignDir("ghost")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, campaign.JournalFile), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := be.root.Create("killed-early"); err != nil { // never closed
		t.Fatal(err)
	}
	ts := newTestServer(t, be)
	if v := ts.getView(t, "ghost"); v.State != campaign.StatusEmpty.String() {
		t.Fatalf("before Load: %+v, want empty", v)
	}
	// A create of its id meanwhile: a conflict that says what to do.
	if resp, b := ts.do(t, http.MethodPost, "/v1/campaigns", specJSON("ghost", "software/median@7"), true); resp.StatusCode != http.StatusConflict || !strings.Contains(string(b), "agentpen reconcile") {
		t.Fatalf("a create over the empty campaign: %d %s, want 409", resp.StatusCode, b)
	}
	if err := ts.Load(); err != nil {
		t.Fatal(err)
	}
	if staged, err := be.root.Staged(); err != nil || len(staged) != 0 {
		t.Fatalf("after Load: staged %+v %v", staged, err)
	}
	testenv.WaitFor(t, "the empty campaign's directory to go", func() bool {
		resp, _ := ts.do(t, http.MethodGet, "/v1/campaigns/ghost", nil, true)
		return resp.StatusCode == http.StatusNotFound
	})
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("still there: %v", err)
	}
	// Logged once the removal is done (the GET above may see it first).
	testenv.WaitFor(t, "the removal's line in the log", func() bool {
		return strings.Contains(ts.logs.String(), `"outcome":"empty (its journal holds no generation): its directory removed"`)
	})
	if v := ts.getView(t, "fine"); v.State != "ready" {
		t.Errorf("fine: %+v, want it served", v)
	}
}
