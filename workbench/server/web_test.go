package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentpen/agentpen/internal/testkit/browsertest"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/internal/webui"
	"github.com/agentpen/agentpen/workbench/bind"
	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"
)

// TestPlayPageRoutes: OpenEnv's web routes on one shared environment:
// /web redirects (relatively) to /web/, the page and its files carry the
// CSP and weigh at most 150 KB, /web/metadata lists the tools with their
// schemas, a step before a reset is refused, a reset naming another task
// is refused on a bound workspace, and /ws/ui pushes the episode state
// after each reset and step.
func TestPlayPageRoutes(t *testing.T) {
	b, _ := bind.Fixed("logs/error_count@1")
	s, base := mcpWorld(t, b, nil)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(base + "/web")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTemporaryRedirect || resp.Header.Get("Location") != "web/" {
		t.Errorf("/web: %d Location %q, want a relative redirect to web/", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, f := range []string{"", "index.html", "play.js", "ui.js", "ui.css", "icon.svg"} {
		resp, err := http.Get(base + "/web/" + f)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Security-Policy") != webui.CSP || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("/web/%s: %d, headers %v", f, resp.StatusCode, resp.Header)
		}
	}
	if resp, _ := http.Get(base + "/web/../server.go"); resp.StatusCode != 404 {
		t.Errorf("a path out of the page: %d", resp.StatusCode)
	}
	if n, err := webui.Size(PlayPage()); err != nil || n > 150<<10 {
		t.Errorf("the play page weighs %d bytes (%v), want at most 150 KB", n, err)
	} else {
		t.Logf("the play page and its files: %d bytes", n)
	}
	var md struct {
		Name  string `json:"name"`
		Tools []struct {
			Name        string         `json:"name"`
			InputSchema map[string]any `json:"input_schema"`
		} `json:"tools"`
	}
	r, _ := http.Get(base + "/web/metadata")
	json.NewDecoder(r.Body).Decode(&md)
	r.Body.Close()
	if len(md.Tools) != 7 || md.Tools[1].InputSchema["type"] != "object" {
		t.Errorf("/web/metadata tools: %+v", md.Tools)
	}
	if code, b := post(t, base+"/web/step", `{"action":{"tool":"list_files"}}`); code != http.StatusConflict {
		t.Errorf("a step before a reset: %d %s", code, b)
	}

	ctx := testenv.Context(t)
	ui, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/ws/ui", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ui.CloseNow()
	update := func() map[string]any {
		t.Helper()
		_, b, err := ui.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Type  string         `json:"type"`
			State map[string]any `json:"episode_state"`
		}
		if json.Unmarshal(b, &m) != nil || m.Type != "state_update" {
			t.Fatalf("/ws/ui sent %s", b)
		}
		return m.State
	}
	if st := update(); st["is_reset"] != false || st["episode_id"] != nil {
		t.Errorf("the first update before any reset: %v", st)
	}
	if code, b := post(t, base+"/web/reset", `{"task_id":"sql/top_customer"}`); code != http.StatusUnprocessableEntity || !strings.Contains(b, "bound to its task") {
		t.Errorf("/web/reset naming another task: %d %s", code, b)
	}
	if code, b := post(t, base+"/web/reset", `{}`); code != 200 || !strings.Contains(b, `"task_id":"logs/error_count@1"`) {
		t.Fatalf("/web/reset: %d %.200s", code, b)
	}
	if st := update(); st["is_reset"] != true || st["task"] == "" || len(st["action_logs"].([]any)) != 0 {
		t.Errorf("the update after the reset: %v", st)
	}
	if code, b := post(t, base+"/web/step", `{"action":{"tool":"read_file","args":{"path":"app.log"}}}`); code != 200 || !strings.Contains(b, `"steps_left":19`) {
		t.Errorf("/web/step: %d %.200s", code, b)
	}
	if st := update(); st["step_count"] != 1.0 || len(st["action_logs"].([]any)) != 1 {
		t.Errorf("the update after the step: %v", st)
	}
	r, _ = http.Get(base + "/web/state")
	sb, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if !strings.Contains(string(sb), `"step_count":1`) {
		t.Errorf("/web/state: %s", sb)
	}
	if s.ActiveSessions() != 1 {
		t.Errorf("active sessions %d: the play page's environment holds one slot", s.ActiveSessions())
	}
}

// TestPlayPageBrowser: in headless Chromium with no network but the
// loopback, the play page on a bound workspace refuses a reset naming
// another task, plays an oracle episode to reward 1.0 through its forms,
// shows each call in the log, logs no console error and makes no request
// off its own origin; a screenshot is kept.
func TestPlayPageBrowser(t *testing.T) {
	const task = "logs/error_count@1"
	b, _ := bind.Fixed(task)
	_, base := mcpWorld(t, b, nil)
	br := browsertest.Start(t)
	if err := chromedp.Do(br.Ctx(), chromedp.Navigate(base+"/web")); err != nil {
		t.Fatal(err)
	}
	if !browsertest.WaitFor(br, `document.getElementById("tool-submit") && document.getElementById("status").textContent === "live"`, 30*time.Second) {
		t.Fatalf("the page did not load its tools or its live state; errors %v", br.Errors())
	}
	if _, errText, err := br.PlayReset("sql/top_customer"); err != nil || !strings.Contains(errText, "bound to its task") {
		t.Errorf("a reset naming another task on the page: %v, the page shows %q", err, errText)
	}
	final, err := br.PlayOracle(task)
	if err != nil {
		t.Fatal(err)
	}
	if !final.Done || final.Reward != 1.0 {
		t.Fatalf("final %+v, want done with 1.0", final)
	}
	steps := browsertest.Eval[string](br, `document.getElementById("log").dataset.steps`)
	if !browsertest.WaitFor(br, `document.querySelectorAll("#log li").length >= 3 && document.querySelector("#log li:last-child").textContent.includes("reward 1.0")`, 10*time.Second) {
		t.Errorf("the action log (%s steps) does not end with the reward", steps)
	}
	shot := br.Screenshot("play-page")
	if fi, err := os.Stat(shot); err != nil || fi.Size() < 10<<10 {
		t.Errorf("screenshot %s: %v", shot, err)
	}
	// The one error the page may log: Chromium's own line for the 422 of
	// the refused reset, which the test asked for.
	var errs []string
	refused := 0
	for _, e := range br.Errors() {
		if strings.Contains(e, "status of 422") && strings.HasSuffix(e, "/web/reset") {
			refused++
			continue
		}
		errs = append(errs, e)
	}
	if len(errs) > 0 || refused != 1 {
		t.Errorf("the page logged errors: %q (and %d lines for the refused reset, want 1)", errs, refused)
	}
	origin, _ := url.Parse(base)
	for _, u := range br.Requests() {
		p, err := url.Parse(u)
		if err != nil || p.Host != origin.Host {
			t.Errorf("a request off the page's origin: %s", u)
		}
	}
	t.Logf("%d requests, all to %s", len(br.Requests()), origin.Host)
}
