package agentpen_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// freshCheckout makes dir/agentpen look like a fresh checkout where make
// build ran: bin/ built from this tree (workbench root-only, as make build
// leaves it), scripts/, testdata/ and clients/ linked to this tree's. Scripts run in
// it as they would in a clone; nothing is built into the tree under test.
func freshCheckout(t *testing.T, dir string) string {
	t.Helper()
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	checkout := filepath.Join(dir, "agentpen")
	if err := os.Mkdir(checkout, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"scripts", "testdata", "clients"} {
		if err := os.Symlink(filepath.Join(root, name), filepath.Join(checkout, name)); err != nil {
			t.Fatal(err)
		}
	}
	build := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(checkout, "bin")+"/", "./cmd/...")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if err := os.Chmod(filepath.Join(checkout, "bin", "workbench"), 0o700); err != nil {
		t.Fatal(err)
	}
	return checkout
}
