// Package playpage holds the workbench's play page: OpenEnv's web
// interface as a page of plain HTML and JavaScript (index.html, play.js;
// the shared style and helpers are internal/webui's). Two servers serve
// it, each from the copy embedded in its own binary: the workbench's
// server at /web/ (package server), and agentpen serve's episode proxy at
// base_url/web/, so that the page a browser runs on the launcher API's
// origin is the service's own, never bytes a workspace chose; only the
// page's JSON calls and its live state are relayed to the workspace.
// Every URL the page uses is relative, so it works under any prefix.
//
// It imports nothing of the workbench: the service embeds it without the
// episode world.
package playpage

import (
	"embed"
	"io/fs"
)

//go:embed index.html play.js
var files embed.FS

// Files returns the page's own files (index.html, play.js), to serve
// with internal/webui.Handler.
func Files() fs.FS { return files }
