package custody_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/agentpen/agentpen/custody"
	"github.com/agentpen/agentpen/internal/beneath"
	"github.com/agentpen/agentpen/internal/custodytest"
)

// lifecycle is custodytest.Lifecycle.
type lifecycle = custodytest.Lifecycle

// signedCampaign is custodytest.Campaign in a new state root.
func signedCampaign(t *testing.T, lc lifecycle) (string, ed25519.PrivateKey) {
	t.Helper()
	return custodytest.Campaign(t, filepath.Join(t.TempDir(), "state"), lc)
}

// copyDir copies a campaign's directory to a new one, for tampering.
func copyDir(t *testing.T, dir string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "copy")
	if out, err := exec.Command("cp", "-a", dir, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	return dst
}

// verifyDir verifies the campaign in dir as agentpen verify does.
func verifyDir(t *testing.T, dir string, pub ed25519.PublicKey, opts custody.Options) *custody.Result {
	t.Helper()
	d, err := beneath.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	return custody.Verify(context.Background(), d, pub, opts)
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sha256Sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
