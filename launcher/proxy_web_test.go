package launcher

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentpen/agentpen/internal/testkit/browsertest"
	"github.com/agentpen/agentpen/internal/webui"
	"github.com/chromedp/chromedp"
)

// TestProxyPlayPage: the workspace's play page through its base_url, in
// headless Chromium with no network but the loopback: its files carry
// the page's CSP, a reset naming another task is refused, an oracle
// episode reaches reward 1.0 through the forms with the live state
// relayed (/ws/ui), no console error, no request off the origin; a
// screenshot is kept.
func TestProxyPlayPage(t *testing.T) {
	const task = "logs/error_count@1"
	_, base := newMCPFixture(t, task)
	for _, f := range []string{"web/", "web/play.js", "web/ui.css"} {
		resp, err := http.Get(base + "/" + f)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Security-Policy") != webui.CSP {
			t.Errorf("%s through the base_url: %d, CSP %q", f, resp.StatusCode, resp.Header.Get("Content-Security-Policy"))
		}
	}
	br := browsertest.Start(t)
	if err := chromedp.Do(br.Ctx(), chromedp.Navigate(base+"/web")); err != nil {
		t.Fatal(err)
	}
	if loc := browsertest.Eval[string](br, `location.href`); loc != base+"/web/" {
		t.Errorf("/web led to %s, want %s/web/", loc, base)
	}
	if !browsertest.WaitFor(br, `document.getElementById("tool-submit") && document.getElementById("status").textContent === "live"`, 30*time.Second) {
		t.Fatalf("the page did not load its tools or its live state through the base_url; errors %v", br.Errors())
	}
	if _, errText, err := br.PlayReset("sql/top_customer"); err != nil || !strings.Contains(errText, "bound to its task") {
		t.Errorf("a reset naming another task: %v, the page shows %q", err, errText)
	}
	final, err := br.PlayOracle(task)
	if err != nil {
		t.Fatal(err)
	}
	if !final.Done || final.Reward != 1.0 {
		t.Fatalf("final %+v, want done with 1.0", final)
	}
	if !browsertest.WaitFor(br, `document.querySelector("#log li:last-child") && document.querySelector("#log li:last-child").textContent.includes("reward 1.0")`, 10*time.Second) {
		t.Error("the live action log through the base_url does not end with the reward")
	}
	br.Screenshot("play-page-base-url")
	var errs []string
	for _, e := range br.Errors() {
		if !(strings.Contains(e, "status of 422") && strings.HasSuffix(e, "/web/reset")) {
			errs = append(errs, e)
		}
	}
	if len(errs) > 0 {
		t.Errorf("the page logged errors: %q", errs)
	}
	origin, _ := url.Parse(base)
	for _, u := range br.Requests() {
		if p, err := url.Parse(u); err != nil || p.Host != origin.Host || !strings.HasPrefix(p.Path, origin.Path+"/") {
			t.Errorf("a request off the workspace's base_url: %s", u)
		}
	}
}
