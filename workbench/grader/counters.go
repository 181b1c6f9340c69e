package grader

import (
	"net/http"
	"sync"
)

// RouteCounters is the keyed route that reads the request counters: GET
// it with the API key for {"routes": {route: {requests, authorized,
// refused}}}. An attestation reads it before and after sending requests
// without the key, and proves from the difference that they were refused
// and reached no handler.
const RouteCounters = "/v1/counters"

// countedRoutes are the protected routes the counters always report
// (zeros included), so a reader tells "none came" from "not counted".
var countedRoutes = []string{RouteScore, RouteCases, RouteJudge}

// RouteCount is what the counters say about one protected route.
type RouteCount struct {
	// Requests is every request that reached the route's key check.
	Requests int64 `json:"requests"`
	// Authorized is every request that passed it and reached the handler:
	// the only ones that can have an effect.
	Authorized int64 `json:"authorized"`
	// Refused is Requests minus Authorized.
	Refused int64 `json:"refused"`
}

// Counts is the reply of RouteCounters.
type Counts struct {
	Routes map[string]RouteCount `json:"routes"`
}

// counters counts the protected routes' requests; the zero value is ready.
// Reading them (RouteCounters) is not counted.
type counters struct {
	mu sync.Mutex
	m  map[string]*RouteCount
}

func (c *counters) add(route string, authorized bool) {
	if route == RouteCounters {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*RouteCount{}
	}
	rc := c.m[route]
	if rc == nil {
		rc = &RouteCount{}
		c.m[route] = rc
	}
	if authorized {
		rc.Authorized++
	} else {
		rc.Requests++
	}
}

func (c *counters) snapshot() Counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := Counts{Routes: map[string]RouteCount{}}
	for _, r := range countedRoutes {
		out.Routes[r] = RouteCount{}
	}
	for r, rc := range c.m {
		v := *rc
		v.Refused = v.Requests - v.Authorized
		out.Routes[r] = v
	}
	return out
}

// arrive counts a request before the key check; authorize, after it.
func (c *counters) arrive(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.add(routePattern(r), false)
		next.ServeHTTP(w, r)
	})
}

func (c *counters) authorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.add(routePattern(r), true)
		next.ServeHTTP(w, r)
	})
}

func (s *Server) handleCounters(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.counts.snapshot())
}
