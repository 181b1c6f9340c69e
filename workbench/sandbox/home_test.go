package sandbox

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

// TestRemoveStaleHomes (the uid-only sandbox): a home whose workspace
// belongs to the uid being claimed was left by a holder that crashed; it goes, even when the agent
// locked its files away, and nothing else under the base does.
func TestRemoveStaleHomes(t *testing.T) {
	testenv.RequireRoot(t)
	pool := testPool()
	uid, err := pool.Claim()
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Release(uid)
	other := uid + 1
	if r := pool.Range(); !r.Contains(other) {
		other = r.Base
	}
	base := t.TempDir()
	// The uid must pass through the parents, as checkSearchable requires of
	// the real home directory.
	os.Chmod(filepath.Dir(base), 0o711)
	os.Chmod(base, 0o711)
	mkHome := func(name string, owner int) string {
		home := filepath.Join(base, name)
		ws := filepath.Join(home, "ws")
		if err := os.MkdirAll(filepath.Join(ws, "locked", "deep"), 0o700); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(ws, "locked", "deep", "f"), []byte("x"), 0o600)
		// Deepest first: root may lack DAC_OVERRIDE (a workspace container)
		// and could not pass through a directory already given away.
		for _, p := range []string{filepath.Join(ws, "locked", "deep", "f"), filepath.Join(ws, "locked", "deep"), filepath.Join(ws, "locked"), ws} {
			if err := os.Lchown(p, owner, owner); err != nil {
				t.Fatal(err)
			}
		}
		// The agent took its own permissions away (as the uid: root may
		// lack FOWNER).
		AsUID(owner, func() error { return os.Chmod(filepath.Join(ws, "locked"), 0o000) })
		os.Chmod(home, 0o711)
		return home
	}
	stale := mkHome("wb-111", uid)
	kept := mkHome("wb-222", other)
	notHome := filepath.Join(base, "not-a-home")
	os.Mkdir(notHome, 0o700)
	t.Cleanup(func() {
		ws := filepath.Join(kept, "ws")
		AsUID(other, func() error { return EmptyDir(ws) })
		os.Remove(ws)
	})

	if err := removeStaleHomes(base, uid); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(stale); !os.IsNotExist(err) {
		t.Fatalf("stale home of uid %d left: %v", uid, err)
	}
	for _, p := range []string{kept, notHome} {
		if _, err := os.Lstat(p); err != nil {
			t.Fatalf("%s removed: %v", p, err)
		}
	}
	if err := removeStaleHomes(filepath.Join(base, "missing"), uid); err != nil {
		t.Fatalf("missing base: %v", err)
	}
}
