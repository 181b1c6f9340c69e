package adapter_test

import (
	"testing"

	"github.com/agentpen/agentpen/internal/testenv"
)

// TestConnectRealDaemon connects to the real rootless daemon started by
// scripts/rootless-docker.sh and checks the identity it reads.
func TestConnectRealDaemon(t *testing.T) {
	d, _ := realDocker(t)
	id := d.Daemon()
	if !id.Rootless || id.ID == "" || id.ServerVersion == "" || id.DockerRootDir == "" {
		t.Fatalf("identity = %+v; want rootless with ID, version and root dir", id)
	}
	if id.APIVersion == "" || id.APIVersion > "1.99" {
		t.Fatalf("negotiated API version %q", id.APIVersion)
	}
	imgs, err := d.Images(t.Context(), "agentpen/")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := imgs["agentpen/python-base:bookworm"]; !ok && testenv.Required() {
		t.Fatalf("agentpen/python-base:bookworm missing (make images builds it); have %v", imgs)
	}
}
