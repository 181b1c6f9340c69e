package launcher

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/danielgtaylor/huma/v2"
)

// apiBodies are a valid body of every API route that takes one (the
// proxy's routes relay theirs); {id} is the campaign's. A route that
// takes a body and is not here fails TestBodiesAreJSON.
var apiBodies = map[routeKey]string{
	"POST /v1/campaigns":                 `{"campaign_id": "{id}", "pool": 1, "server": {"image": "` + fakeImage + `"}, "workspaces": [{"task_id": "software/median@7", "image": "` + fakeImage + `"}]}`,
	"PATCH /v1/campaigns/{id}":           `{"ttl_seconds": 7200}`,
	"POST /v1/campaigns/{id}/workspaces": `{"task_id": "sql/top_customer@3"}`,
}

// TestBodiesAreJSON: every route of the API that takes a body reads it as
// JSON whatever type the client declares (none, curl -d's form type,
// text/plain, JSON with a charset, another type), answering exactly as
// it answers application/json, never 415; a body that is not JSON is a
// 400 that says so, whatever its declared type.
func TestBodiesAreJSON(t *testing.T) {
	be := newFakeBackend(t)
	ts := newTestServer(t, be)
	var routes []routeKey
	for _, r := range documentedRoutes(ts.Server) {
		method, path, _ := strings.Cut(string(r), " ")
		if strings.HasPrefix(path, episodePrefix) {
			continue
		}
		if op := operation(ts.OpenAPI(), method, path); op != nil && op.RequestBody != nil {
			routes = append(routes, r)
		}
	}
	var covered []routeKey
	for r := range apiBodies {
		covered = append(covered, r)
	}
	slices.Sort(covered)
	if !slices.Equal(routes, covered) {
		t.Fatalf("the routes that take a body are %v; apiBodies covers %v", routes, covered)
	}
	send := func(r routeKey, id, ct, body string) (int, string) {
		method, path, _ := strings.Cut(string(r), " ")
		req, _ := http.NewRequest(method, ts.ts.URL+strings.ReplaceAll(path, "{id}", id), bytes.NewReader([]byte(strings.ReplaceAll(body, "{id}", id))))
		req.Header.Set("Authorization", "Bearer "+testToken)
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := ts.ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	// In order: the create first, the campaign's routes after it.
	order := []routeKey{"POST /v1/campaigns", "PATCH /v1/campaigns/{id}", "POST /v1/campaigns/{id}/workspaces"}
	want := map[routeKey]int{}
	for _, r := range order {
		want[r], _ = send(r, "ct-json", "application/json", apiBodies[r])
		if want[r]/100 != 2 {
			t.Fatalf("%s with application/json: %d", r, want[r])
		}
	}
	for i, ct := range []string{"", "application/x-www-form-urlencoded", "text/plain", "application/json; charset=utf-8", "APPLICATION/JSON", "application/cbor"} {
		id := fmt.Sprint("ct-", i)
		for _, r := range order {
			if code, b := send(r, id, ct, apiBodies[r]); code != want[r] {
				t.Errorf("%s with Content-Type %q: %d %s, want %d as with application/json", r, ct, code, b, want[r])
			}
		}
		for _, r := range order[1:] {
			code, b := send(r, id, ct, "ttl_seconds=7200")
			if code != http.StatusBadRequest || !strings.Contains(b, "invalid character") {
				t.Errorf("%s of a form body with Content-Type %q: %d %s, want a 400 that it is not JSON", r, ct, code, b)
			}
		}
	}
}

// operation is the document's operation of method on path.
func operation(doc *huma.OpenAPI, method, path string) *huma.Operation {
	item := doc.Paths[path]
	if item == nil {
		return nil
	}
	return map[string]*huma.Operation{http.MethodGet: item.Get, http.MethodPost: item.Post, http.MethodPatch: item.Patch,
		http.MethodPut: item.Put, http.MethodDelete: item.Delete}[method]
}
