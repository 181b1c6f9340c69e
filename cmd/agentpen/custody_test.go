package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/custody"
	"github.com/agentpen/agentpen/internal/cli"
	"github.com/agentpen/agentpen/internal/custodytest"
)

var update = flag.Bool("update", false, "rewrite docs/checks.md")

// runCLI runs agentpen with args and no environment but HOME.
func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	env := map[string]string{"HOME": t.TempDir()}
	err := run(t.Context(), args, &out, &errb, func(k string) string { return env[k] })
	return out.String() + errb.String(), err
}

// TestVerifyCommand: agentpen verify of a campaign id, of a report and
// of an envelope exits 0 when every check holds; a changed report, or
// another key, exits 1 naming the check; no key, or no campaign, exits 2.
func TestVerifyCommand(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	dir, key := custodytest.Campaign(t, state, custodytest.Lifecycle{})
	for _, target := range []string{"demo", filepath.Join(dir, "attestation-1-2.json"), filepath.Join(dir, "cleanup-1-1.dsse.json")} {
		out, err := runCLI(t, "verify", "--state-root", state, target)
		if exitCode(err) != 0 || !strings.HasPrefix(out, "verified: ") {
			t.Fatalf("verify %s: exit %d\n%s", target, exitCode(err), out)
		}
	}
	out, err := runCLI(t, "verify", "--state-root", state, "--json", "demo")
	var res custody.Result
	if exitCode(err) != 0 || json.Unmarshal([]byte(out), &res) != nil || !res.OK || len(res.Reports) != 3 {
		t.Fatalf("--json: exit %d %+v\n%s", exitCode(err), res, out)
	}

	// Another key: exit 1, each signature named.
	pub, _, _ := ed25519.GenerateKey(nil)
	pemFile := filepath.Join(t.TempDir(), "other.pem")
	os.WriteFile(pemFile, custody.MarshalPublicKey(pub), 0o644)
	out, err = runCLI(t, "verify", "--state-root", state, "--key", pemFile, "demo")
	if exitCode(err) != 1 || !strings.HasPrefix(out, "NOT verified") || !strings.Contains(out, "attestation-1-1.json.signature: ") {
		t.Fatalf("another key: exit %d\n%s", exitCode(err), out)
	}
	// The signer's key given with --key verifies.
	signer := filepath.Join(t.TempDir(), "signer.pem")
	os.WriteFile(signer, custody.MarshalPublicKey(key.Public().(ed25519.PublicKey)), 0o644)
	// ... with no state root read at all (one another user could write is
	// not even opened).
	unusable := t.TempDir()
	os.Chmod(unusable, 0o777)
	if out, err := runCLI(t, "verify", "--state-root", unusable, "--key", signer, filepath.Join(dir, "attestation-1-1.json")); exitCode(err) != 0 {
		t.Fatalf("--key of the signer: exit %d\n%s", exitCode(err), out)
	}

	// One field of a report changed: exit 1, naming the predicate.
	b, _ := os.ReadFile(filepath.Join(dir, "attestation-1-1.json"))
	os.WriteFile(filepath.Join(dir, "attestation-1-1.json"), bytes.Replace(b, []byte(`"generation": 1`), []byte(`"generation": 2`), 1), 0o600)
	out, err = runCLI(t, "verify", "--state-root", state, "demo")
	if exitCode(err) != 1 || !strings.Contains(out, "attestation-1-1.json.predicate: ") || cli.Message("agentpen", err) != "" {
		t.Fatalf("a changed report: exit %d %q\n%s", exitCode(err), cli.Message("agentpen", err), out)
	}

	// No key to verify with; no such campaign; not a report: exit 2.
	for _, args := range [][]string{
		{"verify", "--state-root", t.TempDir(), filepath.Join(dir, "attestation-1-2.json")},
		{"verify", "--state-root", state, "nope"},
		{"verify", "--state-root", state, filepath.Join(dir, "spec-1.json")},
		{"verify", "--state-root", state, "--key", filepath.Join(dir, "spec-1.json"), "demo"},
	} {
		if out, err := runCLI(t, args...); exitCode(err) != 2 {
			t.Errorf("%v: exit %d, want 2\n%s", args, exitCode(err), out)
		}
	}
}

