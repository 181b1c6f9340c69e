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

// Unavailable skips t because this host lacks something the test needs
// (why says what), or, when tests are Required (CI), fails it: the host CI
// runs on must have it, and a check that silently skips there proves
// nothing.
func Unavailable(t testing.TB, why string) {
	t.Helper()
	if Required() {
		t.Fatalf("%s (CI=true or AGENTPEN_REQUIRE_DOCKER=1: required here)", why)
	}
	t.Skip(why)
}
