package adapter_test

import (
	"os"
	"testing"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/internal/testenv"
)

// TestConnectRealDaemon connects to the real rootless daemon started by
// scripts/rootless-docker.sh and checks the identity it reads.
func TestConnectRealDaemon(t *testing.T) {
	raw := testenv.RequireDocker(t)
	host, err := adapter.ResolveHost(raw, os.Getenv("AGENTPEN_ALLOW_CUSTOM_SOCKET") == "1")
	if err != nil {
		t.Fatal(err)
	}
	d, err := adapter.Connect(t.Context(), host)
	if err != nil {
		t.Fatalf("Connect(%s): %v", host, err)
	}
	defer d.Close()
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
