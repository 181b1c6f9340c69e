// Package webui holds what agentpen's browser pages share: the style
// (ui.css), the JavaScript helpers (ui.js: a DOM builder, JSON calls to
// paths relative to the page, a form generated from a JSON Schema, a
// WebSocket that reconnects), the icon, and the way every page is
// served: embedded in the binary, with a Content-Security-Policy that
// lets the page load and connect to nothing but its own origin, so a
// page makes no external request and runs no inline or injected script.
//
// A page brings its own index.html and script (Handler serves them with
// the shared files under one directory); the workbench's play page is
// the first (workbench/playpage). It does not template, bundle or
// minify: the files are served as written, and a page links only
// relative URLs, so it works under any prefix (a launcher's base_url).
package webui
