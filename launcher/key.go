package launcher

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
)

// KeyBytes is the size of the server key capabilities are derived from.
const KeyBytes = 32

// KeyFile is the server key's name among the state root's secrets
// (store.Root.Secret): KeyBytes random bytes, made at the first serve.
const KeyFile = "server.key"

// capability derives the credential of one workspace of one bring-up:
// HMAC-SHA256 under the server key of the campaign id, the generation's
// instance nonce and the agent id, in unpadded base64url (43 characters,
// 256 bits). It is never stored: a restarted service derives the same
// one, and a new generation of the same campaign id gets new ones.
func capability(key []byte, campaignID, instance, agentID string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("agentpen-episode-capability\x00" + campaignID + "\x00" + instance + "\x00" + agentID))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// capKey is how the proxy's table holds a capability: its SHA-256, so a
// lookup compares digests, never the secret, and the table holds no
// credential in clear.
func capKey(c string) [sha256.Size]byte { return sha256.Sum256([]byte(c)) }