// TestKeyCommand: agentpen key prints the state root's public key as
// SPKI PEM (the one its reports verify with), or the operator's; an
// operator key others can read is refused.
func TestKeyCommand(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	_, key := custodytest.Campaign(t, state, custodytest.Lifecycle{})
	out, err := runCLI(t, "key", "--state-root", state)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := custody.ParsePublicKey([]byte(out))
	if err != nil || !pub.Equal(key.Public()) {
		t.Fatalf("key printed %q (%v), not the signer's", out, err)
	}
	_, op, _ := ed25519.GenerateKey(nil)
	der, _ := x509.MarshalPKCS8PrivateKey(op)
	file := filepath.Join(t.TempDir(), "op.pem")
	os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
	out, err = runCLI(t, "key", "--state-root", state, "--signing-key", file, "--json")
	var rep keyReport
	if err != nil || json.Unmarshal([]byte(out), &rep) != nil || rep.KeyID != custody.KeyID(op.Public().(ed25519.PublicKey)) {
		t.Fatalf("--signing-key: %v %q", err, out)
	}
	os.Chmod(file, 0o644)
	if out, err := runCLI(t, "key", "--state-root", state, "--signing-key", file); exitCode(err) != 2 || !strings.Contains(out+cli.Message("agentpen", err), "want 0600") {
		t.Fatalf("a readable key: exit %d %v", exitCode(err), err)
	}
}

// TestKeyMissingRoot: agentpen key given a state root that does not
// exist (a mistyped --state-root) refuses, naming it, and makes nothing:
// a new root's key would verify nothing of the campaigns the operator
// meant; --create makes the root and its key.
func TestKeyMissingRoot(t *testing.T) {
	state := filepath.Join(t.TempDir(), "stat")
	out, err := runCLI(t, "key", "--state-root", state)
	if msg := out + cli.Message("agentpen", err); exitCode(err) != 2 || !strings.Contains(msg, state) || !strings.Contains(msg, "--create") {
		t.Fatalf("a missing state root: exit %d %q", exitCode(err), msg)
	}
	if _, err := os.Lstat(state); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the refused root was made: %v", err)
	}
	out, err = runCLI(t, "key", "--state-root", state, "--create")
	if _, perr := custody.ParsePublicKey([]byte(out)); err != nil || perr != nil {
		t.Fatalf("--create: %v %v %q", err, perr, out)
	}
	again, err := runCLI(t, "key", "--state-root", state)
	if err != nil || again != out {
		t.Fatalf("the made root's key again: %v %q, want %q", err, again, out)
	}
}

// TestChecksDoc: docs/checks.md is agentpen checks --markdown (regenerate
// with go test ./cmd/agentpen -run TestChecksDoc -update), and --json is
// the catalogue.
func TestChecksDoc(t *testing.T) {
	out, err := runCLI(t, "checks", "--markdown")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "..", "docs", "checks.md")
	if *update {
		os.WriteFile(path, []byte(out), 0o644)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != out {
		t.Fatalf("%s is not agentpen checks --markdown (go test ./cmd/agentpen -run TestChecksDoc -update): %v", path, err)
	}
	out, _ = runCLI(t, "checks", "--json")
	var cat []attest.CheckInfo
	if err := json.Unmarshal([]byte(out), &cat); err != nil || len(cat) != len(attest.Catalogue()) {
		t.Fatalf("--json: %v, %d entries", err, len(cat))
	}
}

// TestReportSchemaCommand: agentpen report schema KIND prints the
// report's schema; an unknown kind is a usage error.
func TestReportSchemaCommand(t *testing.T) {
	for _, kind := range custody.SchemaKinds() {
		out, err := runCLI(t, "report", "schema", kind)
		want, _ := custody.Schema(kind)
		if err != nil || out != string(want) || !json.Valid([]byte(out)) {
			t.Fatalf("%s: %v", kind, err)
		}
	}
	if _, err := runCLI(t, "report", "schema", "results"); exitCode(err) != 2 {
		t.Fatalf("unknown kind: %v", err)
	}
	if _, err := runCLI(t, "report"); exitCode(err) != 2 {
		t.Fatalf("no subcommand: %v", err)
	}
}
