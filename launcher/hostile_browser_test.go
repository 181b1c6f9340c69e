package launcher

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentpen/agentpen/internal/testkit/browsertest"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
)

// TestHostileWorkspaceInTheBrowser (headless Chromium): the workspace's
// page may not speak on the launcher API's origin. A hostile workspace
// server (the daemon's user, on the workspace's socket) answers every
// route with a page whose inline script would open the campaign page in
// a window of the same origin and read the Authorization of every request
// it makes (the operator's token opens every campaign). The operator
// opens the workspace's play page and every route of its base_url in the
// browser, then the campaign page (in the window the workspace's script
// opened, when it did) and types the token: no script of the workspace's
// ran (no window opened, nothing marked, nothing sent back), the play
// page is the service's own, and the workspace never saw the token. It
// used to run: the proxy relayed the page as it was, with its CSP.
func TestHostileWorkspaceInTheBrowser(t *testing.T) {
	ts, h, base := hostileFixture(t)
	br := browsertest.Start(t)
	navigate := func(u string) {
		t.Helper()
		if err := chromedp.Do(br.Ctx(), chromedp.Navigate(u)); err != nil {
			// A redirect of the workspace's, followed off the loopback.
			t.Errorf("navigate to %s: %v", u, err)
			return
		}
		if !browsertest.WaitFor(br, `document.readyState === "complete"`, 30*time.Second) {
			t.Fatalf("%s did not load", u)
		}
	}
	ran := func(where string) {
		t.Helper()
		// A script of the workspace's marks the window; given the time a
		// script on the page takes to run (its fetches, its window).
		time.Sleep(300 * time.Millisecond)
		if got := browsertest.Eval[string](br, `String(window.__pwned) + " " + document.title`); strings.Contains(got, "true") || strings.Contains(got, "PWNED") || strings.Contains(got, hostileMark) {
			t.Errorf("%s: the workspace's script ran on the API's origin (%q)", where, got)
		}
	}
	for _, p := range []string{"/state", "/schema", "/metadata", "/health", "/web/state", "/web/metadata", "/mcp"} {
		navigate(base + p)
		ran(p)
	}
	// The play page last: the operator stays on it.
	opened := chromedp.WaitNewTarget(br.Ctx(), func(i *target.Info) bool { return i.Type == "page" })
	navigate(base + "/web")
	if title := browsertest.Eval[string](br, `document.title`); title != "Workbench play page" {
		t.Errorf("the play page is %q, not the service's own", title)
	}
	// What the workspace answered that the routes take (its metadata's
	// name, the live state's task: markup inside JSON) shows as text.
	if !browsertest.WaitFor(br, `document.getElementById("name") && document.getElementById("name").textContent.includes("`+hostileMark+`") && document.getElementById("task").textContent.includes("`+hostileMark+`")`, 10*time.Second) {
		t.Errorf("the play page does not show the workspace's metadata and state: %.300q", browsertest.Eval[string](br, `document.body.outerHTML`))
	}
	if n := browsertest.Eval[int](br, `document.querySelectorAll("#name *, #task *, #output *").length`); n != 0 {
		t.Errorf("the workspace's markup became %d elements of the play page", n)
	}
	ran("the play page")
	br.Screenshot("hostile-workspace-play-page")
	// The campaign page, and the token typed: in the workspace's window
	// when its script opened one (what the attack waits for).
	ctx := br.Ctx()
	select {
	case id := <-opened:
		t.Errorf("the workspace's script opened a window of the API's origin (%s)", id)
		wctx, cancel := chromedp.NewContext(br.Ctx(), chromedp.WithTargetID(id))
		defer cancel()
		ctx = wctx
		chromedp.Do(ctx, chromedp.Navigate(ts.ts.URL+"/ui/"))
	default:
		navigate(ts.ts.URL + "/ui/")
	}
	tok, _ := json.Marshal(testToken)
	var listed bool
	deadline := time.Now().Add(30 * time.Second)
	for !listed && time.Now().Before(deadline) {
		listed, _ = chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const f = document.getElementById("token"); if (f && !window.__typed) { f.value = `+string(tok)+`; document.getElementById("token-go").click(); window.__typed = true; } return document.querySelector('[data-campaign="hostile"]') !== null; })()`))
		time.Sleep(50 * time.Millisecond)
	}
	if !listed {
		t.Fatalf("the campaign page does not list the campaign; errors %v", br.Errors())
	}
	time.Sleep(500 * time.Millisecond) // what a hooked fetch would have sent
	for _, r := range h.requests(t) {
		all, _ := json.Marshal(r)
		if strings.Contains(r.Body, "PWNED") {
			t.Errorf("the workspace's script sent: %s %s %s", r.Method, r.Path, r.Body)
		}
		if strings.Contains(string(all), testToken) || r.Header.Get("Authorization") != "" || r.Header.Get("Cookie") != "" {
			t.Errorf("the workspace saw the token or a credential: %s", all)
		}
	}
	origin, _ := url.Parse(ts.ts.URL)
	for _, u := range br.Requests() {
		if p, err := url.Parse(u); err != nil || p.Host != origin.Host {
			t.Errorf("a request off the API's origin (a redirect of the workspace's followed?): %s", u)
		}
	}

}
