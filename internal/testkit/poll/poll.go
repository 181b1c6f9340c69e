// Package poll waits in tests for state that changes after the test's own
// part is done (a slot freed after a close, a goroutine gone). It bounds
// the wait only to end a test that would hang: a deadline here is never
// an assertion about speed.
package poll

import (
	"testing"
	"time"
)

// Timeout is how long Until waits before it fails the test.
const Timeout = 10 * time.Second

// Until calls cond every few milliseconds until it holds, and fails t
// (naming what) when Timeout passes first.
func Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", Timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
