package adapter_test

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
	imgs, err := d.Images(t.Context(), "agentpen/")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := imgs["agentpen/python-base:bookworm"]; !ok && testenv.Required() {
		t.Fatalf("agentpen/python-base:bookworm missing (make images builds it); have %v", imgs)
	}
}
