package episode

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentpen/agentpen/workbench/sandbox"
)

// TestRemoveStaleHomes: a home whose workspace belongs to the uid being
// claimed was left by a holder that crashed; it goes, even when the agent
// locked its files away, and nothing else under the base does.
func TestRemoveStaleHomes(t *testing.T) {
	requireRoot(t)
	pool := sandbox.PoolFor("")
	uid, err := pool.Claim()
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Release(uid)
	other := uid + 1
	if other >= sandbox.UIDBase+sandbox.UIDSlots {
		other = sandbox.UIDBase
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
		for _, p := range []string{ws, filepath.Join(ws, "locked"), filepath.Join(ws, "locked", "deep"), filepath.Join(ws, "locked", "deep", "f")} {
			if err := os.Lchown(p, owner, owner); err != nil {
				t.Fatal(err)
			}
		}
		os.Chmod(filepath.Join(ws, "locked"), 0o000) // the agent took its own permissions away
		os.Chmod(home, 0o711)
		return home
	}
	stale := mkHome("wb-111", uid)
	kept := mkHome("wb-222", other)
	notHome := filepath.Join(base, "not-a-home")
	os.Mkdir(notHome, 0o700)
	t.Cleanup(func() { os.Chmod(filepath.Join(kept, "ws", "locked"), 0o700) })

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
