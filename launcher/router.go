package launcher

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humachi"
	"github.com/go-chi/chi/v5"
)

// OpenAPIPath is where the service serves its OpenAPI document.
const OpenAPIPath = "/v1/openapi.json"

// RequestIDHeader carries a request's id both ways: a sane one the client
// sends is kept, else one is made.
const RequestIDHeader = "X-Request-Id"

// securityBearer names the bearer scheme in the document.
const securityBearer = "bearer"

// buildRouter wires the routes: the API (Huma operations) and /metrics
// behind the bearer token; /healthz and the episode proxy outside it
// (the proxy's capability is its credential). Authentication is attached
// to the routes that need it, never decided by a path prefix.
func (s *Server) buildRouter() (chi.Router, huma.API) {
	r := chi.NewRouter()
	r.Use(s.requestID, s.accessLog)
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) {
		writeProblem(w, http.StatusNotFound, "no such route")
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, _ *http.Request) {
		writeProblem(w, http.StatusMethodNotAllowed, "method not allowed on this route")
	})

	var hapi huma.API
	r.Group(func(g chi.Router) {
		g.Use(s.auth, jsonBodies)
		hapi = humachi.New(g, s.humaConfig())
		hapi.UseMiddleware(s.guardCampaigns(hapi))
		s.registerOperations(hapi)
		g.Get(OpenAPIPath, s.serveOpenAPI)
		g.Get("/metrics", operatorOnly(s.metrics.handler()).ServeHTTP)
	})
	ui := uiHandler()
	r.Get("/ui", serveUIRedirect)
	r.Get(UIPath, ui.ServeHTTP)
	r.Get(UIPath+"{file}", ui.ServeHTTP)
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"status":"ok"}` + "\n"))
	})
	r.Route(episodePrefix+"/{capability}", func(p chi.Router) {
		p.Use(proxyHeaders)
		p.Get("/ws", s.serveWS)
		p.Post("/mcp", s.serveMCP)
		p.Get("/mcp", s.serveMCP)
		p.Delete("/mcp", s.serveMCP)
		p.Get("/web", s.servePlayRedirect)
		p.Get("/web/", s.serveWebFile)
		p.Get("/web/{file}", s.serveWebFile)
		p.Post("/web/reset", s.serveHTTP("/web/reset"))
		p.Post("/web/step", s.serveHTTP("/web/step"))
		p.Get("/ws/ui", s.serveWebUI)
		for _, pr := range proxyRoutes {
			p.Method(pr.method, pr.path, s.serveHTTP(pr.path))
		}
	})
	s.documentRawRoutes(hapi.OpenAPI())
	return r, hapi
}

func (s *Server) humaConfig() huma.Config {
	version := s.cfg.Version
	if version == "" {
		version = "dev"
	}
	cfg := huma.DefaultConfig("agentpen launcher API", version)
	cfg.Components.Schemas = newRegistry()
	// The document is served by serveOpenAPI (an operation of its own);
	// no docs UI, no schema files, no $schema links in bodies.
	cfg.OpenAPIPath, cfg.DocsPath, cfg.SchemasPath = "", "", ""
	cfg.CreateHooks = nil
	cfg.Info.Description = "Campaigns of AI-agent workspaces on a rootless Docker daemon, and an episode proxy " +
		"that unmodified OpenEnv clients use through each workspace's base_url. Each launcher's token sees and acts " +
		"only on the campaigns it created (another's is a 404, as an unknown id); the operator's token on every one. " +
		"Every error is an RFC 9457 problem."
	cfg.Components.SecuritySchemes = map[string]*huma.SecurityScheme{
		securityBearer: {Type: "http", Scheme: "bearer", Description: "One of the service's named tokens (agentpen serve --token-file or " +
			"--token-env: name:token lines, or one bare token, the operator's). A launcher's token sees and acts only on the " +
			"campaigns it created; the operator's (named operator) on every campaign, those agentpen up made included."},
	}
	cfg.Security = []map[string][]string{{securityBearer: {}}}
	return cfg
}

// documentRawRoutes adds to the document the routes served by plain chi
// handlers: the document itself, /metrics, /healthz and the proxy.
func (s *Server) documentRawRoutes(doc *huma.OpenAPI) {
	text := func(desc string) map[string]*huma.Response {
		return map[string]*huma.Response{"200": {Description: desc, Content: map[string]*huma.MediaType{"text/plain": {Schema: &huma.Schema{Type: "string"}}}}}
	}
	object := func(desc string) *huma.Response {
		return &huma.Response{Description: desc, Content: map[string]*huma.MediaType{"application/json": {Schema: &huma.Schema{Type: "object"}}}}
	}
	problemResp := func(desc string) *huma.Response {
		return &huma.Response{Description: desc, Content: map[string]*huma.MediaType{"application/problem+json": {Schema: &huma.Schema{Ref: "#/components/schemas/ErrorModel"}}}}
	}
	none := []map[string][]string{}
	doc.AddOperation(&huma.Operation{OperationID: "getOpenAPI", Method: http.MethodGet, Path: OpenAPIPath, Tags: []string{"meta"},
		Summary:   "This OpenAPI document",
		Responses: map[string]*huma.Response{"200": object("The OpenAPI 3.1 document"), "401": problemResp("No or a wrong bearer token")}})
	doc.AddOperation(&huma.Operation{OperationID: "getMetrics", Method: http.MethodGet, Path: "/metrics", Tags: []string{"meta"},
		Summary: "Prometheus metrics (text exposition format)", Responses: text("Metrics")})
	doc.Paths["/metrics"].Get.Responses["401"] = problemResp("No or a wrong bearer token")
	doc.Paths["/metrics"].Get.Responses["403"] = problemResp("Not the operator's token: the metrics count every launcher's campaigns")
	doc.Paths["/metrics"].Get.Description = "The operator's token only."
	// Every operation on one campaign answers another launcher's campaign
	// as an unknown id (guardCampaigns).
	for path, item := range doc.Paths {
		if !strings.HasPrefix(path, campaignRoutes) {
			continue
		}
		for _, op := range []*huma.Operation{item.Get, item.Post, item.Patch, item.Delete, item.Put} {
			if op != nil && op.Responses["404"] != nil {
				op.Responses["404"].Description = "No such campaign, or another launcher's (the same answer, word for word)"
			}
		}
	}
	doc.AddOperation(&huma.Operation{OperationID: "getHealthz", Method: http.MethodGet, Path: "/healthz", Tags: []string{"meta"}, Security: none,
		Summary: "Liveness of the service (no token)", Responses: map[string]*huma.Response{"200": object(`{"status":"ok"}`)}})

	html := map[string]*huma.Response{"200": {Description: "The page or its file", Content: map[string]*huma.MediaType{"text/html": {Schema: &huma.Schema{Type: "string"}}}}}
	doc.AddOperation(&huma.Operation{OperationID: "getCampaignPageRedirect", Method: http.MethodGet, Path: "/ui", Tags: []string{"meta"}, Security: none,
		Summary: "The campaign page: redirects (relatively) to ui/", Responses: map[string]*huma.Response{"301": {Description: "To ui/"}}})
	doc.AddOperation(&huma.Operation{OperationID: "getCampaignPage", Method: http.MethodGet, Path: UIPath, Tags: []string{"meta"}, Security: none,
		Summary:     "The campaign page: campaigns, workspaces, attestation, cleanup and episode results, read-only",
		Description: "Served without the token (the page holds no data) and with a Content-Security-Policy that allows nothing but this origin; the page asks for the token and sends it on each API call, keeping it in the tab's memory only.",
		Responses:   html})
	doc.AddOperation(&huma.Operation{OperationID: "getCampaignPageFile", Method: http.MethodGet, Path: UIPath + "{file}", Tags: []string{"meta"}, Security: none,
		Parameters: []*huma.Param{{Name: "file", In: "path", Required: true, Schema: &huma.Schema{Type: "string"}, Description: "A file of the page (its script, the shared style)"}},
		Summary:    "The campaign page's files", Responses: html})

	capParam := &huma.Param{Name: "capability", In: "path", Required: true, Schema: &huma.Schema{Type: "string"},
		Description: "The workspace's capability: the last segment of its base_url. It is the credential; no token is needed."}
	errs := func(resp map[string]*huma.Response) map[string]*huma.Response {
		resp["404"] = problemResp("The capability names no live workspace (unknown, or its workspace was removed)")
		resp["410"] = problemResp("The workspace was removed during the request")
		resp["502"] = problemResp("The workspace's episode server did not answer, or answered what the route does not relay (another content type, a body that is not JSON, a redirect): refused, never relayed")
		return resp
	}
	doc.AddOperation(&huma.Operation{OperationID: "episodeWebSocket", Method: http.MethodGet, Path: episodePrefix + "/{capability}/ws", Tags: []string{"episode proxy"},
		Security: none, Parameters: []*huma.Param{capParam},
		Summary:     "OpenEnv WebSocket session (what EnvClient(base_url) opens)",
		Description: "Upgrades to a WebSocket relayed full duplex to the workspace's episode server. Frames pass unchanged, but a reset's task_id, which is set to the workspace's task. Messages up to 16 MiB.",
		Responses: errs(map[string]*huma.Response{
			"101": {Description: "Switching protocols: the session is open"},
		})})
	for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
		doc.AddOperation(&huma.Operation{OperationID: "episodeMCP" + method[:1] + strings.ToLower(method[1:]), Method: method, Path: episodePrefix + "/{capability}/mcp", Tags: []string{"episode proxy"},
			Security: none, Parameters: []*huma.Param{capParam},
			Summary:     "The workspace's tools over MCP: the standard protocol (streamable HTTP) and OpenEnv's dialect",
			Description: "Relayed to the workspace's episode server with MCP's headers (Mcp-Session-Id, Mcp-Protocol-Version, Accept, Last-Event-ID; back, the session id alone), streamed; the answer is JSON or an event stream, with the service's own headers. A POST with method initialize or an Mcp-Session-Id is standard MCP (one session, one episode of the workspace's task); other POSTs are OpenEnv's JSON-RPC (tools/list, tools/call, openenv/session/create and close); a GET with a WebSocket upgrade is OpenEnv's WebSocket /mcp. An openenv/session/create naming another task is refused.",
			Responses: errs(map[string]*huma.Response{"200": object("The workspace's MCP answer, relayed (JSON, or an event stream)"),
				"101": {Description: "Switching protocols (OpenEnv's WebSocket /mcp)"}})})
	}
	for _, wr := range []struct{ method, path, summary string }{
		{http.MethodGet, "/web", "The play page: redirects (relatively) to web/"},
		{http.MethodGet, "/web/", "The play page (OpenEnv's web interface): the service's own copy, never the workspace's, with its Content-Security-Policy"},
		{http.MethodGet, "/web/{file}", "The play page's files (the service's own copy), or /web/metadata (with the tools' schemas) and /web/state, relayed as JSON"},
		{http.MethodPost, "/web/reset", "Reset the play page's episode: the workspace's task; a task_id naming another is refused"},
		{http.MethodPost, "/web/step", "One tool call in the play page's episode"},
		{http.MethodGet, "/ws/ui", "The play page's live state (WebSocket: state_update messages)"},
	} {
		op := &huma.Operation{OperationID: "episodeWeb" + strings.ReplaceAll(strings.ReplaceAll(wr.method+wr.path, "/", "_"), "{file}", "file"), Method: wr.method,
			Path: episodePrefix + "/{capability}" + wr.path, Tags: []string{"episode proxy"}, Security: none, Parameters: []*huma.Param{capParam}, Summary: wr.summary,
			Responses: errs(map[string]*huma.Response{"200": object("The page, its file, or the workspace's JSON answer, relayed")})}
		if wr.path == "/web/{file}" {
			op.Parameters = append(op.Parameters, &huma.Param{Name: "file", In: "path", Required: true, Schema: &huma.Schema{Type: "string"}, Description: "index.html, a file of the page, metadata or state"})
		}
		doc.AddOperation(op)
	}
	for _, pr := range proxyRoutes {
		op := &huma.Operation{OperationID: "episode" + strings.ToUpper(pr.path[1:2]) + pr.path[2:], Method: pr.method, Path: episodePrefix + "/{capability}" + pr.path,
			Tags: []string{"episode proxy"}, Security: none, Parameters: []*huma.Param{capParam}, Summary: pr.summary,
			Responses: errs(map[string]*huma.Response{"200": object("The workspace's episode server's JSON answer, relayed with the service's own headers"),
				"422": object("The episode server's validation error (FastAPI's shape), relayed")})}
		if pr.method == http.MethodPost {
			op.RequestBody = &huma.RequestBody{Content: map[string]*huma.MediaType{"application/json": {Schema: &huma.Schema{Type: "object"}}}}
		}
		doc.AddOperation(op)
	}
}

// serveOpenAPI serves the document as JSON.
func (s *Server) serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	b, err := s.hapi.OpenAPI().MarshalJSON()
	if err != nil {
		writeProblem(w, http.StatusInternalServerError, "the OpenAPI document could not be rendered")
		return
	}
	w.Header().Set("Content-Type", "application/vnd.oai.openapi+json")
	w.Write(b)
}

type ctxKey int

const (
	requestIDKey ctxKey = iota
	callerKey
	requestInfoKey
)

// requestInfo is what the access log learns of a request from the
// handlers it wraps: who sent it (auth fills it in).
type requestInfo struct {
	caller string
}

var requestIDRe = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// requestID keeps a sane X-Request-Id or makes one, echoes it and puts it
// in the request's context.
func (s *Server) requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(RequestIDHeader)
		if !requestIDRe.MatchString(id) {
			var b [8]byte
			rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		w.Header().Set(RequestIDHeader, id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey, id)))
	})
}

// RequestID returns the id of the request ctx belongs to ("" outside one).
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

// statusWriter records the status and size of a response; Unwrap lets
// http.ResponseController and the WebSocket upgrade reach the connection.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// accessLog writes one line per request. It logs the route's pattern,
// never the path: a proxy path holds a capability, and the service never
// logs tokens, capabilities, bodies or query strings (so no task id).
func (s *Server) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		info := &requestInfo{}
		next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), requestInfoKey, info)))
		pattern := "(unmatched)"
		if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
			pattern = rc.RoutePattern()
		}
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		if r.Header.Get("Upgrade") != "" && sw.status == http.StatusOK {
			sw.status = http.StatusSwitchingProtocols // hijacked: the 101 went to the raw connection
		}
		s.metrics.requests.WithLabelValues(pattern, strconv.Itoa(sw.status)).Inc()
		attrs := []slog.Attr{
			slog.String("request_id", RequestID(r.Context())),
			slog.String("method", r.Method),
			slog.String("route", pattern),
			slog.Int("status", sw.status),
			slog.Int64("bytes", sw.bytes),
			slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
		}
		if info.caller != "" {
			attrs = append(attrs, slog.String("caller", info.caller))
		}
		if class := refusalClass(sw.status); class != "" {
			attrs = append(attrs, slog.String("refused", class))
		}
		s.log.LogAttrs(r.Context(), slog.LevelInfo, "http", attrs...)
	})
}

// auth requires one of the service's bearer tokens, found in constant
// time over all of them (Tokens.Lookup), and puts its caller in the
// request's context (CallerOf) and its name in the access log.
func (s *Server) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, tok, cut := strings.Cut(r.Header.Get("Authorization"), " ")
		caller, ok := Caller{}, false
		if cut && strings.EqualFold(scheme, "Bearer") {
			caller, ok = s.cfg.Tokens.Lookup(strings.TrimSpace(tok))
		}
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="agentpen"`)
			writeProblem(w, http.StatusUnauthorized, "a valid bearer token is required (Authorization: Bearer <token>)")
			return
		}
		if info, ok := r.Context().Value(requestInfoKey).(*requestInfo); ok {
			info.caller = caller.Name
		}
		next.ServeHTTP(w, r.WithContext(withCaller(r.Context(), caller)))
	})
}

// jsonBodies is the API's one rule for request bodies: every body is
// JSON (UTF-8, RFC 8259), whatever type the client declares. curl -d
// declares a form, other clients text/plain or nothing at all: each is
// read as JSON (a body that is not JSON is then a 400 that says where it
// stops being JSON), never refused as an unsupported type. (The create
// read its body raw and took any type; PATCH and a claim answered 415 to
// curl -d.)
func jsonBodies(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Content-Type") != "application/json" {
			r = r.Clone(r.Context())
			r.Header.Set("Content-Type", "application/json")
		}
		next.ServeHTTP(w, r)
	})
}

// operatorOnly serves next to the operator's token alone: what it
// answers counts every launcher's campaigns.
func operatorOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := CallerOf(r.Context()); !ok || !c.Operator() {
			writeProblem(w, http.StatusForbidden, "the operator's token is required: this route counts every launcher's campaigns")
			return
		}
		next.ServeHTTP(w, r)
	})
}
