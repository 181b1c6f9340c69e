// Package poll waits in tests for state that changes after the test's own
// part is done (a slot freed after a close, a goroutine gone). It bounds
// the wait only to end a test that would hang, at the test's deadline (go
// test -timeout, less testenv's grace): never a bound of its own, which a
// loaded machine could break, and never an assertion about speed.
package poll

import (
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

// Until calls cond every few milliseconds until it holds, and fails t
// (naming what) when the test's deadline passes first.
func Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testenv.WaitFor(t, what, cond)
}
