package launcher

import (
	"net/http"

	"github.com/go-chi/chi/v5"
)

// The workspace's play page (OpenEnv's web interface: /web, its files,
// /web/metadata, /web/state, POST /web/reset and /web/step, WebSocket
// /ws/ui) is relayed with its headers by relayHTTP and relayWS; a
// /web/reset naming another task than the workspace's is refused, as
// /reset is.

// serveWebFile relays /web/ and the play page's files.
func (s *Server) serveWebFile(w http.ResponseWriter, r *http.Request) {
	s.relayHTTP(w, r, "/web/"+chi.URLParam(r, "file"))
}

// serveWebUI relays the play page's live state (WebSocket /ws/ui).
func (s *Server) serveWebUI(w http.ResponseWriter, r *http.Request) { s.relayWS(w, r, "/ws/ui") }
