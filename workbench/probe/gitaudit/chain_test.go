package gitaudit

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
)

// deepChainPack is a pack of n objects: a blob, then n-1 offset deltas,
// each on the one before it (a chain n deep, as a crafted pack makes
// it), and its index. The names are made up (nothing here checks them).
func deepChainPack(t testing.TB, n int) (*index, []byte) {
	t.Helper()
	zip := func(b []byte) []byte {
		var z bytes.Buffer
		zw := zlib.NewWriter(&z)
		zw.Write(b)
		zw.Close()
		return z.Bytes()
	}
	pk := binary.BigEndian.AppendUint32([]byte("PACK\x00\x00\x00\x02"), uint32(n))
	type entry struct {
		id  ID
		off uint32
	}
	var entries []entry
	var prev int
	for i := range n {
		off := len(pk)
		id := ID(sha1.Sum(fmt.Appendf(nil, "object %d", i)))
		entries = append(entries, entry{id, uint32(off)})
		if i == 0 {
			pk = append(pk, byte(3<<4|1)) // a blob of 1 byte
			pk = append(pk, zip([]byte("x"))...)
		} else {
			delta := []byte{1, 1, 0x91, 0, 1} // base 1 byte, result 1: copy it
			pk = append(pk, byte(6<<4|len(delta)))
			// The base offset, in the pack's variable-length form.
			d := off - prev
			enc := []byte{byte(d & 0x7f)}
			for d >>= 7; d > 0; d >>= 7 {
				d--
				enc = append([]byte{byte(0x80 | d&0x7f)}, enc...)
			}
			pk = append(pk, enc...)
			pk = append(pk, zip(delta)...)
		}
		prev = off
	}
	pk = append(pk, make([]byte, 20)...)
	slices.SortFunc(entries, func(a, b entry) int { return bytes.Compare(a.id[:], b.id[:]) })
	idx := []byte(idxMagic + "\x00\x00\x00\x02")
	for i := range 256 {
		c := 0
		for _, e := range entries {
			if int(e.id[0]) <= i {
				c++
			}
		}
		idx = binary.BigEndian.AppendUint32(idx, uint32(c))
	}
	for _, e := range entries {
		idx = append(idx, e.id[:]...)
	}
	idx = append(idx, make([]byte, 4*n)...) // crcs
	for _, e := range entries {
		idx = binary.BigEndian.AppendUint32(idx, e.off)
	}
	idx = append(idx, make([]byte, 40)...)
	ix, err := parseIndex(idx)
	if err != nil {
		t.Fatal(err)
	}
	return ix, pk
}

// TestDeepOffsetChain: typing every object of a chain of offset deltas
// 3000 deep reads each entry's header about once (it read n²/2 of them,
// and compared each with the chain so far: cubic, 9 s for this pack),
// and every object is a blob, read back whole.
func TestDeepOffsetChain(t *testing.T) {
	const n = 3000
	ix, pk := deepChainPack(t, n)
	s := &store{packs: []*pack{{path: "deep.pack", idx: ix, data: pk}}, cache: newCache(1 << 20)}
	for i := range ix.count() {
		typ, err := s.typeOf(ix.name(i))
		if err != nil || typ != TypeBlob {
			t.Fatalf("typeOf %s: %v %v, want a blob", ix.name(i), typ, err)
		}
	}
	if s.headers > 2*n {
		t.Errorf("typing %d objects read %d entry headers, want at most %d", n, s.headers, 2*n)
	}
	for _, i := range []int{0, n / 2, n - 1} {
		typ, data, err := s.read(ix.name(i))
		if err != nil || typ != TypeBlob || string(data) != "x" {
			t.Fatalf("read %s: %v %q %v, want the blob x", ix.name(i), typ, data, err)
		}
	}
}
