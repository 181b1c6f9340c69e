package launcher

import (
	"net/http"

	"github.com/agentpen/agentpen/internal/webui"
	"github.com/agentpen/agentpen/workbench/playpage"
	"github.com/go-chi/chi/v5"
)

// The workspace's play page (OpenEnv's web interface) is the service's
// own: /web/ and the page's files are served from the copy embedded in
// agentpen (package playpage, with internal/webui's headers: the page's
// CSP, no frame, an opener policy of its own), never relayed; what the
// page calls is: its JSON (/web/metadata, /web/state, POST /web/reset
// and /web/step, as relayHTTP relays JSON) and its live state (WebSocket
// /ws/ui, frames the page shows as text). A /web/reset naming another
// task than the workspace's is refused, as /reset is.

// playPage serves the play page's files.
var playPage = webui.Handler(playpage.Files())

// servePlayRedirect sends /web to web/ (relatively: under the base_url).
func (s *Server) servePlayRedirect(w http.ResponseWriter, r *http.Request) {
	rt, done := s.proxyRoute(w, r)
	if rt == nil {
		return
	}
	done()
	w.Header().Set("Location", "web/")
	w.WriteHeader(http.StatusTemporaryRedirect)
}

// serveWebFile serves /web/ and the page's files, or relays the page's
// JSON reads (/web/metadata, /web/state).
func (s *Server) serveWebFile(w http.ResponseWriter, r *http.Request) {
	switch file := chi.URLParam(r, "file"); file {
	case "metadata", "state":
		s.relayHTTP(w, r, jsonRoute("/web/"+file))
		return
	}
	rt, done := s.proxyRoute(w, r)
	if rt == nil {
		return
	}
	done()
	playPage.ServeHTTP(w, r)
}

// serveWebUI relays the play page's live state (WebSocket /ws/ui).
func (s *Server) serveWebUI(w http.ResponseWriter, r *http.Request) { s.relayWS(w, r, "/ws/ui") }
