// Package server is the workbench's OpenEnv-compatible episode server: the
// HTTP routes and WebSocket sessions of OpenEnv's create_app, wire-compatible
// with its Python clients (EnvClient, GenericEnvClient, and trainers built on
// them), in front of any environment that implements Env.
//
// # Routes
//
// POST /reset, POST /step, GET /state, GET /schema, GET /metadata,
// GET /health and WS /ws, /mcp (see MCP below) and the play page, with
// the body shapes of
// docs/openenv-protocol.md. Observations travel as
// {"observation":{...},"reward":R,"done":D,"metadata":{...}}: done and reward
// are hoisted out of the observation and the observation's metadata travels
// only at the top level (OpenEnv PR #805), never inside "observation", so a
// typed client that shows the observation's fields to an agent never shows it
// the task id. Rewards are always rendered as JSON floats ("1.0").
//
// HTTP /reset, /step and /state are stateless, as in OpenEnv: each builds a
// fresh environment, uses it once and closes it, whatever happens. They do not
// count toward MaxSessions, but at most MaxHTTPEnvs of them hold an
// environment at once (the Python server's 32-thread pool), so a burst of
// HTTP calls cannot exhaust the sandbox's uids. The answer goes out whole as
// soon as it is written (writeJSON); the environment closes after it, its slot
// held until then. /metadata and /schema are
// served from Config and static schemas without building an environment.
//
// # Sessions
//
// One WebSocket connection is one environment. A slot is reserved before the
// environment is built; a connection beyond MaxSessions gets the
// CAPACITY_REACHED error frame at once, and the server then waits for the
// client's first frame (or 5 s) before closing with 1000, so a client that
// connects and sends reset reliably reads CAPACITY_REACHED as its reply
// instead of racing the close (protocol note §2.4). FACTORY_ERROR is delivered
// the same way. Every session has a reader goroutine, so pings are answered
// even while a long step runs. A session with no reset or step for
// IdleTimeout is reaped: its environment is closed, its slot freed and, unlike
// the Python server (OpenEnv PR #1000), its socket closed with 1000 and reason
// "idle timeout", so half-open sockets cannot hold slots. Shutdown closes
// sessions with 1001. An HTTP request must be read within 2 minutes (a
// stalled body gets 408 and its connection closed), a keep-alive
// connection without a request is closed after 2 minutes, and shutdown
// cuts requests still being read, so a stalled client cannot hold it up.
//
// # Refusing episode code, capping connections
//
// Episode code runs in the same container as the server and can reach its
// port; if it could open episodes of its own it could use check and submit
// of a fresh episode as an answer oracle, and a flood of its connections
// would take the descriptors the server needs for everyone's episodes.
// Serve therefore puts a gate (package gate) in front of every listener,
// which decides on each connection as it is accepted, before the HTTP
// server sees it. When Config.EpisodeUID is set (the server runs as root
// with the uid sandbox), a connection is closed at once, without a reply,
// when its peer is an episode uid (SO_PEERCRED on a unix socket; over
// TCP, the owner of the client's socket, found by an exact sock_diag
// lookup, or in /proc/net/tcp and tcp6), when its socket is held by no
// process any longer, or when the peer cannot be told. Every connection
// also counts against Config.MaxConnsPerPeer (per uid when local, per
// address when remote) and Config.MaxConns; one over a cap is closed the
// same way. Refusals and caps are logged at most once per 10 s per kind,
// with a count of the rest. So a refused connection costs an accept, a
// lookup and a close, and never holds a descriptor.
//
// There is no per-request check any more: the peer of a connection cannot
// change after accept (a TCP socket keeps the uid of its creator, a unix
// socket its peer's credentials), so a second look at each request would
// only repeat the first. Handler, mounted without Serve, refuses no peer.
// The server never trusts proxy headers.
//
// # MCP
//
// /mcp serves the environment's tools (Config.Tools) over MCP: the
// standard protocol (the official Go SDK, streamable HTTP; an initialize
// makes a session, one session is one episode, counted against
// MaxSessions) and OpenEnv's dialect on the same path (JSON-RPC without
// the handshake on POST /mcp, WebSocket /mcp, {"type":"mcp"} frames on
// /ws, and the list_tools and call_tool step actions). A session's first
// tool call starts its episode (a reset of the bound or default task)
// and its result leads with the task. docs/openenv-protocol.md §12 has
// the shapes.
//
// # The play page
//
// /web (redirecting to /web/), /web/metadata, /web/reset, /web/step,
// /web/state and WebSocket /ws/ui are OpenEnv's web interface on one
// shared environment, with a page of plain HTML and JavaScript (web/,
// and internal/webui's shared pieces) under a strict
// Content-Security-Policy. docs/openenv-protocol.md §13 has the routes.
//
// # Task binding
//
// An environment bound to a task (episode.Config.Binding, package bind)
// refuses a reset naming another task: HTTP /reset and /step answer 422
// on body.task_id with the binding's message, WebSocket EXECUTION_ERROR.
// While a --task-file binding has no file yet, every reset (and a
// stateless step) is refused: 503 {"detail": "this workspace is not bound
// to a task yet..."} over HTTP, EXECUTION_ERROR over WebSocket; the client
// is never told the file's path, the log says what is wrong.
//
// # Deviations from the Python server
//
//   - An unknown task_id on HTTP /reset is 422 (type "value_error", loc
//     ["body","task_id"]) rather than a bare 500, and a task_id that is not a
//     string is 422 "string_type"; over WebSocket both stay EXECUTION_ERROR as
//     in Python.
//   - A WebSocket frame that is JSON but not an object gets SESSION_ERROR and
//     close 1000, as in Python, with a message that says why.
//   - A WebSocket upgrade whose Origin header names a host other than its
//     Host header is refused 403 (coder/websocket's check; uvicorn has
//     none). OpenEnv's clients send no Origin and are never affected; a
//     web page in a browser on the trainer's machine cannot open
//     sessions.
//
// # Activity
//
// Config.Activity is called at each reset and step served: over HTTP, a
// WebSocket, MCP (a tool call, a session created with a reset) and the
// play page; workbench serve sets it to SocketActivity, which stamps the
// served unix sockets' time, the signal agentpen reads a workspace's last
// activity from.
package server
