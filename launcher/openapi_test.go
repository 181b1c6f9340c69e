package launcher

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/go-chi/chi/v5"
)

// TestOpenAPIValidates loads the served document with kin-openapi and
// validates it as OpenAPI 3.1.
func TestOpenAPIValidates(t *testing.T) {
	ts := newTestServer(t, newFakeBackend(t))
	resp, b := ts.do(t, http.MethodGet, OpenAPIPath, nil, true)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", OpenAPIPath, resp.StatusCode, b)
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(b)
	if err != nil {
		t.Fatalf("load the document: %v", err)
	}
	if err := doc.Validate(t.Context()); err != nil {
		t.Fatalf("the document does not validate: %v", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Errorf("openapi %q, want 3.1", doc.OpenAPI)
	}
	// The create body is the campaign spec's schema, by reference.
	create := doc.Paths.Find("/v1/campaigns").Post
	if ref := create.RequestBody.Value.Content.Get("application/json").Schema.Ref; ref != "#/components/schemas/CampaignSpec" {
		t.Errorf("create body schema %q, want the CampaignSpec reference", ref)
	}
	// Problems share one schema, the RFC 9457 ErrorModel.
	if _, ok := doc.Components.Schemas["ErrorModel"]; !ok {
		t.Error("no ErrorModel schema")
	}
	// Security: the token everywhere but /healthz and the proxy.
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			open := path == "/healthz" || strings.HasPrefix(path, episodePrefix+"/")
			if got := op.Security != nil && len(*op.Security) == 0; got != open {
				t.Errorf("%s %s: without security = %v, want %v", method, path, got, open)
			}
		}
	}
}

// routeKey is "METHOD /pattern".
type routeKey string

// routerRoutes lists every route the router serves.
func routerRoutes(t *testing.T, r chi.Router) []routeKey {
	t.Helper()
	var out []routeKey
	err := chi.Walk(r, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		route = strings.ReplaceAll(route, "/*/", "/")
		out = append(out, routeKey(method+" "+route))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// documentedRoutes lists every operation of the document.
func documentedRoutes(s *Server) []routeKey {
	var out []routeKey
	for path, item := range s.OpenAPI().Paths {
		for _, op := range []*struct {
			m  string
			ok bool
		}{
			{http.MethodGet, item.Get != nil}, {http.MethodPost, item.Post != nil}, {http.MethodPut, item.Put != nil},
			{http.MethodPatch, item.Patch != nil}, {http.MethodDelete, item.Delete != nil}, {http.MethodHead, item.Head != nil},
			{http.MethodOptions, item.Options != nil},
		} {
			if op.ok {
				out = append(out, routeKey(op.m+" "+path))
			}
		}
	}
	slices.Sort(out)
	return out
}

// undocumented returns the routes the router serves that the document
// does not describe, and the operations it describes that nothing serves.
func undocumented(t *testing.T, s *Server) (served, described []routeKey) {
	have, doc := routerRoutes(t, s.router), documentedRoutes(s)
	for _, r := range have {
		if !slices.Contains(doc, r) {
			served = append(served, r)
		}
	}
	for _, d := range doc {
		if !slices.Contains(have, d) {
			described = append(described, d)
		}
	}
	return served, described
}

// TestEveryRouteDocumented walks the router: each route it serves is an
// operation of the document, and each operation is served.
func TestEveryRouteDocumented(t *testing.T) {
	s := newTestServer(t, newFakeBackend(t)).Server
	served, described := undocumented(t, s)
	if len(served) > 0 {
		t.Errorf("routes served but not in the OpenAPI document: %v", served)
	}
	if len(described) > 0 {
		t.Errorf("operations documented but not served: %v", described)
	}
	if n := len(routerRoutes(t, s.router)); n < 17 {
		t.Errorf("the router serves %d routes; the walk found too few to prove anything", n)
	}
}

// TestUndocumentedRouteIsCaught adds a route behind the document's back:
// the check above must see it.
func TestUndocumentedRouteIsCaught(t *testing.T) {
	s := newTestServer(t, newFakeBackend(t)).Server
	s.router.Get("/v1/sneaky", func(http.ResponseWriter, *http.Request) {})
	served, _ := undocumented(t, s)
	if !slices.Contains(served, "GET /v1/sneaky") {
		t.Fatalf("an undocumented route went unnoticed: %v", served)
	}
}

// TestSpecSchema: the exported JSON Schema is the document's own schema
// of the campaign spec.
func TestSpecSchema(t *testing.T) {
	b, err := SpecSchema()
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Schema string                     `json:"$schema"`
		Ref    string                     `json:"$ref"`
		Defs   map[string]json.RawMessage `json:"$defs"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Ref != "#/$defs/CampaignSpec" || !strings.Contains(got.Schema, "2020-12") {
		t.Fatalf("$ref %q, $schema %q", got.Ref, got.Schema)
	}
	s := newTestServer(t, newFakeBackend(t)).Server
	docSchemas := s.OpenAPI().Components.Schemas.Map()
	for _, name := range []string{"CampaignSpec", "ServerSpec", "WorkspaceSpec"} {
		def, ok := got.Defs[name]
		if !ok {
			t.Fatalf("no $defs/%s", name)
		}
		want, _ := json.Marshal(docSchemas[name])
		want = []byte(strings.ReplaceAll(string(want), "#/components/schemas/", "#/$defs/"))
		var a, b any
		json.Unmarshal(def, &a)
		json.Unmarshal(want, &b)
		aj, _ := json.Marshal(a)
		bj, _ := json.Marshal(b)
		if string(aj) != string(bj) {
			t.Errorf("%s differs from the document's:\n got %s\nwant %s", name, aj, bj)
		}
	}
	if strings.Contains(string(b), "#/components/") {
		t.Error("the schema refers into an OpenAPI document")
	}
}
