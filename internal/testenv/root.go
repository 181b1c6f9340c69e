package testenv

import (
	"os"
	"testing"
)

// RequireRoot makes a test that needs root (the uid sandbox: setuid,
// chown, kill of other uids) fail when Required (CI) and skip otherwise,
// saying what is missing.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	const why = "the uid sandbox needs root (CAP_SETUID, CAP_SETGID, CAP_CHOWN, CAP_KILL); run the tests as root, e.g. sudo go test"
	if Required() {
		t.Fatalf("not root (euid %d): %s", os.Geteuid(), why)
	}
	t.Skipf("not root (euid %d): %s", os.Geteuid(), why)
}
