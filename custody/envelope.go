package custody

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
)

// ErrSignature is the kind of error (wrapped) for an envelope that the key
// did not sign: another key's, or one whose payload, payload type or
// signature was changed.
var ErrSignature = errors.New("not signed by the key")

// ErrEnvelope is the kind of error (wrapped) for a file that is not a DSSE
// envelope of an in-toto statement.
var ErrEnvelope = errors.New("not a DSSE envelope of an in-toto statement")

// Sign signs st with key in a DSSE envelope (payload type PayloadType)
// and returns the envelope's JSON, indented, with a newline.
func Sign[P any](ctx context.Context, key ed25519.PrivateKey, st Statement[P]) ([]byte, error) {
	payload, err := st.Marshal()
	if err != nil {
		return nil, err
	}
	pub := key.Public().(ed25519.PublicKey)
	es, err := dsse.NewEnvelopeSigner(signer{key: key, id: KeyID(pub)})
	if err != nil {
		return nil, err
	}
	env, err := es.SignPayload(ctx, PayloadType, payload)
	if err != nil {
		return nil, fmt.Errorf("sign the statement: %w", err)
	}
	b, err := json.MarshalIndent(env, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Open checks that envelope is a DSSE envelope of an in-toto statement
// that pub signed, and returns the statement's JSON (its payload). An
// envelope pub did not sign is an ErrSignature naming the key that did
// (by its key id) when it says; one that is not an envelope is an
// ErrEnvelope.
func Open(ctx context.Context, envelope []byte, pub ed25519.PublicKey) ([]byte, error) {
	var env dsse.Envelope
	dec := json.NewDecoder(bytes.NewReader(envelope))
	if err := dec.Decode(&env); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrEnvelope, err)
	}
	if env.PayloadType != PayloadType {
		return nil, fmt.Errorf("%w: payload type %q, not %q", ErrEnvelope, env.PayloadType, PayloadType)
	}
	if len(env.Signatures) == 0 {
		return nil, fmt.Errorf("%w: no signature", ErrSignature)
	}
	id := KeyID(pub)
	ev, err := dsse.NewEnvelopeVerifier(verifier{pub: pub, id: id})
	if err != nil {
		return nil, err
	}
	_, payload, err := ev.VerifyAndDecode(ctx, &env)
	if err == nil {
		return payload, nil
	}
	var others []string
	for _, s := range env.Signatures {
		if s.KeyID != "" && s.KeyID != id {
			others = append(others, s.KeyID)
		}
	}
	if len(others) == len(env.Signatures) {
		return nil, fmt.Errorf("%w: signed by key %s, not by %s", ErrSignature, strings.Join(slices.Compact(others), ", "), id)
	}
	return nil, fmt.Errorf("%w: the signature does not verify with key %s (the payload, its type or the signature was changed)", ErrSignature, id)
}
