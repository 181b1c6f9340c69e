// Package launcher is the launcher API that agentpen serve runs: campaigns
// over HTTP, and an episode proxy that unmodified OpenEnv clients reach
// each workspace through. It sits at the top of the house, beside cmd: a
// consumer of adapter (the Docker work, behind a backend interface it
// owns) and of store (what each campaign is), never of Docker itself.
//
// # Routes
//
// The operations are Huma v2 operations on a chi router, so the OpenAPI
// 3.1 document (GET /v1/openapi.json) is generated from the Go types:
// POST /v1/campaigns (the spec agentpen up takes, validated as it does:
// campaign.Validate with the workbench catalogue, then adapter.Prepare:
// the key and the images, a tag resolved to its id; adapter.Up brings
// the campaign up and attests it, and removes it again when it does not
// attest; with Prefer: respond-async, a 202 at once and the bring-up in
// the background), GET /v1/campaigns, GET, PATCH (its lifetime) and
// DELETE /v1/campaigns/{id} (delete returns the cleanup report, and only a
// verified cleanup is a 200), GET /v1/campaigns/{id}/workspaces (opaque
// agent ids and base_urls), GET /v1/campaigns/{id}/events (server-sent
// events read from its journal, package events, following the campaign
// while it lives, each resumable exactly by its id), POST
// /v1/campaigns/{id}/keepalive (a launcher tied to its campaign says it
// is there), POST and GET
// /v1/campaigns/{id}/attestation (fresh or stored report), GET
// /v1/campaigns/{id}/cleanup, GET /v1/tasks and /v1/tasks/{id} (the
// catalogue, and what an agent sees of a task), GET /v1/images (the
// daemon's images a spec can name). Every body is read as JSON,
// whatever type the client declares (jsonBodies). GET /healthz
// and GET /metrics (Prometheus, on a registry of the server's own) are
// plain handlers, described in the same document. Every error, from Huma
// or from the router, the auth check or the proxy, is an RFC 9457 problem
// in Huma's ErrorModel; a bad spec lists every field it can name, each
// located by its path ("body.workspaces[1].task_id").
//
// Every route but /healthz and the proxy's requires one of the service's
// bearer tokens (Tokens, from a token file of name:token lines:
// ParseTokens), found in constant time over all of them (every digest
// compared); authentication is attached to those routes, not decided by
// a path prefix, and puts the caller (its token's name) in the request's
// context. Requests carry an id (X-Request-Id); the access log names the
// route pattern, never the path, and the caller's name, so no
// capability, token, body or task id is ever logged; a refused request
// names its class. Each operation (create, delete, attest, expire,
// reconcile) logs one line: campaign, outcome, duration, caller.
//
// # Launchers
//
// A campaign created through the API is its creator's: the token's name
// goes in its generation's begin record (campaign.Plan.Owner, read back
// as campaign.Generation.Owner). A launcher's token sees and acts only
// on the campaigns whose latest generation it created: on every route
// under /v1/campaigns/{id} another's campaign answers the 404 of an
// unknown id (a Huma middleware, so a route added there is covered; the
// operations that change a campaign check again under its lock), the
// list leaves it out, and a create of its id is a 409 that says only
// that the id is taken. The operator's token (OperatorName, or a bare
// token) sees and acts on every campaign, those agentpen up made (no
// owner) and unusable ones included, and alone reads /metrics.
//
// # Lifetimes
//
// A create gets the spec's ttl_seconds and idle_timeout_seconds or the
// operator's defaults (Config.Lifetime), counted from its acceptance on
// the service's Clock. Each campaign that is up with a lifetime has one
// timer at the next moment campaign.Lifecycle.Due may say yes; then it
// is removed as DELETE removes it, reason ttl or idle (idle: the
// workspaces' socket times, adapter.LastActivity), its events warned of
// it shortly before (expiring, journalled by adapter.Warn). A campaign
// whose lifetime has a launcher timeout is removed, reason
// launcher_gone, once the token that created it has held no event
// stream of it and sent no keepalive for that long (tether.go: when the
// service last saw the launcher is its memory, so only a running service
// enforces it, and a restart sees every launcher at its start). Load
// reconciles every campaign at start (adapter.Reconcile: a bring-up a
// killed service left is rolled back, a removal finished, an expired
// campaign removed), each reading deleting meanwhile, and the state root
// is rescanned every RescanInterval for campaigns other processes made.
//
// # Campaigns
//
// A campaign's state is its journal's (campaign.Fold, through the store),
// read on every request, never remembered, with the reports the journal
// names: the list holds every campaign of the state root the caller sees
// (Launchers, above), and a campaign
// another process brought up, attested or removed, or that a killed
// create or delete left half made, reads as it is (campaign.Status: ready,
// attestation_failed, starting_or_failed, cleanup_failed, removed,
// unusable, empty). The service keeps in memory only its own
// operations in progress (creating, deleting) and the proxy's table,
// which each read reconciles with the files: only a ready campaign's
// workspaces are served. DELETE removes whatever the journal records as
// live, in any state (adapter.Cleanup, as agentpen down). Operations on
// one campaign are serialised by a mutex of its own; the adapter also
// holds the campaign's flock across processes, and different campaigns
// proceed in parallel. A create whose client goes away is cancelled, and
// the adapter rolls the bring-up back by exact id. Close leaves every
// campaign up and journalled; CleanupAll removes every campaign that is
// not removed (agentpen serve --cleanup-on-exit). One service serves a
// state root (agentpen serve holds store.Root.LockServe).
//
// # Episode proxy
//
// Each workspace's base_url is PublicURL/episode/<capability>. The
// capability, an HMAC-SHA256 under the server key (KeyFile, a secret of
// the state root: store.Root.Secret) of the campaign id, the generation's instance nonce and the
// agent id, is the credential: OpenEnv clients send no headers, and a
// path segment survives every client unchanged. It is derived, never
// stored, so a restarted service hands out the same base_urls; it names
// one workspace of one generation, so it never reaches another
// workspace, another campaign or a later generation of the same id, and
// it is revoked (404, open sessions closed with 1001) when the campaign
// is deleted. The proxy serves OpenEnv's routes: WS /ws, relayed full
// duplex with messages up to MaxFrameBytes, and POST /reset, POST /step,
// GET /state, /schema, /metadata and /health over HTTP, to the
// workspace's unix socket (the workbench accepts host root, which the
// proxy runs as). Frames and bodies pass unchanged but for the task
// binding: every reset (and every stateless HTTP step) is given the
// workspace's task_id, whatever the client sent, and a WebSocket step
// while the session holds no episode of that task (before its first
// reset, or after a reset that failed) is answered by the proxy with
// OpenEnv's error frame (EXECUTION_ERROR) and never relayed. A workspace that does
// not answer is a 502 problem before any upgrade; one lost during a
// session closes the client with 1011 and a reason that says so.
//
// The proxy owns every header it sends (relay.go): a workspace's socket
// is the daemon user's, and nothing it answers chooses how a browser
// takes an answer on the API's origin. Every answer carries the
// service's headers (ProxyCSP, nosniff, no referrer, no frame); a
// relayed body is JSON, checked whole, or MCP's event stream, typed by
// the proxy; any other answer is refused, no redirect is relayed, and of
// the workspace's headers only MCP's session id comes back. The play
// page (/web/) is the service's own copy (package playpage); only its
// JSON and its live state are relayed.
//
// The package does not talk to Docker: everything goes through package
// adapter (a test keeps the Docker SDK out of its imports). It does not
// terminate TLS or choose a listener: agentpen serve does.
package launcher
