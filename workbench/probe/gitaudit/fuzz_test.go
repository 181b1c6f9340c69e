package gitaudit

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// The seed corpus is a real repository's files (testdata/seed.*: a pack of
// four commits, their trees and blobs with deltas, an annotated tag; one
// commit, tree and tag object; a reflog; packed-refs), written by git
// 2.39; `go test -fuzz` adds what it finds under testdata/fuzz.

func seed(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "seed."+name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzPack: any index and pack are read without a panic, a hang or an
// allocation their sizes only claim; every object the seed pack names
// reads back.
func FuzzPack(f *testing.F) {
	idx, pk := seed(f, "idx"), seed(f, "pack")
	f.Add(idx, pk)
	f.Add(idx[:len(idx)/2], pk)
	f.Add(idx, pk[:len(pk)/2])
	f.Fuzz(func(t *testing.T, idx, pk []byte) {
		ix, err := parseIndex(idx)
		if err != nil || len(pk) < 12 {
			return
		}
		p := &pack{path: "fuzz.pack", idx: ix, data: pk}
		s := &store{packs: []*pack{p}, cache: newCache(1 << 20)}
		for i := range min(ix.count(), 64) {
			id := ix.name(i)
			s.typeOf(id)
			s.read(id)
		}
	})
}

// TestSeedPack: the seed pack reads whole: every object, deltas resolved,
// as git wrote them.
func TestSeedPack(t *testing.T) {
	ix, err := parseIndex(seed(t, "idx"))
	if err != nil {
		t.Fatal(err)
	}
	s := &store{packs: []*pack{{path: "seed.pack", idx: ix, data: seed(t, "pack")}}, cache: newCache(1 << 20)}
	types := map[Type]int{}
	for i := range ix.count() {
		typ, data, err := s.read(ix.name(i))
		if err != nil {
			t.Fatalf("object %s: %v", ix.name(i), err)
		}
		types[typ]++
		if got, _ := s.typeOf(ix.name(i)); got != typ {
			t.Fatalf("object %s: typeOf %s, read %s", ix.name(i), got, typ)
		}
		if typ == TypeCommit {
			if _, err := ParseCommit(data); err != nil {
				t.Fatal(err)
			}
		}
	}
	if types[TypeCommit] != 4 || types[TypeTag] != 1 || types[TypeTree] != 4 || types[TypeBlob] != 4 {
		t.Fatalf("objects by type %v", types)
	}
}

// FuzzObjects: commit, tag and tree parsers never panic and never read
// past their input.
func FuzzObjects(f *testing.F) {
	for _, n := range []string{"commit", "tag", "tree"} {
		f.Add(seed(f, n))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ParseCommit(b)
		ParseTag(b)
		n := 0
		EachTreeEntry(b, func(e TreeEntry) error {
			if len(e.Name) == 0 || !bytes.Contains(b, e.Name) {
				t.Fatalf("entry name %q is not of the tree", e.Name)
			}
			n++
			return nil
		})
		if n > len(b)/22 {
			t.Fatalf("%d entries in %d bytes", n, len(b))
		}
	})
}

// FuzzDelta: applying any delta to any base never panics and makes
// exactly the size the delta names, or fails.
func FuzzDelta(f *testing.F) {
	f.Add([]byte("hello, world\n"), []byte{13, 6, 0x91, 0, 5, 1, '!'})
	f.Add([]byte{}, []byte{0, 0})
	f.Fuzz(func(t *testing.T, base, delta []byte) {
		out, err := applyDelta(base, delta)
		if err != nil {
			return
		}
		_, rest, _ := deltaSize(delta)
		want, _, _ := deltaSize(rest)
		if int64(len(out)) != want {
			t.Fatalf("made %d bytes, the delta says %d", len(out), want)
		}
	})
}

// FuzzRefFiles: ref, packed-refs and reflog files never panic; what they
// yield names 40-hex objects only.
func FuzzRefFiles(f *testing.F) {
	for _, n := range []string{"reflog", "packed-refs"} {
		f.Add(seed(f, n))
	}
	f.Add([]byte("ref: refs/heads/main\n"))
	f.Add([]byte("490e108015cdf7ec559aa8c74c1a51547ea3d58d\t\tbranch 'main' of /up\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		parseRefValue(b)
		parsePackedRefs(b)
		es, err := parseReflog("logs/HEAD", b)
		if err == nil && len(es) > bytes.Count(b, []byte{'\n'})+1 {
			t.Fatalf("%d entries from %d lines", len(es), bytes.Count(b, []byte{'\n'})+1)
		}
		for _, r := range linesWithIDs("FETCH_HEAD", b) {
			if !bytes.Contains(bytes.ToLower(b), []byte(r.ID.String())) {
				t.Fatalf("%s is not in the file", r.ID)
			}
		}
	})
}

// selfDeltaPack is a pack of one object whose reference delta names
// itself as its base, and its index: a loop, not an object.
func selfDeltaPack(t testing.TB) (*index, []byte) {
	t.Helper()
	var id ID
	copy(id[:], bytes.Repeat([]byte{0x42}, 20))
	// The delta: base of 1 byte, result of 2, copy the base twice: were
	// the loop followed, every hop would double what it makes.
	delta := []byte{1, 2, 0x91, 0, 1, 0x91, 0, 1}
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write(delta)
	zw.Close()
	pk := []byte("PACK\x00\x00\x00\x02\x00\x00\x00\x01")
	pk = append(pk, byte(7<<4|len(delta)))
	pk = append(pk, id[:]...)
	pk = append(pk, z.Bytes()...)
	pk = append(pk, make([]byte, 20)...)
	idx := []byte(idxMagic + "\x00\x00\x00\x02")
	for i := range 256 {
		n := uint32(0)
		if i >= 0x42 {
			n = 1
		}
		idx = binary.BigEndian.AppendUint32(idx, n)
	}
	idx = append(idx, id[:]...)
	idx = append(idx, 0, 0, 0, 0)                // crc
	idx = binary.BigEndian.AppendUint32(idx, 12) // offset
	idx = append(idx, make([]byte, 40)...)       // checksums
	ix, err := parseIndex(idx)
	if err != nil {
		t.Fatal(err)
	}
	return ix, pk
}

// TestDeltaLoop: a reference delta whose chain comes back to itself is
// corrupt, found at once, by read and by typeOf.
func TestDeltaLoop(t *testing.T) {
	ix, pk := selfDeltaPack(t)
	s := &store{packs: []*pack{{path: "loop.pack", idx: ix, data: pk}}, cache: newCache(1 << 20)}
	id := ix.name(0)
	if _, _, err := s.read(id); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read: %v, want ErrCorrupt", err)
	}
	if _, err := s.typeOf(id); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("typeOf: %v, want ErrCorrupt", err)
	}
}
