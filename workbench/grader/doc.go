// Package grader keeps the answer keys out of the agent's container: a
// grader service (Server, run by `workbench grader` in the campaign's
// server container) holds the task catalogue's answers and hidden cases,
// and a remote episode.Grader (Client, used by `workbench serve --grader
// URL`) asks it to grade. With the Client, an episode.Environment drops
// each task's key right after building it (see package episode), so
// expected answers and hidden expected values never stay in the
// workspace container; standalone, `workbench serve` grades in-process.
//
// # Routes
//
// GET /health and GET /docs (the route list) are public. The protected
// routes need the API key in the X-API-Key header (exactly one such
// header); a missing or wrong key gets 401 with a fixed JSON body before
// the body is read, so a refused call reaches no task and changes nothing.
// The key is compared as SHA-256 sums in constant time.
//
//	POST /v1/score {task_id, answer}                  -> {credit, reason}
//	POST /v1/cases {task_id}                          -> {inputs: [[arg, ...], ...]}
//	POST /v1/judge {task_id, visible_passed, hidden}  -> {credit, reason}
//	GET  /v1/counters                                 -> {routes: {route: {requests, authorized, refused}}}
//
// The counters (counters.go) count each protected route's requests before
// and after the key check, so the attestation proves that requests sent
// without the key were refused and reached no handler: it reads them with
// the key before and after its probes and compares.
//
// /v1/cases returns only the arguments of a code task's hidden cases;
// /v1/judge takes whether each visible case passed and, per hidden case,
// {"value": V} for the JSON value it printed or {} for none, and grades
// exactly as the in-process grader does: the service serves
// episode.LocalGrader over its catalogue, so both grade alike by
// construction, and the tests play the catalogue both ways.
//
// Refusals are {code, message} with a fixed message that never repeats
// what the client sent: 400 a body that is not JSON, 401 the key, 404 an
// unknown task or route, 413 a body over MaxBodyBytes, 422 a bad field
// (invalid UTF-8, unknown or duplicate fields, wrong types, a task of the
// other kind, counts that do not match the task). The log has one line
// per request with the route pattern (never the raw path), status and
// duration; no header or body value ever reaches it.
//
// # Connections
//
// Serve puts a gate (package gate) in front of every listener: a
// connection over ServerConfig.MaxConnsPerPeer from one peer (an episode
// server's address, in a campaign; its uid on the same host) or over
// ServerConfig.MaxConns in all is closed as it is accepted, before any
// request is read, so a flood from one workspace cannot take the
// descriptors the grader needs for the others. With
// ServerConfig.EpisodeUID set (`workbench grader` as root), connections
// from episode code on the same host are closed at accept too. The gate
// logs each kind of refusal at most once per 10 s.
//
// # Client
//
// Every call has a timeout (ClientConfig.Timeout, default 10 s per
// attempt) and is tried once more after no response or a 502/503/504,
// never after a timeout. It never follows a redirect. A failure is an
// *Error naming the route and the status or failure, never the grader's
// address or the key: the environment shows it to the agent as the
// refusal of that step, the episode goes on, and no credit is given.
// Hidden arguments come back with exact numbers (json.Number), so the
// cases run on the same bytes as in-process.
//
// A judge request carries what the agent's code printed (up to 1 MiB per
// case); an answer or outputs whose encoding exceeds MaxBodyBytes is
// refused (413), so that step is refused instead of graded 0. No
// catalogue task comes near it.
package grader
