package launcher_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentpen/agentpen/internal/testkit/browsertest"
	"github.com/chromedp/chromedp"
)

// TestCampaignPageBrowser (real daemon, headless Chromium with no
// network but the loopback): the campaign page, given the token, shows a
// live campaign's workspace and the result of the oracle episode played
// through its base_url, live (the episode ends after the page loaded);
// the token never reaches the address, a cookie or the browser's
// storage; no console error; no request off the service's origin; the
// campaign's own page says its signed reports verified; screenshots
// are kept.
func TestCampaignPageBrowser(t *testing.T) {
	l := startLive(t)
	id := "ui-" + randHex(8)
	v := l.create(t, id, e2eTasks[:1])
	w := v.Workspaces[0]
	br := browsertest.Start(t)
	if err := chromedp.Do(br.Ctx(), chromedp.Navigate(l.ts.URL+"/ui")); err != nil {
		t.Fatal(err)
	}
	if !browsertest.WaitFor(br, `document.getElementById("token") !== null`, 30*time.Second) {
		t.Fatalf("the page did not load; errors %v", br.Errors())
	}
	tok, _ := json.Marshal(l.token)
	browsertest.Eval[bool](br, `document.getElementById("token").value = `+string(tok)+`; document.getElementById("token-go").click(); true`)
	row := `document.querySelector('[data-campaign="` + id + `"] tr[data-agent="` + w.AgentID + `"]')`
	if !browsertest.WaitFor(br, row+` !== null && `+row+`.textContent.includes("no episode yet")`, 30*time.Second) {
		t.Fatalf("the page does not show the campaign's workspace; errors %v", br.Errors())
	}
	playThroughProxy(t, w.BaseURL, w.TaskID, e2eTasks[1])
	if !browsertest.WaitFor(br, row+`.querySelector(".results").textContent.includes("submitted, reward 1.00")`, 30*time.Second) {
		t.Fatalf("the page does not show the episode's result: %q", browsertest.Eval[string](br, row+`.textContent`))
	}
	if state := browsertest.Eval[string](br, `document.querySelector('[data-campaign="`+id+`"]').dataset.state`); state != "ready" {
		t.Errorf("the page shows the campaign %s", state)
	}
	br.Screenshot("campaign-page")
	// Its own page: the service verifies its signed reports.
	browsertest.Eval[bool](br, `document.querySelector('[data-campaign="`+id+`"] a.open').click(); true`)
	ver := `document.querySelector('section.page[data-campaign="` + id + `"] #part-signatures .verification')`
	if !browsertest.WaitFor(br, ver+` !== null`, 30*time.Second) {
		t.Fatalf("the campaign's page shows no verification; errors %v", br.Errors())
	}
	if got := browsertest.Eval[string](br, ver+`.textContent`); !strings.HasPrefix(got, "signatures verified") {
		t.Errorf("the signatures part reads %q", got)
	}
	br.Screenshot("campaign-page-own")
	leak := browsertest.Eval[string](br, `location.href + "|" + document.cookie + "|" + JSON.stringify(localStorage) + "|" + JSON.stringify(sessionStorage) + "|" + document.getElementById("token").value`)
	if strings.Contains(leak, l.token) {
		t.Errorf("the token is in the address, a cookie, the storage or the field: %q", leak)
	}
	if errs := br.Errors(); len(errs) > 0 {
		t.Errorf("the page logged errors: %q", errs)
	}
	origin, _ := url.Parse(l.ts.URL)
	for _, u := range br.Requests() {
		if p, err := url.Parse(u); err != nil || p.Host != origin.Host {
			t.Errorf("a request off the service's origin: %s", u)
		}
	}
	if strings.Contains(l.logs.String(), l.token) {
		t.Error("the token is in the service's log")
	}
}
