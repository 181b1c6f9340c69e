package launcher

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/internal/webui"
)

// TestCampaignPageFiles: /ui redirects to ui/, the page and its files
// are served without a token, each with the pages' Content-Security-
// Policy, the page references nothing outside its origin, fits the
// budget, and holds no campaign data (those come from the API, with the
// token).
func TestCampaignPageFiles(t *testing.T) {
	be := newFakeBackend(t)
	ts := newTestServer(t, be)
	if resp, _ := ts.do(t, http.MethodPost, "/v1/campaigns", specJSON("camp-ui", "software/median@7"), true); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d", resp.StatusCode)
	}
	c := ts.ts.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Get(ts.ts.URL + "/ui")
	if err != nil || resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "ui/" {
		t.Fatalf("/ui: %v %v %q", err, resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, f := range []string{"/ui/", "/ui/campaigns.js", "/ui/ui.js", "/ui/ui.css", "/ui/icon.svg"} {
		resp, b := ts.do(t, http.MethodGet, f, nil, false)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Security-Policy") != webui.CSP {
			t.Errorf("%s: %d, CSP %q", f, resp.StatusCode, resp.Header.Get("Content-Security-Policy"))
		}
		for _, bad := range []string{`src="http`, `href="http`, `src="//`, `href="//`, "url(http", `fetch("http`, "camp-ui", testToken} {
			if strings.Contains(string(b), bad) {
				t.Errorf("%s holds %q", f, bad)
			}
		}
	}
	if resp, _ := ts.do(t, http.MethodGet, "/ui/nope.js", nil, false); resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown file: %d", resp.StatusCode)
	}
	page, _ := uiFilesSub()
	if n, err := webui.Size(page); err != nil || n > 150<<10 {
		t.Errorf("the page and its files: %d bytes (%v), budget 150 KB", n, err)
	}
}
