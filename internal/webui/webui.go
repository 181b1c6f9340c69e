package webui

import (
	"embed"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
)

//go:embed ui.css ui.js icon.svg
var shared embed.FS

// Shared returns the files every page shares (ui.css, ui.js, icon.svg).
func Shared() fs.FS { return shared }

// CSP is the Content-Security-Policy of every page: scripts, styles,
// images and connections (fetch and WebSocket) from the page's own
// origin only; no inline script or style, no plugin, no frame, no form
// posting anywhere, no base URL change.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// SetHeaders sets the headers every page and its files are served
// with: CSP, no MIME sniffing, no referrer, no caching (a page and its
// script always come from the same binary), never in a frame (CSP's
// frame-ancestors, and X-Frame-Options for browsers without it), and a
// browsing context group of its own (Cross-Origin-Opener-Policy: a page
// of another origin that opened it, or that it opens, holds no reference
// to its window).
func SetHeaders(h http.Header) {
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
}

// Handler serves a page: its own files (page: index.html and its
// scripts) and the shared ones, by base name, under the directory the
// router mounts it at ("" and "/" are index.html). An unknown name is
// 404; a directory is never listed.
func Handler(page fs.FS) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := path.Base(r.URL.Path)
		if strings.HasSuffix(r.URL.Path, "/") || name == "." || name == "/" {
			name = "index.html"
		}
		b, err := fs.ReadFile(page, name)
		if err != nil {
			b, err = fs.ReadFile(shared, name)
		}
		if err != nil {
			http.NotFound(w, r)
			return
		}
		SetHeaders(w.Header())
		ct := mime.TypeByExtension(path.Ext(name))
		if ct == "" {
			ct = "application/octet-stream"
		}
		w.Header().Set("Content-Type", ct)
		w.Write(b)
	})
}

// Size is the bytes of a page's files and the shared ones together:
// everything the page can load.
func Size(page fs.FS) (int, error) {
	n := 0
	for _, fsys := range []fs.FS{page, shared} {
		err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := fs.ReadFile(fsys, p)
			n += len(b)
			return err
		})
		if err != nil {
			return 0, err
		}
	}
	return n, nil
}
