// Package sandboxtest holds what the tests that run processes as sandbox
// uids share: the default range's predicate (a server's or gate's
// EpisodeUID) and a uid claimed from the machine's shared pool for the
// test's length. It does not run anything as that uid.
package sandboxtest

import (
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
	pool := sandbox.PoolFor("")
	uid, err := pool.Claim()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Release(uid) })
	return uint32(uid)
}
