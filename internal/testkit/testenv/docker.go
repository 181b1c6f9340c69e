package testenv

import (
	"net"
	"os"
	"testing"
	"time"
)

// Required reports whether tests that need Docker or root must fail rather
// than skip: in CI (CI=true) or when AGENTPEN_REQUIRE_DOCKER=1.
func Required() bool {
	return os.Getenv("CI") == "true" || os.Getenv("AGENTPEN_REQUIRE_DOCKER") == "1"
}

// RequireDocker returns DOCKER_HOST when it names a unix socket that accepts
// a connection. Otherwise the test fails when Required and is skipped
// locally, with a message that says how to start the daemon.
func RequireDocker(t testing.TB) string {
	t.Helper()
	host := os.Getenv("DOCKER_HOST")
	const how = `start it with: eval "$(scripts/rootless-docker.sh)" (as root), or run make test`
	missing := func(why string) {
		t.Helper()
		if Required() {
			t.Fatalf("rootless Docker is required here but %s; %s", why, how)
		}
		t.Skipf("no rootless Docker: %s; %s", why, how)
	}
	if len(host) <= len("unix://") || host[:len("unix://")] != "unix://" {
		missing("DOCKER_HOST is not a unix:// socket")
		return ""
	}
	c, err := net.DialTimeout("unix", host[len("unix://"):], 2*time.Second)
	if err != nil {
		missing("nothing accepts connections on " + host)
		return ""
	}
	c.Close()
	return host
}

// WorkbenchImageEnv names the variable that picks the workbench image the
// tests that attest run in (their probes need its workbench binary);
// DefaultWorkbenchImage when unset.
const WorkbenchImageEnv = "AGENTPEN_TEST_WORKBENCH_IMAGE"

// DefaultWorkbenchImage is the image those tests use by default: built
// from this tree (make images builds agentpen/workbench:dev; a branch whose
// workbench binary changed builds its own tag until it is merged).
const DefaultWorkbenchImage = "agentpen/workbench:dev"

// WorkbenchImage is the workbench image for tests that attest.
func WorkbenchImage() string {
	if v := os.Getenv(WorkbenchImageEnv); v != "" {
		return v
	}
	return DefaultWorkbenchImage
}
