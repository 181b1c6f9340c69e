// Package sandboxtest holds what the tests that run processes as sandbox
// uids share: the default range's predicate (a server's or gate's
// EpisodeUID), a uid claimed from the machine's shared pool for the
// test's length, and one sandbox per test binary for real episodes.
package sandboxtest

import (
	"sync"
	"testing"

	"github.com/agentpen/agentpen/workbench/sandbox"
)

// InDefaultRange reports whether uid is in the uid sandbox's default
// range (sandbox.DefaultRange), as a server's EpisodeUID.
func InDefaultRange(uid uint32) bool { return sandbox.DefaultRange.Contains(int(uid)) }

// ClaimUID claims a uid of the sandbox's range from the machine's shared
// pool (as an episode would), so no other test process hands it to an
// episode, kills its processes or sweeps its files while this test runs
// processes as it; it is released when the test ends.
func ClaimUID(t testing.TB) uint32 {
	t.Helper()
	pool := sandbox.NewPool(sandbox.DefaultLockDir, sandbox.DefaultRange)
	uid, err := pool.Claim()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Release(uid) })
	return uint32(uid)
}

// shared is the tests' one sandbox: namespaces as root, unsandboxed
// otherwise (the tests that need root say so).
var shared = sync.OnceValues(func() (*sandbox.Sandbox, error) {
	if !sandbox.Available() {
		return sandbox.New(sandbox.Config{Mode: sandbox.Unsandboxed})
	}
	return sandbox.New(sandbox.Config{})
})

// Shared returns the tests' sandbox, made once per test binary: episodes
// in namespaces of their own as root, unsandboxed otherwise.
func Shared(t testing.TB) *sandbox.Sandbox {
	t.Helper()
	sb, err := shared()
	if err != nil {
		t.Fatalf("sandbox: %v", err)
	}
	return sb
}
