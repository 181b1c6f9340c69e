package store

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestSigningKey: the root's signing key is made at first use (0600) and
// the same afterwards; PublicKey makes none; a key file others can read
// is refused.
func TestSigningKey(t *testing.T) {
	r, err := CreateRoot(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.PublicKey(); !errors.Is(err, ErrNoSigningKey) {
		t.Fatalf("PublicKey of a root without a key: %v", err)
	}
	if _, err := os.Stat(r.KeyPath(SigningKeyName)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("PublicKey made a key: %v", err)
	}
	k1, err := r.SigningKey()
	if err != nil {
		t.Fatal(err)
	}
	k2, err := r.SigningKey()
	if err != nil || !k1.Equal(k2) {
		t.Fatalf("a second use made another key: %v", err)
	}
	pub, err := r.PublicKey()
	if err != nil || !pub.Equal(k1.Public()) {
		t.Fatalf("PublicKey: %v", err)
	}
	fi, err := os.Stat(r.KeyPath(SigningKeyName))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	os.Chmod(r.KeyPath(SigningKeyName), 0o644)
	if _, err := r.SigningKey(); !errors.Is(err, ErrSecret) {
		t.Fatalf("a readable key file: %v", err)
	}
}

// TestWriteEnvelope: an envelope is written once beside its report, never
// over another file.
func TestWriteEnvelope(t *testing.T) {
	_, c := newCampaign(t, "camp-env", begun...)
	f, err := c.WriteReport(KindAttestation, 1, []byte("{}\n"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.WriteEnvelope(f, []byte("env-1"))
	if err != nil || len(d) != 64 {
		t.Fatalf("WriteEnvelope: %q %v", d, err)
	}
	if _, err := c.WriteEnvelope(f, []byte("env-2")); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("a second envelope for %s: %v", f.Name, err)
	}
	b, err := c.ReadFile(EnvelopeName(f.Name), 1<<10)
	if err != nil || !bytes.Equal(b, []byte("env-1")) || EnvelopeName(f.Name) != "attestation-1-1.dsse.json" {
		t.Fatalf("read back %q %v", b, err)
	}
	if reps, _ := c.Reports(KindAttestation); len(reps) != 1 {
		t.Fatalf("the envelope is listed as a report: %v", reps)
	}
}
