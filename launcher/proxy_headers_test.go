package launcher

import (
	"encoding/json"
	"io/fs"
	"net/http"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/internal/webui"
	"github.com/agentpen/agentpen/workbench/playpage"
	"github.com/go-chi/chi/v5"
)

// hostileRoutes are the episode proxy's HTTP routes, each as a request:
// TestProxyOwnsEveryHeader sends each to the hostile workspace, and fails
// on a route of the router it does not send (the WebSockets, which
// answer with the proxy's own upgrade, excepted).
var hostileRoutes = []struct {
	method, path, accept, body string
	page                       bool // served from the service's copy of the play page
}{
	{http.MethodPost, "/reset", "", `{}`, false},
	{http.MethodPost, "/step", "", `{"action": {"tool": "list_files", "args": {}}}`, false},
	{http.MethodGet, "/state", "", "", false},
	{http.MethodGet, "/schema", "", "", false},
	{http.MethodGet, "/metadata", "", "", false},
	{http.MethodGet, "/health", "", "", false},
	{http.MethodGet, "/web/metadata", "", "", false},
	{http.MethodGet, "/web/state", "", "", false},
	{http.MethodPost, "/web/reset", "", `{}`, false},
	{http.MethodPost, "/web/step", "", `{"action": {"tool": "list_files", "args": {}}}`, false},
	{http.MethodPost, "/mcp", "application/json, text/event-stream", `{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}`, false},
	{http.MethodGet, "/mcp", "text/event-stream", "", false},
	{http.MethodDelete, "/mcp", "", "", false},
	{http.MethodGet, "/web", "", "", true},
	{http.MethodGet, "/web/", "", "", true},
	{http.MethodGet, "/web/index.html", "", "", true},
	{http.MethodGet, "/web/play.js", "", "", true},
	{http.MethodGet, "/web/ui.js", "", "", true},
	{http.MethodGet, "/web/ui.css", "", "", true},
	{http.MethodGet, "/web/icon.svg", "", "", true},
}

// TestProxyOwnsEveryHeader: a hostile workspace server (run as the
// daemon's user on the workspace's socket) answers every route with a
// page of inline script, its own CSP, a Location, a cookie and other
// headers, and with answers a route does not take (markup typed as JSON,
// JSON typed as markup, a redirect, an error page). Every answer on the
// API's origin carries the service's headers (its CSP, nosniff, no
// referrer, no frame) and none of the workspace's; its type is the
// route's (JSON, an event stream where MCP streams, the problem of a
// refusal) and its body that type, the workspace's markup never; the
// play page and its files are the service's own bytes; no Location
// leaves the base_url. The proxy used to relay the workspace's type,
// CSP and Location onto the API's origin.
func TestProxyOwnsEveryHeader(t *testing.T) {
	ts, h, base := hostileFixture(t)
	sent := map[string]bool{}
	for _, rt := range hostileRoutes {
		sent[rt.method+" "+episodePrefix+"/{capability}"+rt.path] = true
	}
	chi.Walk(ts.Server.router, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if strings.HasPrefix(route, episodePrefix+"/") && !strings.HasSuffix(route, "/ws") && !strings.HasSuffix(route, "/ws/ui") && !strings.HasSuffix(route, "/web/{file}") && !sent[method+" "+route] {
			t.Errorf("the proxy's route %s %s is not sent to the hostile workspace", method, route)
		}
		return nil
	})
	for _, rt := range hostileRoutes {
		resp, b := rawRequest(t, rt.method, base+rt.path, rt.accept, rt.body)
		what := rt.method + " " + rt.path
		hd := resp.Header
		csp := ProxyCSP
		if rt.page && resp.StatusCode == http.StatusOK {
			csp = webui.CSP
		}
		if hd.Get("Content-Security-Policy") != csp || hd.Get("X-Content-Type-Options") != "nosniff" || hd.Get("Referrer-Policy") != "no-referrer" || hd.Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: %d, headers %v: want the service's own", what, resp.StatusCode, hd)
		}
		for _, name := range []string{"Set-Cookie", "Refresh", "Access-Control-Allow-Origin", "X-Hostile", "Mcp-Session-Id"} {
			if v := hd.Values(name); len(v) > 0 {
				t.Errorf("%s: the workspace's %s relayed: %q", what, name, v)
			}
		}
		if loc := hd.Get("Location"); loc != "" && !(rt.path == "/web" && loc == "web/") {
			t.Errorf("%s: Location %q relayed", what, loc)
		}
		for _, v := range hd {
			if strings.Contains(strings.Join(v, " "), hostileMark) {
				t.Errorf("%s: a header carries the workspace's bytes: %v", what, hd)
			}
		}
		ct := hd.Get("Content-Type")
		switch {
		case rt.page && rt.path == "/web":
			if resp.StatusCode != http.StatusTemporaryRedirect || len(b) != 0 {
				t.Errorf("%s: %d %q, want the service's own relative redirect", what, resp.StatusCode, b)
			}
		case rt.page:
			name := strings.TrimPrefix(rt.path, "/web/")
			if name == "" {
				name = "index.html"
			}
			own, err := fs.ReadFile(playpage.Files(), name)
			if err != nil {
				own, err = fs.ReadFile(webui.Shared(), name)
			}
			if err != nil || resp.StatusCode != http.StatusOK || string(b) != string(own) {
				t.Errorf("%s: %d, %d bytes: want the service's own copy (%v)", what, resp.StatusCode, len(b), err)
			}
		case ct == "application/json", ct == "application/problem+json":
			if !json.Valid(b) {
				t.Errorf("%s: %d %s, a body that is not JSON: %.200s", what, resp.StatusCode, ct, b)
			}
			if strings.Contains(string(b), hostileMark) && rt.path != "/web/metadata" {
				t.Errorf("%s: %d, the workspace's answer relayed: %.200s", what, resp.StatusCode, b)
			}
		case ct == "text/event-stream" && rt.path == "/mcp" && rt.method == http.MethodGet:
		default:
			t.Errorf("%s: %d, Content-Type %q: not one this route answers", what, resp.StatusCode, ct)
		}
		// A refused answer is a problem, the workspace's error status
		// kept (it failed), any other a 502.
		if ct == "application/problem+json" && resp.StatusCode != http.StatusBadGateway && resp.StatusCode != http.StatusInternalServerError {
			t.Errorf("%s: refused with %d, want 502 (500 for the workspace's 500)", what, resp.StatusCode)
		}
		t.Logf("%s: %d %s", what, resp.StatusCode, ct)
	}
	// The answers the workspace gave that a route takes came through:
	// markup inside JSON, as data; an event stream, as one.
	if resp, b := rawRequest(t, http.MethodGet, base+"/web/metadata", "", ""); resp.Header.Get("Content-Type") != "application/json" || !strings.Contains(string(b), hostileMark) {
		t.Errorf("JSON the route takes was not relayed: %d %s", resp.StatusCode, b)
	}
	if len(h.requests(t)) == 0 {
		t.Fatal("nothing reached the hostile workspace: the test tested nothing")
	}
}
