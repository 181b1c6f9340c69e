package custody_test

import (
	"crypto/ed25519"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/custody"
)

// TestCosign (opt-in: AGENTPEN_COSIGN names a cosign v2 binary;
// scripts/cosign-check.sh builds one into a cache and runs this): cosign
// verify-blob-attestation, a third implementation, accepts every report
// of a campaign with the state root's public key, and refuses a changed
// report and another key.
func TestCosign(t *testing.T) {
	bin := os.Getenv("AGENTPEN_COSIGN")
	if bin == "" {
		t.Skip("opt-in: set AGENTPEN_COSIGN to a cosign v2 binary (scripts/cosign-check.sh builds one)")
	}
	dir, key := signedCampaign(t, lifecycle{})
	pub := filepath.Join(t.TempDir(), "pub.pem")
	os.WriteFile(pub, custody.MarshalPublicKey(pubOf(key)), 0o644)
	cosign := func(pub, report string, kind custody.Kind) (string, error) {
		env := strings.TrimSuffix(report, ".json") + ".dsse.json"
		cmd := exec.CommandContext(t.Context(), bin, "verify-blob-attestation", "--key", pub, "--signature", env,
			"--type", kind.PredicateType, "--insecure-ignore-tlog=true", report)
		// With a key and no transparency log nothing remote is needed; the
		// TUF mirror cosign still tries is a loopback port that refuses,
		// so no lookup leaves this host.
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "TUF_ROOT="+t.TempDir(), "TUF_MIRROR=http://127.0.0.1:9")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for name, kind := range map[string]custody.Kind{att1: custody.Attestation, att2: custody.Attestation, cln1: custody.Cleanup} {
		out, err := cosign(pub, filepath.Join(dir, name), kind)
		if err != nil {
			t.Fatalf("cosign refuses %s: %v\n%s", name, err, out)
		}
		t.Logf("cosign verify-blob-attestation %s: %s", name, strings.TrimSpace(out))
	}

	// A changed report, and another key: refused.
	cp := copyDir(t, dir)
	editJSON(t, filepath.Join(cp, att1), func(m map[string]any) { m["ok"] = true })
	if out, err := cosign(pub, filepath.Join(cp, att1), custody.Attestation); err == nil || strings.Contains(out, "Verified OK") {
		t.Fatalf("cosign accepts a changed report:\n%s", out)
	} else {
		t.Logf("a changed report: %s", strings.TrimSpace(out))
	}
	otherKey, _, _ := ed25519.GenerateKey(nil)
	otherPub := filepath.Join(t.TempDir(), "other.pem")
	os.WriteFile(otherPub, custody.MarshalPublicKey(otherKey), 0o644)
	if out, err := cosign(otherPub, filepath.Join(dir, att1), custody.Attestation); err == nil || strings.Contains(out, "Verified OK") {
		t.Fatalf("cosign accepts another key:\n%s", out)
	} else {
		t.Logf("another key: %s", strings.TrimSpace(out))
	}
}
