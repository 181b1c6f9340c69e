package store

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/agentpen/agentpen/campaign"
)

// ErrSecret is the kind of error (wrapped) for a secret file agentpen
// refuses: another user's, readable by others, or not a secret of the
// size wanted.
var ErrSecret = errors.New("unusable secret")

// Secret returns the root's secret name (n random bytes), made at first
// use: <root>/keys/<name>, hex and a newline, 0600, this user's. Two
// processes that make it at once agree on one (the file is linked into
// place, never replaced). A file that is not this user's alone, or not n
// bytes of hex, is refused: removing it makes a new one (and everything
// derived from the old one changes).
func (r *Root) Secret(name string, n int) ([]byte, error) {
	if r.dir == nil {
		return nil, rootError(r.path, errors.New("opened for reading only"))
	}
	d, err := r.dir.MkdirAll("keys", 0o700)
	if err != nil {
		return nil, rootError(r.path, err)
	}
	defer d.Close()
	if fi, err := d.Stat(); err != nil || campaign.CheckPrivate("key directory", d.Path(), fi, true) != nil {
		return nil, fmt.Errorf("%w: %s must be this user's and writable by no other", ErrSecret, d.Path())
	}
	key, err := r.readSecret(name, n)
	if !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	key = make([]byte, n)
	rand.Read(key)
	tmp := fmt.Sprintf("keys/.%s.%s.tmp", name, hex.EncodeToString(key[:4]))
	if err := r.dir.WriteNew(tmp, []byte(hex.EncodeToString(key)+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("secret %s: %w", name, err)
	}
	defer r.dir.Remove(tmp)
	if err := r.dir.Link(tmp, "keys/"+name); errors.Is(err, fs.ErrExist) {
		return r.readSecret(name, n) // another process made it first
	} else if err != nil {
		return nil, fmt.Errorf("secret %s: %w", name, err)
	}
	return key, nil
}

func (r *Root) readSecret(name string, n int) ([]byte, error) {
	path := "keys/" + name
	f, err := r.dir.Open(path)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	f.Close()
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o077 != 0 || campaign.CheckPrivate("secret", r.dir.Join(path), fi, false) != nil {
		return nil, fmt.Errorf("%w: %s must be this user's with mode 0600 (mode %04o)", ErrSecret, r.dir.Join(path), fi.Mode().Perm())
	}
	b, err := r.dir.ReadFile(path, int64(2*n+2))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSecret, err)
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(key) != n {
		return nil, fmt.Errorf("%w: %s: want %d bytes in hex (remove the file to make a new one: everything derived from it changes)", ErrSecret, r.dir.Join(path), n)
	}
	return key, nil
}

// KeyPath is the path of the root's secret name, for messages.
func (r *Root) KeyPath(name string) string { return r.path + "/keys/" + name }

// AgentKeyName is the secret the root's agent ids are keyed with
// (campaign.OpaqueAgentID): nothing an agent can read then reveals its
// task.
const AgentKeyName = "agent-id.key"

// AgentKey is the root's agent-id secret (made at first use).
func (r *Root) AgentKey() ([]byte, error) { return r.Secret(AgentKeyName, 32) }

// PlanOptions are the options every plan of this root's campaigns is
// computed with: its agent ids keyed under the root's secret.
func (r *Root) PlanOptions() (campaign.PlanOptions, error) {
	key, err := r.AgentKey()
	if err != nil {
		return campaign.PlanOptions{}, err
	}
	return campaign.PlanOptions{AgentKey: key}, nil
}
