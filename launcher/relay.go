package launcher

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/agentpen/agentpen/workbench/bind"
)

// The proxy owns every header it sends. A workspace's episode server is
// reached through a socket the daemon's user (what a container escape
// yields) can replace, so nothing it answers may choose how a browser
// takes an answer on the launcher API's origin: the proxy sends its own
// security headers (proxyHeaders) on every answer under /episode/, the
// content type from the route's allow-list (application/json, and
// text/event-stream where MCP streams), a body checked against it (JSON
// whole and valid; anything else refused, never relayed), and no
// header of the workspace's but MCP's session id. No redirect is
// relayed. The play page a browser runs there is the service's own copy
// (proxy_web.go).

// ProxyCSP is the Content-Security-Policy of every answer of the proxy
// but the play page's files: nothing loads, nothing frames it, and a
// browser that renders one as a document puts it in a sandbox (an origin
// of its own, no script).
const ProxyCSP = "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; sandbox"

// proxyHeaders sets the service's security headers on every answer of
// the episode proxy (a play page file sets its page's CSP over them).
func proxyHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", ProxyCSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// relayRoute is how one HTTP route is relayed to a workspace.
type relayRoute struct {
	// path is the workspace's route.
	path string
	// requestHeaders are the client's headers passed on; nil passes none
	// (the proxy sends Content-Type and Accept: application/json).
	requestHeaders []string
	// replyHeaders are the workspace's headers passed back, each only
	// when it is a token (visible ASCII, at most maxTokenHeader bytes).
	replyHeaders []string
	// events: the route streams text/event-stream (MCP); every route
	// answers application/json.
	events bool
	// body checks a POST's body and returns what is relayed (the task
	// binding), or answers the client itself and returns false.
	body func(s *Server, w http.ResponseWriter, rt *route, b []byte) ([]byte, bool)
}

// maxTokenHeader bounds a relayed reply header (an MCP session id).
const maxTokenHeader = 256

// jsonRoute is an OpenEnv JSON route: a POST body gets the workspace's
// task_id (bound: a reset's, a stateless step's), or is refused when it
// names another; the play page's step (its shared episode) passes
// unchanged.
func jsonRoute(path string) relayRoute {
	rr := relayRoute{path: path}
	if path != "/web/step" {
		reset := path == "/reset" || path == "/web/reset"
		rr.body = func(s *Server, w http.ResponseWriter, rt *route, b []byte) ([]byte, bool) {
			body, other := rewriteBody(b, rt.taskID, reset)
			if other {
				s.metrics.proxyErrors.WithLabelValues(errKindBadRequest).Inc()
				writeProblem(w, http.StatusUnprocessableEntity, bind.ErrOtherTask.Error())
				return nil, false
			}
			return body, true
		}
	}
	return rr
}

// serveHTTP relays one OpenEnv JSON call to path on the workspace.
func (s *Server) serveHTTP(path string) http.HandlerFunc {
	rr := jsonRoute(path)
	return func(w http.ResponseWriter, r *http.Request) { s.relayHTTP(w, r, rr) }
}

