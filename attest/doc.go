// Package attest proves what a campaign is, from evidence: it derives what
// the campaign must be from its spec, its journal, the daemon recorded at
// bring-up and the adapter's create settings (Source), compares that with
// what the daemon and the probes inside the containers returned
// (Observation), and writes the verdict as a secret-free Report
// (schema agentpen.attestation.v1): every check as {observed, expected,
// pass}, grouped by section, ok only when all passed, and the failed
// checks by name, sorted.
//
// It is pure: observations in, a report out. It never talks to Docker, the
// network or a subprocess, and touches no file (a dependency test in the
// repository root enforces it); the adapter observes, runs the probes it
// plans (PlanExecs), and writes the report. It decodes the daemon's raw
// JSON with its own small structs, so its test fixtures are raw daemon
// JSON captured from the real daemon. Environment values are dropped as
// they are decoded: only names stay, and for the API key variable only its
// apikey.Status (present, placeholder, a 16-hex fingerprint).
//
// It fails closed: evidence that is missing, unreadable or not definite
// fails the checks that needed it. A refusal or a timeout counts as
// "unreachable" only beside a positive control that connected in the same
// exec. A container the daemon does not answer for fails its ".present"
// check, and its other daemon-side checks are then not made (they would
// only repeat it).
//
// Catalogue lists every check Evaluate can emit, with what it proves, its
// evidence and what it cannot prove (agentpen checks, docs/checks.md); a
// test holds the two equal.
//
// What it does not do: it removes nothing and decides nothing about
// removal (package cleanup); it does not enforce limits, only says whether
// the daemon does (rootless on cgroup v1 enforces none, and the report says
// so); it does not probe a launcher server's own protected routes (only the
// workbench grader's, whose routes it knows), nor egress without a
// configured target (the report then says egress was attested from the
// network's Internal flag alone); it does not probe agent to agent (the
// agent-isolation work adds those rules to the probe table).
package attest
