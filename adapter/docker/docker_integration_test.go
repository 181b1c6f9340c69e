package docker_test

import (
	"testing"

	"github.com/docker/docker/api"
	"github.com/docker/docker/api/types/versions"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

// TestConnectRealDaemon connects to the real rootless daemon started by
// scripts/rootless-docker.sh and checks the identity it reads.
func TestConnectRealDaemon(t *testing.T) {
	d, _ := realDocker(t)
	id := d.Daemon()
	if !id.Rootless || id.ID == "" || id.ServerVersion == "" || id.DockerRootDir == "" {
		t.Fatalf("identity = %+v; want rootless with ID, version and root dir", id)
	}
	// The SDK speaks up to its own version and the daemon here 1.41:
	// negotiation must settle on a version in [1.24, client's], compared as
	// versions, not strings ("1.100" > "1.99").
	if id.APIVersion == "" || versions.LessThan(id.APIVersion, "1.24") || versions.GreaterThan(id.APIVersion, api.DefaultVersion) {
		t.Fatalf("negotiated API version %q, want 1.24..%s", id.APIVersion, api.DefaultVersion)
	}
	if _, err := d.Resolve(t.Context(), "agentpen/python-base:bookworm"); err != nil && testenv.Required() {
		t.Fatalf("agentpen/python-base:bookworm missing (make images builds it): %v", err)
	}
}
