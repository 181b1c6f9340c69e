package launcher

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/browsertest"
	"github.com/agentpen/agentpen/internal/testkit/fakeclock"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/store"
	"github.com/agentpen/agentpen/workbench/results"
	"github.com/chromedp/chromedp"
)

// TestCampaignPageHistory (headless Chromium, the fake backend): the
// campaign page tells campaigns removed by DELETE, by their ttl, by
// their idle timeout and by the rollback of a bring-up a restart found
// half done apart, each with its reason, its owner and its lifetime; a
// removed campaign's own page shows its episodes with their rewards, how
// each ended and why its code stopped (the inferred stop marked), its
// attestation's checks (observed, expected, pass), its cleanup report
// and the service's verification of its signatures (the fake signs
// nothing: not verified). Screenshots of both are kept.
func TestCampaignPageHistory(t *testing.T) {
	be := newFakeBackend(t)
	clock := fakeclock.New()
	clock.Advance(time.Since(fakeclock.Epoch)) // the journal's times are the wall clock's
	rolled := be.killedCreate(t, specJSON("rolled", "software/median@7"))
	ts := newTestServerClock(t, be, clock)
	if err := ts.Load(); err != nil {
		t.Fatal(err)
	}
	create := func(id string, edit func(m map[string]any)) {
		t.Helper()
		var m map[string]any
		jsonUnmarshal(specJSON(id, "software/median@7"), &m)
		edit(m)
		if resp, b := ts.do(t, http.MethodPost, "/v1/campaigns", jsonMarshal(m), true); resp.StatusCode != http.StatusCreated {
			t.Fatalf("create %s: %d %s", id, resp.StatusCode, b)
		}
	}
	create("deleted", func(map[string]any) {})
	create("expired", func(m map[string]any) { m["ttl_seconds"] = 20 })
	create("idled", func(m map[string]any) { m["idle_timeout_seconds"] = 30 })

	// The deleted campaign's episodes, collected before its removal: a
	// memory bomb's (inferred), a loop's timeout, a clean one.
	mem, loop, clean := fakeResult(0, 0, results.EndSubmitted, 0), fakeResult(0, 1, results.EndNoStepsLeft, 0), fakeResult(0, 2, results.EndSubmitted, 1)
	mem.Runs.Add(results.StopMemory)
	mem.Stop = results.RunStop{Reason: results.StopMemory, Inferred: true, Evidence: results.EvidenceMemoryError, Status: 1}
	loop.Runs.Add(results.StopTimeout)
	loop.Stop = results.RunStop{Reason: results.StopTimeout}
	clean.Runs.Add(results.StopExited)
	be.mu.Lock()
	be.pending = map[string][]store.Result{"deleted": {mem, loop, clean}}
	be.mu.Unlock()
	testenv.WaitFor(t, "the deleted campaign's results collected", func() bool {
		_, b := ts.do(t, http.MethodGet, "/v1/campaigns/deleted/episodes", nil, true)
		return strings.Count(string(b), `"episode_id"`) == 3
	})
	if resp, b := ts.do(t, http.MethodDelete, "/v1/campaigns/deleted", nil, true); resp.StatusCode != http.StatusOK {
		t.Fatalf("delete: %d %s", resp.StatusCode, b)
	}
	clock.Advance(31 * time.Second) // past the ttl, and the idle timeout
	want := map[string]string{"deleted": campaign.ReasonDelete, "expired": campaign.ReasonTTL, "idled": campaign.ReasonIdle, rolled: campaign.ReasonRollback}
	for id, reason := range want {
		if v := waitState(t, ts, id, "removed"); v.RemovalReason != reason {
			t.Fatalf("%s: removed for %q, want %q", id, v.RemovalReason, reason)
		}
	}

	br := browsertest.Start(t)
	if err := chromedp.Do(br.Ctx(), chromedp.Navigate(ts.ts.URL+"/ui/")); err != nil {
		t.Fatal(err)
	}
	if !browsertest.WaitFor(br, `document.getElementById("token") !== null`, 30*time.Second) {
		t.Fatalf("the page did not load; errors %v", br.Errors())
	}
	tok, _ := json.Marshal(testToken)
	browsertest.Eval[bool](br, `document.getElementById("token").value = `+string(tok)+`; document.getElementById("token-go").click(); true`)
	card := func(id string) string { return `document.querySelector('section[data-campaign="` + id + `"]')` }
	for id, reason := range want {
		state := card(id) + `.querySelector(".state")`
		if !browsertest.WaitFor(br, card(id)+` !== null && `+state+`.dataset.reason === "`+reason+`"`, 30*time.Second) {
			t.Fatalf("%s: the page does not show it removed for %s; errors %v", id, reason, br.Errors())
		}
		if text := browsertest.Eval[string](br, state+`.textContent`); !strings.HasPrefix(text, "removed: ") {
			t.Errorf("%s reads %q", id, text)
		}
	}
	if text := browsertest.Eval[string](br, card("expired")+`.querySelector(".facts").textContent`); !strings.Contains(text, "expires ") || !strings.Contains(text, "owner ") || !strings.Contains(text, "created ") {
		t.Errorf("the expired campaign's facts: %q", text)
	}
	br.Screenshot("campaigns-removed")

	// The deleted campaign's own page, through its link.
	browsertest.Eval[bool](br, card("deleted")+`.querySelector("a.open").click(); true`)
	page := `document.querySelector('section.page[data-campaign="deleted"]')`
	if !browsertest.WaitFor(br, page+` !== null && `+page+`.querySelectorAll("tr[data-episode]").length === 3 && `+page+`.querySelector("tr[data-check]") !== null`, 30*time.Second) {
		t.Fatalf("the campaign's page does not show its episodes and checks; errors %v", br.Errors())
	}
	row := func(ep string) string {
		return browsertest.Eval[string](br, page+`.querySelector('tr[data-episode="`+ep+`"]').textContent`)
	}
	for ep, says := range map[string][]string{
		mem.EpisodeID:   {"submitted", "0.00", "1 memory", "memory (inferred from MemoryError; exited 1)"},
		loop.EpisodeID:  {"no_steps_left", "1 timeout", "timeout"},
		clean.EpisodeID: {"submitted", "1.00", "1 exited", "every run exited 0"},
	} {
		got := row(ep)
		for _, s := range says {
			if !strings.Contains(got, s) {
				t.Errorf("episode %s reads %q, want %q in it", ep, got, s)
			}
		}
	}
	if n := browsertest.Eval[int](br, page+`.querySelectorAll("td.inferred").length`); n != 1 {
		t.Errorf("%d stops marked inferred, want 1", n)
	}
	check := browsertest.Eval[string](br, page+`.querySelector('#part-attestation tr[data-check="server.privileged"]').textContent`)
	if !strings.Contains(check, "pass") || !strings.Contains(check, "false") {
		t.Errorf("the attestation's check reads %q", check)
	}
	cln := browsertest.Eval[string](br, page+`.querySelector("#part-cleanup").textContent`)
	if !strings.Contains(cln, "cleanup verified") || !strings.Contains(cln, "deleted (DELETE)") || !strings.Contains(cln, "removed by exact id") {
		t.Errorf("the cleanup part reads %q", cln)
	}
	// The fake's reports are not signed: the page says so, and which
	// checks failed.
	ver := page + `.querySelector("#part-signatures .verification")`
	if !browsertest.WaitFor(br, ver+` !== null`, 30*time.Second) {
		t.Fatalf("no verification shown; errors %v", br.Errors())
	}
	if got := browsertest.Eval[string](br, ver+`.dataset.ok + " " + `+ver+`.textContent`); !strings.HasPrefix(got, "false NOT verified") ||
		!strings.Contains(got, "attestation-1-1.json.envelope") {
		t.Errorf("the signatures part reads %q", got)
	}
	br.Screenshot("campaign-page-deleted")
	if errs := br.Errors(); len(errs) > 0 {
		t.Errorf("the page logged errors: %q", errs)
	}
}

