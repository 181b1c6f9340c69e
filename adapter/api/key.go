package api

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// KeyBytes is the size of the server key capabilities are derived from.
const KeyBytes = 32

// KeyFile is the server key's name under the state root's api directory.
const KeyFile = "server.key"

// KeyPath is where agentpen serve keeps its server key in a state root.
func KeyPath(stateRoot string) string { return filepath.Join(stateRoot, "api", KeyFile) }

// ErrKeyRefused is returned (wrapped) by LoadKey for a key file it will
// not use: others may read or write it, another user owns it, or it does
// not hold a key. The message names the file and the fix.
var ErrKeyRefused = errors.New("server key refused")

// keyError is a refusal of a key file: its message, of kind ErrKeyRefused.
type keyError struct{ msg string }

func (e keyError) Error() string { return e.msg }
func (e keyError) Unwrap() error { return ErrKeyRefused }

// LoadKey reads the server key at path, or makes one (KeyBytes from the
// system's random source, hex, mode 0600 in a 0700 directory) when there
// is none. A key file that others may read or write, that another user
// owns, or that does not hold exactly KeyBytes is refused (ErrKeyRefused):
// the key derives every workspace capability. Processes that make the key
// at once all get the one that was made first: it is written to a
// temporary file and linked into place, never seen half written.
func LoadKey(path string) ([]byte, error) {
	key, err := readKey(path)
	if errors.Is(err, os.ErrNotExist) {
		return makeKey(path)
	}
	return key, err
}

func readKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("server key: %w", err)
	}
	if err := checkPrivate(path); err != nil {
		return nil, err
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(key) != KeyBytes {
		return nil, keyError{fmt.Sprintf("server key %s: want %d bytes in hex (remove the file to make a new key: every base_url changes)", path, KeyBytes)}
	}
	return key, nil
}

func makeKey(path string) ([]byte, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("server key: %w", err)
	}
	key := make([]byte, KeyBytes)
	rand.Read(key)
	f, err := os.CreateTemp(dir, KeyFile+".tmp*") // mode 0600
	if err != nil {
		return nil, fmt.Errorf("server key: %w", err)
	}
	defer os.Remove(f.Name())
	_, werr := f.WriteString(hex.EncodeToString(key) + "\n")
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return nil, fmt.Errorf("server key %s: %w", path, err)
	}
	// link(2) never replaces: the first process to link wins, and every
	// other reads what it linked, whole.
	if err := os.Link(f.Name(), path); errors.Is(err, os.ErrExist) {
		return readKey(path)
	} else if err != nil {
		return nil, fmt.Errorf("server key %s: %w", path, err)
	}
	return key, nil
}

// checkPrivate refuses a secret file that is not this user's alone.
func checkPrivate(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return keyError{fmt.Sprintf("%s: mode %#o lets others read or write it; want 0600 (chmod 600 %s)", path, st.Mode().Perm(), path)}
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Geteuid() {
		return keyError{fmt.Sprintf("%s: owned by uid %d, not by this process's (%d)", path, sys.Uid, os.Geteuid())}
	}
	return nil
}

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

// tokenEqual compares a presented bearer token with the expected one in
// constant time (digests first, so the length does not leak either).
func tokenEqual(got string, want []byte) bool {
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256(want)
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}
