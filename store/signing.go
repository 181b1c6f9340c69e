package store

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
)

// SigningKeyName is the secret the root's reports are signed with: the
// seed of an ed25519 key (RFC 8032), <root>/keys/signing.key, 0600.
const SigningKeyName = "signing.key"

// ErrNoSigningKey is returned (wrapped) by PublicKey for a root that has
// no signing key yet: nothing in it was signed with one.
var ErrNoSigningKey = errors.New("the state root has no signing key")

// SigningKey is the root's report-signing key, made at first use (Secret:
// this user's, mode 0600, never replaced). Removing it makes a new one at
// the next use; what the old one signed then verifies only with the old
// public key (agentpen key prints the public key).
func (r *Root) SigningKey() (ed25519.PrivateKey, error) {
	seed, err := r.Secret(SigningKeyName, ed25519.SeedSize)
	if err != nil {
		return nil, err
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// PublicKey is the public half of the root's signing key, without making
// one (ErrNoSigningKey when there is none): for verifying.
func (r *Root) PublicKey() (ed25519.PublicKey, error) {
	if r.dir == nil {
		return nil, fmt.Errorf("%w (%s does not exist)", ErrNoSigningKey, r.path)
	}
	seed, err := r.readSecret(SigningKeyName, ed25519.SeedSize)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w (%s)", ErrNoSigningKey, r.KeyPath(SigningKeyName))
	}
	if err != nil {
		return nil, err
	}
	return ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey), nil
}

// SigningKey is the signing key of the campaign's root (Root.SigningKey).
func (c *Campaign) SigningKey() (ed25519.PrivateKey, error) { return c.root.SigningKey() }
