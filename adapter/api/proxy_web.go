package api

import (
	"bytes"
	"fmt"
	"io"
	"net/http"

	"github.com/agentpen/agentpen/workbench/bind"
	"github.com/go-chi/chi/v5"
)

// webReplyHeaders are the play page's response headers relayed back:
// its Content-Security-Policy and the others it is served with, and a
// redirect's (relative) Location.
var webReplyHeaders = []string{"Content-Type", "Content-Security-Policy", "X-Content-Type-Options", "Referrer-Policy", "Cache-Control", "Location"}

// serveWeb relays the workspace's play page (OpenEnv's web interface:
// /web, its files, /web/metadata, /web/state, POST /web/reset and
// /web/step) with its headers. A /web/reset naming another task than the
// workspace's is refused, as /reset is; any other gets the workspace's
// task_id.
func (s *Server) serveWeb(path string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { s.relayWeb(w, r, path) }
}

// serveWebFile relays /web/ and the play page's files.
func (s *Server) serveWebFile(w http.ResponseWriter, r *http.Request) {
	s.relayWeb(w, r, "/web/"+chi.URLParam(r, "file"))
}

func (s *Server) relayWeb(w http.ResponseWriter, r *http.Request, path string) {
	rt, done := s.proxyRoute(w, r)
	if rt == nil {
		return
	}
	defer done()
	ctx, cancel := withRoute(r.Context(), rt)
	defer cancel()
	var body []byte
	if r.Method == http.MethodPost {
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxFrameBytes))
		if err != nil {
			s.metrics.proxyErrors.WithLabelValues(errKindBadRequest).Inc()
			writeProblem(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body could not be read or is over %d bytes", MaxFrameBytes))
			return
		}
		body = b
		if path == "/web/reset" {
			var other bool
			if body, other = rewriteBody(b, rt.taskID, true); other {
				s.metrics.proxyErrors.WithLabelValues(errKindBadRequest).Inc()
				writeProblem(w, http.StatusUnprocessableEntity, bind.ErrOtherTask.Error())
				return
			}
		}
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, "http://workbench"+path, bytes.NewReader(body))
	if err != nil {
		writeProblem(w, http.StatusInternalServerError, "the request could not be built")
		return
	}
	if r.Method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := rt.client.Do(req)
	if err != nil {
		s.unavailable(w, ctx, rt, err)
		return
	}
	defer resp.Body.Close()
	for _, h := range webReplyHeaders {
		if v := resp.Header.Values(h); len(v) > 0 {
			w.Header()[http.CanonicalHeaderKey(h)] = v
		}
	}
	w.WriteHeader(resp.StatusCode)
	if _, err := io.Copy(w, io.LimitReader(resp.Body, maxObservationBytes)); err != nil {
		s.metrics.proxyErrors.WithLabelValues(errKindBackendLost).Inc()
	}
}

// serveWebUI relays the play page's live state (WebSocket /ws/ui).
func (s *Server) serveWebUI(w http.ResponseWriter, r *http.Request) { s.relayWS(w, r, "/ws/ui") }
