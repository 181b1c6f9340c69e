// Package adapter is agentpen's engine: the adapter between launchers
// and a runtime that holds their campaigns. It owns every use case
// (bring-up and its fail-closed policy, attestation, claims and refills of
// a pool, lifetimes, reconciliation, removal, orphans, results) and the
// custody discipline, and it talks to no runtime itself: a driver
// (package adapter/driver) does the runtime's I/O, one resource at a time,
// by exact id. adapter/docker is the driver of a validated rootless Docker
// daemon; cmd/agentpen wires a driver into an Adapter. The engine imports
// no runtime's SDK (a test in the repository root keeps it so).
//
// It does not decide what a campaign is (package campaign plans it from
// the launcher's spec and folds its journal into a lifecycle, purely),
// whether a resource may be removed (package cleanup decides, purely),
// what the evidence proves (package attest judges, purely), or where a
// campaign's files are (package store owns the state root, and every
// method here takes a store campaign). Files are split by job: the engine
// and its runtime-wide locks (adapter.go, alloc.go for uid blocks),
// bring-up (bringup.go, progress.go) and its fail-closed policy (up.go),
// images (images.go), attestation (attest.go), removal (cleanup.go,
// resolve.go, orphans.go), pools (pool.go), lifetimes and
// reconciliation (lifetime.go), the episode results (results.go) and
// rebuilding a campaign from its state directory (load.go).
//
// # The custody discipline
//
// A bring-up asks the driver to lay the plan out (driver.Layout: the
// campaign's shared objects in stages, then a unit per container: what it
// needs, and itself), then for each object appends an intent (with a
// secret of that create among its labels, recorded nowhere else) to the
// campaign's fsync'd journal, has the driver create it, and journals the
// id the driver answered. Shared objects come first; then the server and
// the workspaces are made and started concurrently (Parallelism at once,
// the server first), a workspace bound to its task before its container
// is made, and each container's readiness awaited from the moment it
// started. Any failure, including cancellation, removes what was created
// by exact id and says so in the journal. A create refused because the
// name is taken is never adopted; after any other failure the name is
// looked up (driver Lookup) and adopted only when its labels, the
// create's secret among them, prove it is this create's.
//
// A removal (Cleanup, the rollback, Reconcile) works by the ids the
// journal recorded, never by a name pattern or a label filter, in three
// steps per resource: observe (by id), decide (cleanup.Decide: remove,
// already gone, not ours, or refuse, with a reason) and act (remove by
// id; a runtime with preconditions refuses a resource changed since, and
// it is observed and decided again). Every resource is observed again
// after, and what still carries the campaign's label is listed: a
// look-alike is reported, never removed. Up is the policy agentpen up and
// the launcher share: bring up, attest, and remove a campaign that does
// not attest.
//
// # Lifetimes
//
// lifetime.go is a campaign lifetime's engine side: SetLifetime journals
// one, LastActivity asks the driver when a workspace last served a reset
// or a step, and Reconcile rolls back a bring-up a dead process left,
// finishes a removal, or removes a campaign whose lifetime is over, under
// the campaign's lock and on the state read under it.
//
// The engine's own tests run on an in-memory driver
// (internal/testkit/fakedriver); the conformance suite
// (adapter/drivertest) holds every driver, and this engine on it, to the
// discipline above on its real runtime. Decisions beyond docs/design.md
// are in docs/decisions.md; how to write a driver is docs/drivers.md.
package adapter
