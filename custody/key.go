package custody

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
)

// ErrKey is the kind of error (wrapped) for a key that cannot be read:
// not PEM, not ed25519, or not the kind of key wanted.
var ErrKey = errors.New("unusable key")

// KeyID is the DSSE key id of pub: its OpenSSH SHA-256 fingerprint
// ("SHA256:..."), the id go-securesystemslib's verifiers (and cosign's)
// compute for a key given without one.
func KeyID(pub ed25519.PublicKey) string {
	id, err := dsse.SHA256KeyID(pub)
	if err != nil {
		return ""
	}
	return id
}

// MarshalPublicKey is pub as PEM: a "PUBLIC KEY" block holding its
// SubjectPublicKeyInfo (what openssl and cosign read).
func MarshalPublicKey(pub ed25519.PublicKey) []byte {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		panic("custody: an ed25519 key does not marshal: " + err.Error())
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// ParsePublicKey reads an ed25519 public key from PEM: a "PUBLIC KEY"
// block (SubjectPublicKeyInfo).
func ParsePublicKey(b []byte) (ed25519.PublicKey, error) {
	blk, rest := pem.Decode(b)
	if blk == nil {
		return nil, fmt.Errorf("%w: no PEM block (want a PUBLIC KEY, as agentpen key prints)", ErrKey)
	}
	if blk.Type != "PUBLIC KEY" {
		return nil, fmt.Errorf("%w: a PEM %q block, not a PUBLIC KEY", ErrKey, blk.Type)
	}
	if len(pemTrim(rest)) != 0 {
		return nil, fmt.Errorf("%w: more than one PEM block", ErrKey)
	}
	k, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKey, err)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("%w: a %T, not an ed25519 key", ErrKey, k)
	}
	return pub, nil
}

// ParsePrivateKey reads an ed25519 private key from PEM: an unencrypted
// "PRIVATE KEY" block (PKCS #8), as openssl genpkey -algorithm ed25519
// writes it.
func ParsePrivateKey(b []byte) (ed25519.PrivateKey, error) {
	blk, rest := pem.Decode(b)
	if blk == nil {
		return nil, fmt.Errorf("%w: no PEM block (want an unencrypted PKCS #8 PRIVATE KEY: openssl genpkey -algorithm ed25519)", ErrKey)
	}
	if blk.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("%w: a PEM %q block, not an unencrypted PKCS #8 PRIVATE KEY", ErrKey, blk.Type)
	}
	if len(pemTrim(rest)) != 0 {
		return nil, fmt.Errorf("%w: more than one PEM block", ErrKey)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKey, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%w: a %T, not an ed25519 key", ErrKey, k)
	}
	return priv, nil
}

func pemTrim(b []byte) []byte {
	for len(b) > 0 && (b[0] == '\n' || b[0] == '\r' || b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	return b
}

// signer signs DSSE envelopes with an ed25519 key (dsse.Signer).
type signer struct {
	key ed25519.PrivateKey
	id  string
}

func (s signer) Sign(_ context.Context, data []byte) ([]byte, error) {
	return ed25519.Sign(s.key, data), nil
}

func (s signer) KeyID() (string, error) { return s.id, nil }

// verifier checks DSSE signatures with an ed25519 public key
// (dsse.Verifier).
type verifier struct {
	pub ed25519.PublicKey
	id  string
}

var errBadSignature = errors.New("the ed25519 signature does not verify")

func (v verifier) Verify(_ context.Context, data, sig []byte) error {
	if !ed25519.Verify(v.pub, data, sig) {
		return errBadSignature
	}
	return nil
}

func (v verifier) KeyID() (string, error)   { return v.id, nil }
func (v verifier) Public() crypto.PublicKey { return v.pub }