// TestCampaignPageFailedCheck (headless Chromium, the fake backend): a
// campaign whose attestation failed shows the failed check first, with
// what was observed and what was expected.
func TestCampaignPageFailedCheck(t *testing.T) {
	be := newFakeBackend(t)
	be.attestOK = false
	ts := newTestServer(t, be)
	ts.do(t, http.MethodPost, "/v1/campaigns", specJSON("failing", "software/median@7"), true)
	waitState(t, ts, "failing", "removed")
	br := browsertest.Start(t)
	if err := chromedp.Do(br.Ctx(), chromedp.Navigate(ts.ts.URL+"/ui/#campaign=failing")); err != nil {
		t.Fatal(err)
	}
	tok, _ := json.Marshal(testToken)
	if !browsertest.WaitFor(br, `document.getElementById("token") !== null`, 30*time.Second) {
		t.Fatalf("the page did not load; errors %v", br.Errors())
	}
	browsertest.Eval[bool](br, `document.getElementById("token").value = `+string(tok)+`; document.getElementById("token-go").click(); true`)
	first := `document.querySelector('section.page #part-attestation tr[data-check]')`
	if !browsertest.WaitFor(br, first+` !== null`, 30*time.Second) {
		t.Fatalf("no check shown; errors %v", br.Errors())
	}
	got := browsertest.Eval[string](br, first+`.dataset.check + " " + `+first+`.dataset.pass + " " + `+first+`.textContent`)
	for _, s := range []string{"server.caps false", "fail", `["NET_RAW"]`, "[]", "the observed value is not the expected one"} {
		if !strings.Contains(got, s) {
			t.Errorf("the first check reads %q, want %q in it", got, s)
		}
	}
	state := browsertest.Eval[string](br, `document.querySelector('section.page .state').dataset.reason`)
	if state != campaign.ReasonNotAttested {
		t.Errorf("removed for %q, want %q", state, campaign.ReasonNotAttested)
	}
	br.Screenshot("campaign-page-failed-check")
}
