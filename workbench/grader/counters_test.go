package grader

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestCounters: requests without the key are counted as refused and never
// as authorized; keyed ones are authorized; the counters route needs the
// key and reading it counts nothing.
func TestCounters(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, testKey)
	read := func() Counts {
		t.Helper()
		r := do(t, http.MethodGet, ts.url+RouteCounters, "", KeyHeader+": "+testKey)
		var c Counts
		if r.status != http.StatusOK || json.Unmarshal([]byte(r.body), &c) != nil {
			t.Fatalf("counters: %d %s", r.status, r.body)
		}
		return c
	}
	before := read()
	for _, route := range countedRoutes {
		if before.Routes[route] != (RouteCount{}) {
			t.Fatalf("%s before any request: %+v", route, before.Routes[route])
		}
	}
	if r := do(t, http.MethodGet, ts.url+RouteCounters, ""); r.status != http.StatusUnauthorized {
		t.Fatalf("counters without the key: %d", r.status)
	}
	for range 3 {
		do(t, http.MethodPost, ts.url+RouteScore, validBodies[RouteScore])
	}
	do(t, http.MethodPost, ts.url+RouteCases, validBodies[RouteCases], KeyHeader+": wrong")
	do(t, http.MethodPost, ts.url+RouteJudge, validBodies[RouteJudge], KeyHeader+": "+testKey)
	after := read()
	want := map[string]RouteCount{
		RouteScore: {Requests: 3, Refused: 3},
		RouteCases: {Requests: 1, Refused: 1},
		RouteJudge: {Requests: 1, Authorized: 1},
	}
	for route, w := range want {
		if got := after.Routes[route]; got != w {
			t.Errorf("%s: got %+v, want %+v", route, got, w)
		}
	}
	if _, counted := after.Routes[RouteCounters]; counted {
		t.Errorf("reading the counters was counted: %+v", after.Routes)
	}
	if ts.cat.builds.Load() != 1 {
		t.Errorf("builds %d, want 1 (the keyed judge only)", ts.cat.builds.Load())
	}
}
