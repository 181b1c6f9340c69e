package custody_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"testing"

	"github.com/agentpen/agentpen/custody"
)

// TestKeysPEM: public keys round-trip as SPKI PEM, private keys are read
// from PKCS #8 PEM, and anything else is an ErrKey saying what it is.
func TestKeysPEM(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	b := custody.MarshalPublicKey(pub)
	if !bytes.HasPrefix(b, []byte("-----BEGIN PUBLIC KEY-----\n")) {
		t.Fatalf("not SPKI PEM:\n%s", b)
	}
	got, err := custody.ParsePublicKey(b)
	if err != nil || !got.Equal(pub) {
		t.Fatalf("round trip: %v", err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(priv)
	p8 := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	if k, err := custody.ParsePrivateKey(p8); err != nil || !k.Equal(priv) {
		t.Fatalf("PKCS #8: %v", err)
	}
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecPub, _ := x509.MarshalPKIXPublicKey(&ec.PublicKey)
	ecPriv, _ := x509.MarshalPKCS8PrivateKey(ec)
	for _, tt := range []struct {
		name string
		in   []byte
		priv bool
	}{
		{"empty", nil, false},
		{"not_pem", []byte("hello"), false},
		{"private_as_public", p8, false},
		{"public_as_private", b, true},
		{"ecdsa_public", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: ecPub}), false},
		{"ecdsa_private", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecPriv}), true},
		{"two_blocks", append(b, b...), false},
		{"garbage_der", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte{1, 2, 3}}), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if tt.priv {
				_, err = custody.ParsePrivateKey(tt.in)
			} else {
				_, err = custody.ParsePublicKey(tt.in)
			}
			if !errors.Is(err, custody.ErrKey) {
				t.Fatalf("err %v, want ErrKey", err)
			}
		})
	}
}

// FuzzOpen: Open never panics, and accepts only an envelope the key
// signed: whatever it returns verifies with the specification's verifier.
func FuzzOpen(f *testing.F) {
	seed := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32))
	pub := seed.Public().(ed25519.PublicKey)
	env, err := custody.Sign(context.Background(), seed, custody.NewStatement(custody.PredicateCleanup, json.RawMessage(`{"ok":true}`),
		custody.FileSubject("cleanup-1-1.json", []byte("x"))))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(env)
	f.Add(bytes.Replace(env, []byte(`"payloadType": "application/vnd.in-toto+json"`), []byte(`"payloadType": "application/json"`), 1))
	f.Add([]byte(`{"payloadType":"application/vnd.in-toto+json","payload":"e30=","signatures":[{"keyid":"","sig":"AAAA"}]}`))
	f.Add([]byte(`{"payloadType":"application/vnd.in-toto+json","payload":"e30=","signatures":[]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		payload, err := custody.Open(context.Background(), b, pub)
		if err != nil {
			return
		}
		_, body, verr := specVerify(b, pub)
		if verr != nil || !bytes.Equal(body, payload) {
			t.Fatalf("Open accepted %q (payload %q) that the specification's verifier refuses: %v", b, payload, verr)
		}
	})
}