// relayHTTP relays one HTTP request to the workspace as rr says, and its
// answer back as relayAnswer allows.
func (s *Server) relayHTTP(w http.ResponseWriter, r *http.Request, rr relayRoute) {
	rt, done := s.proxyRoute(w, r)
	if rt == nil {
		return
	}
	defer done()
	ctx, cancel := withRoute(r.Context(), rt)
	defer cancel()
	var body []byte
	if r.Method == http.MethodPost {
		b, ok := s.readBody(w, r)
		if !ok {
			return
		}
		body = b
		if rr.body != nil {
			if body, ok = rr.body(s, w, rt, b); !ok {
				return
			}
		}
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, "http://"+workspaceHost+rr.path, bytes.NewReader(body))
	if err != nil {
		writeProblem(w, http.StatusInternalServerError, "the request could not be built")
		return
	}
	if rr.requestHeaders == nil {
		if r.Method == http.MethodPost {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Accept", "application/json")
	}
	for _, h := range rr.requestHeaders {
		if v := r.Header.Values(h); len(v) > 0 {
			req.Header[http.CanonicalHeaderKey(h)] = v
		}
	}
	resp, err := rt.client.Do(req)
	if err != nil {
		s.unavailable(w, ctx, rt, err)
		return
	}
	defer resp.Body.Close()
	s.relayAnswer(w, rt, rr, resp)
}

// readBody reads a request body of at most MaxFrameBytes, or answers 413
// and reports false.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxFrameBytes))
	if err != nil {
		s.metrics.proxyErrors.WithLabelValues(errKindBadRequest).Inc()
		writeProblem(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body could not be read or is over %d bytes", MaxFrameBytes))
		return nil, false
	}
	return b, true
}

// relayAnswer writes the workspace's answer to the client with the
// proxy's own headers: a JSON body (read whole, at most
// maxObservationBytes, and valid) as application/json, an event stream
// (on a route that streams) as text/event-stream, flushed as it comes,
// or no body; and the route's reply headers that are tokens. Any other
// answer (another type, a body that is not what its type says, a
// redirect, an interim status) is refused: a 502, or the workspace's own
// error status, with a problem of the proxy's, and nothing of the body.
func (s *Server) relayAnswer(w http.ResponseWriter, rt *route, rr relayRoute, resp *http.Response) {
	status := resp.StatusCode
	if status < 200 || (status >= 300 && status < 400) {
		s.refuseAnswer(w, rt, status, "a redirect or an interim status")
		return
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if rr.events && mt == "text/event-stream" {
		s.replyHeaders(w, rr, resp)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(status)
		streamBody(w, resp.Body, func() { s.metrics.proxyErrors.WithLabelValues(errKindBackendLost).Inc() })
		return
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxObservationBytes+1))
	switch {
	case err != nil:
		s.metrics.proxyErrors.WithLabelValues(errKindBackendLost).Inc()
		writeProblem(w, http.StatusBadGateway, "the workspace's answer was cut short ("+CodeWorkspaceUnavailable+")")
		return
	case len(b) > maxObservationBytes:
		s.refuseAnswer(w, rt, http.StatusOK, fmt.Sprintf("a body over %d bytes", maxObservationBytes))
		return
	case len(b) == 0:
		s.replyHeaders(w, rr, resp)
		w.WriteHeader(status)
		return
	case mt != "application/json" || !json.Valid(b):
		s.refuseAnswer(w, rt, status, "a body that is not JSON")
		return
	}
	s.replyHeaders(w, rr, resp)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// refuseAnswer answers, instead of the workspace's answer (what), a 502,
// or its status when that is an error's (4xx, 5xx: the client learns it
// failed, not why in the workspace's words).
func (s *Server) refuseAnswer(w http.ResponseWriter, rt *route, status int, what string) {
	s.metrics.proxyErrors.WithLabelValues(errKindRefused).Inc()
	s.log.Warn("workspace answer refused", "campaign", rt.campaignID, "agent", rt.agentID, "status", status, "answer", what)
	if status < 400 || status > 599 {
		status = http.StatusBadGateway
	}
	writeProblem(w, status, "the workspace's episode server answered "+what+", which this route does not relay: refused")
}

// replyHeaders copies the route's reply headers that are tokens.
func (s *Server) replyHeaders(w http.ResponseWriter, rr relayRoute, resp *http.Response) {
	for _, h := range rr.replyHeaders {
		if v := resp.Header.Get(h); v != "" && isToken(v) {
			w.Header().Set(h, v)
		}
	}
}

// isToken reports whether v is 1 to maxTokenHeader bytes of visible
// ASCII (an MCP session id's grammar).
func isToken(v string) bool {
	if v == "" || len(v) > maxTokenHeader {
		return false
	}
	return !strings.ContainsFunc(v, func(r rune) bool { return r < 0x21 || r > 0x7e })
}

// streamBody copies an event stream to w as it comes, flushing each
// read; lost runs when the workspace's side ends badly.
func streamBody(w http.ResponseWriter, src io.Reader, lost func()) {
	rc := http.NewResponseController(w)
	rc.Flush()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			rc.Flush()
		}
		if err != nil {
			if err != io.EOF {
				lost()
			}
			return
		}
	}
}
