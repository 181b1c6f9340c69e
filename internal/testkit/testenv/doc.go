// Package testenv holds the test helpers that decide whether a test that
// needs the real environment (a rootless Docker daemon, root for the uid
// sandbox) runs, fails or is skipped: in CI (CI=true, or
// AGENTPEN_REQUIRE_DOCKER=1) a missing requirement is a failure, never a
// skip; on a developer's machine it is a skip that says what to install.
//
// It also bounds a test's waits (Deadline, Context, WaitFor, Until,
// CleanupContext, MainDeadline): by the run's own deadline (go test
// -timeout), never by a wall-clock bound of their own that a loaded
// machine can break. It does not time anything: a test that must show
// something is quick measures a control in the same run or drives
// internal/testkit/fakeclock.
//
// Readable is what the secret scans read of a file (a signed statement's
// payload decoded).
//
// It also bounds a test's waits (Deadline, Context, WaitFor,
// LeftGoroutines): by the run's own deadline (go test -timeout), never by
// a wall-clock bound of their own that a loaded machine can break. It
// does not time anything: a test that must show something is quick
// measures a control in the same run or drives internal/testkit/fakeclock.
package testenv
