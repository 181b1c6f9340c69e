package launcher

import (
	"embed"
	"io/fs"
	"net/http"

	"github.com/agentpen/agentpen/internal/webui"
)

// The campaign page (/ui/): a read-only view of every campaign, its
// workspaces, attestation, cleanup and episode results. The page and its
// files are served without the token (they hold no data); the page asks
// for the token and sends it on each API call, and keeps it in memory
// only.
//
//go:embed ui/index.html ui/campaigns.js
var uiFiles embed.FS

// UIPath is where the campaign page is served.
const UIPath = "/ui/"

func uiHandler() http.Handler {
	page, err := uiFilesSub()
	if err != nil {
		panic(err) // the embedded directory is there at build time
	}
	return webui.Handler(page)
}

func uiFilesSub() (fs.FS, error) { return fs.Sub(uiFiles, "ui") }

// serveUIRedirect sends /ui to /ui/ (relatively, so a prefix holds).
func serveUIRedirect(w http.ResponseWriter, _ *http.Request) {
	// Not http.Redirect: it would make the path absolute.
	w.Header().Set("Location", "ui/")
	w.WriteHeader(http.StatusMovedPermanently)
}
