package docker

import (
	"bytes"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/custody"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

// TestSecondAttestLeavesFirst: a second agentpen attest writes a new
// report and envelope beside the first, which stays byte for byte, and
// both verify alone; after agentpen down the whole campaign verifies
// (the cleanup following the second attestation), with the state root's
// key. Neither the statements nor anything else holds the API key.
// Before custody, the envelopes did not exist and nothing could verify.
func TestSecondAttestLeavesFirst(t *testing.T) {
	a, _ := fakeAdapter(t)
	const canary = "canary-custody-key-5e1d07b3a9"
	a.Getenv = func(k string) string { return map[string]string{campaign.DefaultAPIKeyEnv: canary}[k] }
	spec := fakeSpec("custody", 1)
	fakeCampaign(t, a, spec)
	dir := a.CampaignDir(spec.CampaignID)
	if _, err := a.Attest(t.Context(), spec.CampaignID, adapter.AttestOptions{ProbeTimeout: 200e6}); err != nil {
		t.Fatal(err)
	}
	first := map[string][]byte{}
	for _, n := range []string{"attestation-1-1.json", "attestation-1-1.dsse.json"} {
		first[n] = readBytes(t, filepath.Join(dir, n))
	}
	if _, err := a.Attest(t.Context(), spec.CampaignID, adapter.AttestOptions{ProbeTimeout: 200e6}); err != nil {
		t.Fatal(err)
	}
	for n, b := range first {
		if !bytes.Equal(readBytes(t, filepath.Join(dir, n)), b) {
			t.Errorf("%s changed after the second attestation", n)
		}
	}
	pub, err := a.Root.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	c, err := a.Root.Open(spec.CampaignID)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, n := range []string{"attestation-1-1.json", "attestation-1-2.json"} {
		if res := custody.Verify(t.Context(), c, pub, custody.Options{Only: n}); !res.OK {
			t.Errorf("%s does not verify: %v", n, res.Failed)
		}
	}
	if err := a.TearDown(t.Context(), spec.CampaignID); err != nil {
		t.Fatal(err)
	}
	res := custody.Verify(t.Context(), c, pub, custody.Options{})
	if !res.OK || !slices.Equal(res.Reports, []string{"attestation-1-1.json", "attestation-1-2.json", "cleanup-1-1.json"}) {
		t.Fatalf("the campaign does not verify: %v %v", res.Reports, res.Failed)
	}
	other, _, _ := ed25519.GenerateKey(nil)
	if custody.Verify(t.Context(), c, other, custody.Options{}).OK {
		t.Fatal("verified with another key")
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if b := readBytes(t, filepath.Join(dir, e.Name())); strings.Contains(string(testenv.Readable(b)), canary) {
			t.Errorf("%s holds the API key", e.Name())
		}
	}
}

// TestOperatorSigningKey: an adapter given a key signs with it, and the
// state root makes none.
func TestOperatorSigningKey(t *testing.T) {
	a, _ := fakeAdapter(t)
	pub, priv, _ := ed25519.GenerateKey(nil)
	a.SigningKey = priv
	spec := fakeSpec("custody-op", 1)
	fakeCampaign(t, a, spec)
	if _, err := a.Attest(t.Context(), spec.CampaignID, adapter.AttestOptions{ProbeTimeout: 200e6}); err != nil {
		t.Fatal(err)
	}
	c, err := a.Root.Open(spec.CampaignID)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if res := custody.Verify(t.Context(), c, pub, custody.Options{}); !res.OK {
		t.Fatalf("not verified with the operator's key: %v", res.Failed)
	}
	if _, err := os.Stat(a.Root.KeyPath("signing.key")); !os.IsNotExist(err) {
		t.Fatalf("the state root made a key of its own: %v", err)
	}
}

func readBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
