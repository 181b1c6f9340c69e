// Package store owns agentpen's state root: the directory of one state
// directory per campaign, and the files in each.
//
// A state root is opened once (OpenRoot, CreateRoot), and checked before
// anything in it is read, created or locked: it must be a directory that
// this user (or root) owns and no other user can write. Every name below
// it is resolved relative to its open descriptor without following a
// symbolic link (internal/beneath), so nothing in it can send agentpen,
// which runs as root, to a file elsewhere.
//
// Layout (docs/architecture.md has it too):
//
//	<root>/campaigns/.create.<key>.<n>/  a new campaign's directory until its first record (Root.Create)
//	<root>/campaigns/<key>/          one per campaign id (campaign.Key), 0700
//	    journal.jsonl                the journal (campaign.Journal), appended only
//	    spec-<gen>.json              the spec of generation <gen>, written once
//	    daemon-<gen>.json            the daemon it was brought up on, written once
//	    attestation-<gen>-<n>.json   the n-th attestation of generation <gen>
//	    cleanup-<gen>-<n>.json       the n-th cleanup (or verification) since <gen> began
//	    <report>.dsse.json           each report's signed statement (WriteEnvelope), beside it
//	<root>/api/serve.lock            agentpen serve's hold of the root (LockServe)
//	<root>/keys/<name>               secrets the root keeps (Secret), 0600
//	<root>/keys/signing.key          the reports' ed25519 signing key (SigningKey)
//
// The campaign's files are append-only: a file is written whole under a
// name that did not exist (O_EXCL, then synced) and never rewritten, moved
// or removed; the journal records each report's name and SHA-256 (and
// its envelope's) after the files are on disk, and readers reach reports
// through the journal's records only (Campaign.Attestation, Campaign.Cleanup), so a report the
// journal does not name (one whose writer died before journalling it) is
// never taken for a verdict.
//
// What a campaign is (its campaign.Lifecycle) is read from its journal
// on every call: another process may change it at any time. Locks
// (Locks) serialise the processes that act on one campaign.
//
// The package never talks to Docker or the network.
package store
