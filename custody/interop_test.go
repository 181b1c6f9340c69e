package custody_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// specVerify is a second DSSE verifier, written from the specification
// (github.com/secure-systems-lab/dsse, protocol.md and envelope.md) with
// the standard library alone; it shares no code with the signer
// (go-securesystemslib's dsse): the signature is ed25519 over
//
//	PAE(type, body) = "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body
//
// with LEN the byte length in ASCII decimal, and the payload is the
// standard base64 of body.
func specVerify(envelope []byte, pub ed25519.PublicKey) (string, []byte, error) {
	var env struct {
		PayloadType string `json:"payloadType"`
		Payload     string `json:"payload"`
		Signatures  []struct {
			KeyID string `json:"keyid"`
			Sig   string `json:"sig"`
		} `json:"signatures"`
	}
	if err := json.Unmarshal(envelope, &env); err != nil {
		return "", nil, err
	}
	body, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		return "", nil, err
	}
	pae := "DSSEv1 " + strconv.Itoa(len(env.PayloadType)) + " " + env.PayloadType + " " + strconv.Itoa(len(body)) + " " + string(body)
	for _, s := range env.Signatures {
		sig, err := base64.StdEncoding.DecodeString(s.Sig)
		if err == nil && ed25519.Verify(pub, []byte(pae), sig) {
			return env.PayloadType, body, nil
		}
	}
	return "", nil, errors.New("no signature verifies")
}

// TestSecondImplementation: every envelope of a campaign verifies with a
// verifier written from the DSSE specification, and its payload is an
// in-toto Statement v1 by the in-toto bindings' own Validate, whose
// subjects include the report with the report file's SHA-256; the same
// verifier refuses a changed envelope.
func TestSecondImplementation(t *testing.T) {
	dir, key := signedCampaign(t, lifecycle{})
	pub := pubOf(key)
	envs, _ := filepath.Glob(filepath.Join(dir, "*.dsse.json"))
	if len(envs) != 3 {
		t.Fatalf("envelopes %v", envs)
	}
	for _, path := range envs {
		env := readFile(t, path)
		typ, body, err := specVerify(env, pub)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if typ != "application/vnd.in-toto+json" {
			t.Errorf("%s: payload type %q", path, typ)
		}
		var st intoto.Statement
		if err := protojson.Unmarshal(body, &st); err != nil {
			t.Fatalf("%s: protojson: %v", path, err)
		}
		if err := st.Validate(); err != nil {
			t.Fatalf("%s: in-toto Validate: %v", path, err)
		}
		report := strings.TrimSuffix(filepath.Base(path), ".dsse.json") + ".json"
		want := sha256Sum(readFile(t, filepath.Join(dir, report)))
		found := false
		for _, s := range st.GetSubject() {
			found = found || (s.GetName() == report && s.GetDigest()["sha256"] == want)
		}
		if !found || !strings.HasPrefix(st.GetPredicateType(), "https://agentpen.dev/predicates/") {
			t.Errorf("%s: report subject %v, predicate type %s", path, found, st.GetPredicateType())
		}

		// Tampered: the same verifier refuses it.
		var m map[string]any
		json.Unmarshal(env, &m)
		m["payload"] = base64.StdEncoding.EncodeToString(append(body, ' '))
		bad, _ := json.Marshal(m)
		if _, _, err := specVerify(bad, pub); err == nil {
			t.Errorf("%s: a changed payload verifies", path)
		}
		other, _, _ := ed25519.GenerateKey(nil)
		if _, _, err := specVerify(env, other); err == nil {
			t.Errorf("%s: verifies with another key", path)
		}
	}
}

// TestEnvelopeFilesPrivate: envelopes are written 0600 beside their
// reports.
func TestEnvelopeFilesPrivate(t *testing.T) {
	dir, _ := signedCampaign(t, lifecycle{})
	for _, n := range []string{"attestation-1-1.dsse.json", "attestation-1-2.dsse.json", "cleanup-1-1.dsse.json"} {
		fi, err := os.Stat(filepath.Join(dir, n))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v", n, fi, err)
		}
	}
}
