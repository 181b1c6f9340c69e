package api

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestLoadKeyConcurrent: services starting at once on a fresh state root
// all get the same key (one of them made it); none fails with "file
// exists" or reads a key half written.
func TestLoadKeyConcurrent(t *testing.T) {
	for round := range 20 {
		path := KeyPath(filepath.Join(t.TempDir(), "state"))
		const n = 8
		keys := make([][]byte, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				keys[i], errs[i] = LoadKey(path)
			})
		}
		close(start)
		wg.Wait()
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("round %d: LoadKey %d: %v", round, i, errs[i])
			}
			if !bytes.Equal(keys[i], keys[0]) {
				t.Fatalf("round %d: LoadKey %d returned another key", round, i)
			}
		}
		st, err := os.Stat(path)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("round %d: the key file: %v %v", round, st, err)
		}
		if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "*.tmp*")); len(left) > 0 {
			t.Fatalf("round %d: temporary files left: %v", round, left)
		}
	}
}

// TestLoadKeyRefused: a key file others may read, or that holds no key,
// is refused with ErrKeyRefused and a message that says how to fix it.
func TestLoadKeyRefused(t *testing.T) {
	dir := t.TempDir()
	loose := filepath.Join(dir, "loose.key")
	os.WriteFile(loose, bytes.Repeat([]byte("ab"), KeyBytes), 0o644)
	short := filepath.Join(dir, "short.key")
	os.WriteFile(short, []byte("abcd\n"), 0o600)
	for _, path := range []string{loose, short} {
		_, err := LoadKey(path)
		if err == nil || !errors.Is(err, ErrKeyRefused) {
			t.Errorf("%s: %v, want ErrKeyRefused", filepath.Base(path), err)
		}
	}
}
