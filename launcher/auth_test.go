package launcher

import (
	"net/http"
	"strings"
	"testing"
)

// TestAuthRefused: every route behind the token refuses a request
// without it, with a wrong one, or with another scheme: 401, a problem,
// WWW-Authenticate, and nothing asked of the adapter.
func TestAuthRefused(t *testing.T) {
	be := newFakeBackend(t)
	ts := newTestServer(t, be)
	var routes []routeKey
	for _, r := range documentedRoutes(ts.Server) {
		path := strings.SplitN(string(r), " ", 2)[1]
		if path == "/healthz" || strings.HasPrefix(path, episodePrefix+"/") {
			continue
		}
		routes = append(routes, r)
	}
	if len(routes) < 10 {
		t.Fatalf("only %d routes behind the token: %v", len(routes), routes)
	}
	for _, tt := range []struct {
		name   string
		header string
	}{
		{"no_token", ""},
		{"wrong_token", "Bearer " + strings.Repeat("x", len(testToken))},
		{"token_prefix", "Bearer " + testToken[:len(testToken)-1]},
		{"token_longer", "Bearer " + testToken + "0"},
		{"basic_scheme", "Basic " + testToken},
		{"no_scheme", testToken},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, r := range routes {
				method, path, _ := strings.Cut(string(r), " ")
				path = strings.ReplaceAll(path, "{id}", "camp-1")
				req, _ := http.NewRequest(method, ts.ts.URL+path, strings.NewReader(string(specJSON("camp-1", "software/median"))))
				if tt.header != "" {
					req.Header.Set("Authorization", tt.header)
				}
				resp, err := ts.ts.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b := make([]byte, 4096)
				n, _ := resp.Body.Read(b)
				resp.Body.Close()
				if resp.StatusCode != http.StatusUnauthorized {
					t.Errorf("%s: status %d, want 401", r, resp.StatusCode)
					continue
				}
				decodeProblem(t, resp, b[:n])
				if !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
					t.Errorf("%s: WWW-Authenticate %q", r, resp.Header.Get("WWW-Authenticate"))
				}
			}
		})
	}
	if calls := be.Calls(); len(calls) > 0 {
		t.Errorf("refused requests reached the adapter: %v", calls)
	}
	// The token itself is never logged.
	if strings.Contains(ts.logs.String(), testToken[:12]) {
		t.Error("a token reached the log")
	}
}

// TestAuthAccepted: the token opens the routes, and /healthz needs none.
func TestAuthAccepted(t *testing.T) {
	ts := newTestServer(t, newFakeBackend(t))
	if resp, b := ts.do(t, http.MethodGet, "/healthz", nil, false); resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"ok"`) {
		t.Fatalf("/healthz: %d %s", resp.StatusCode, b)
	}
	for _, path := range []string{"/v1/campaigns", OpenAPIPath, "/metrics"} {
		if resp, b := ts.do(t, http.MethodGet, path, nil, true); resp.StatusCode != http.StatusOK {
			t.Errorf("%s with the token: %d %s", path, resp.StatusCode, b)
		}
	}
	// Scheme names are case-insensitive (RFC 9110).
	req, _ := http.NewRequest(http.MethodGet, ts.ts.URL+"/v1/campaigns", nil)
	req.Header.Set("Authorization", "bearer "+testToken)
	resp, err := ts.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("lower-case scheme: %d", resp.StatusCode)
	}
}

// TestRequestID: a sane id is echoed, anything else replaced, and the
// access log carries it with the route pattern, not the path.
func TestRequestID(t *testing.T) {
	ts := newTestServer(t, newFakeBackend(t))
	for _, tt := range []struct {
		name, sent string
		kept       bool
	}{
		{"sane", "launcher-42.a_b", true},
		{"injection", "x\" level=ERROR msg=forged", false},
		{"too_long", strings.Repeat("a", 65), false},
		{"none", "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, ts.ts.URL+"/healthz", nil)
			if tt.sent != "" {
				req.Header.Set(RequestIDHeader, tt.sent)
			}
			resp, err := ts.ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			got := resp.Header.Get(RequestIDHeader)
			if (got == tt.sent) != tt.kept || got == "" || !requestIDRe.MatchString(got) {
				t.Errorf("sent %q, got %q (kept %v)", tt.sent, got, tt.kept)
			}
			if !strings.Contains(ts.logs.String(), `"request_id":"`+got+`"`) {
				t.Errorf("the access log has no line with request id %q", got)
			}
		})
	}
}

// TestUnknownRoute: the router's own errors are problems too.
func TestUnknownRoute(t *testing.T) {
	ts := newTestServer(t, newFakeBackend(t))
	resp, b := ts.do(t, http.MethodGet, "/v2/nothing", nil, true)
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("status %d", resp.StatusCode)
	}
	decodeProblem(t, resp, b)
	resp, b = ts.do(t, http.MethodPut, "/healthz", nil, true)
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("PUT /healthz: status %d", resp.StatusCode)
	}
	decodeProblem(t, resp, b)
}
