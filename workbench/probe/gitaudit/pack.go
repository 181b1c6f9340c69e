package gitaudit

import (
	"bytes"
	"encoding/binary"
	"sort"
)

// index is a pack's .idx (versions 1 and 2): the names of the objects
// the pack holds, sorted, and each one's offset in the pack.
type index struct {
	fanout [256]uint32
	names  []byte // n × 20 bytes, sorted
	// v2: offsets are n × 4 bytes, a set high bit indexing large (8 bytes
	// each); v1: entries are n × 24 bytes (offset, then name).
	v1      []byte
	offsets []byte
	large   []byte
}

const idxMagic = "\xfftOc"

// parseIndex reads an .idx file, checking every length and table against
// the file's size (the checksums at its end are not verified: a forged
// index is the image author's, whom the audit does not doubt, only
// reads).
func parseIndex(b []byte) (*index, error) {
	ix := &index{}
	body := b
	v2 := len(b) >= 8 && string(b[:4]) == idxMagic
	if v2 {
		if v := binary.BigEndian.Uint32(b[4:8]); v != 2 {
			return nil, corrupt("pack index version %d", v)
		}
		body = b[8:]
	}
	if len(body) < 256*4 {
		return nil, corrupt("pack index: short fan-out table")
	}
	for i := range ix.fanout {
		ix.fanout[i] = binary.BigEndian.Uint32(body[4*i:])
		if i > 0 && ix.fanout[i] < ix.fanout[i-1] {
			return nil, corrupt("pack index: fan-out table not sorted")
		}
	}
	n := int(ix.fanout[255])
	body = body[256*4:]
	const trailer = 2 * 20
	if !v2 {
		if n > (len(body)-trailer)/24 || len(body) < trailer {
			return nil, corrupt("pack index v1: %d objects in %d bytes", n, len(body))
		}
		ix.v1 = body[:n*24]
		return ix, nil
	}
	if n > len(body)/(20+4+4) {
		return nil, corrupt("pack index: %d objects in %d bytes", n, len(body))
	}
	ix.names = body[:n*20]
	body = body[n*20+n*4:] // past the names and their CRCs
	ix.offsets = body[:n*4]
	body = body[n*4:]
	if len(body) < trailer || (len(body)-trailer)%8 != 0 {
		return nil, corrupt("pack index: %d bytes of large offsets and trailer", len(body))
	}
	ix.large = body[:len(body)-trailer]
	return ix, nil
}

// count is how many objects the index names.
func (ix *index) count() int { return int(ix.fanout[255]) }

// name is the i-th object name, in sorted order.
func (ix *index) name(i int) (id ID) {
	if ix.v1 != nil {
		copy(id[:], ix.v1[i*24+4:])
	} else {
		copy(id[:], ix.names[i*20:])
	}
	return id
}

// offset is the i-th object's offset in the pack.
func (ix *index) offset(i int) (int64, error) {
	if ix.v1 != nil {
		return int64(binary.BigEndian.Uint32(ix.v1[i*24:])), nil
	}
	o := binary.BigEndian.Uint32(ix.offsets[i*4:])
	if o&0x80000000 == 0 {
		return int64(o), nil
	}
	j := int(o &^ 0x80000000)
	if j >= len(ix.large)/8 {
		return 0, corrupt("pack index: large offset %d of %d", j, len(ix.large)/8)
	}
	return int64(binary.BigEndian.Uint64(ix.large[j*8:]) & (1<<63 - 1)), nil
}

// find is the offset of id in the pack, or false.
func (ix *index) find(id ID) (int64, bool, error) {
	lo := 0
	if id[0] > 0 {
		lo = int(ix.fanout[id[0]-1])
	}
	hi := int(ix.fanout[id[0]])
	i := lo + sort.Search(hi-lo, func(k int) bool {
		n := ix.name(lo + k)
		return bytes.Compare(n[:], id[:]) >= 0
	})
	if i >= hi || ix.name(i) != id {
		return 0, false, nil
	}
	off, err := ix.offset(i)
	return off, err == nil, err
}

// entryHeader is a pack entry's header: its type, the size of what it
// inflates to, where its data starts and, for a delta, its base.
type entryHeader struct {
	typ     Type
	size    int64
	data    int64 // the offset of the zlib stream
	baseOff int64 // typeOfsDelta: the base entry's offset
	baseID  ID    // typeRefDelta: the base object's name
}

// maxObject bounds what one object may inflate to (a header's size): a
// larger one is refused rather than allocated.
const maxObject = 1 << 30

// parseEntryHeader reads the header of the entry at off in pack.
func parseEntryHeader(pack []byte, off int64) (entryHeader, error) {
	h := entryHeader{}
	if off < 12 || off >= int64(len(pack)) {
		return h, corrupt("pack entry offset %d outside the pack (%d bytes)", off, len(pack))
	}
	p := off
	c := pack[p]
	p++
	h.typ = Type((c >> 4) & 7)
	h.size = int64(c & 15)
	for shift := uint(4); c&0x80 != 0; shift += 7 {
		if p >= int64(len(pack)) || shift > 56 {
			return h, corrupt("pack entry at %d: size runs past the pack", off)
		}
		c = pack[p]
		p++
		h.size |= int64(c&0x7f) << shift
	}
	if h.size < 0 || h.size > maxObject {
		return h, corrupt("pack entry at %d: size %d", off, h.size)
	}
	switch h.typ {
	case TypeCommit, TypeTree, TypeBlob, TypeTag:
	case typeOfsDelta:
		if p >= int64(len(pack)) {
			return h, corrupt("pack entry at %d: no base offset", off)
		}
		c = pack[p]
		p++
		n := int64(c & 0x7f)
		for c&0x80 != 0 {
			if p >= int64(len(pack)) || n > 1<<48 {
				return h, corrupt("pack entry at %d: base offset runs past the pack", off)
			}
			c = pack[p]
			p++
			n = ((n + 1) << 7) | int64(c&0x7f)
		}
		if n <= 0 || n > off {
			return h, corrupt("pack entry at %d: base offset %d", off, n)
		}
		h.baseOff = off - n
	case typeRefDelta:
		if p+20 > int64(len(pack)) {
			return h, corrupt("pack entry at %d: no base name", off)
		}
		copy(h.baseID[:], pack[p:p+20])
		p += 20
	default:
		return h, corrupt("pack entry at %d: type %d", off, h.typ)
	}
	h.data = p
	return h, nil
}

// applyDelta builds an object from base and a delta: the base's size and
// the result's, then copy and insert instructions.
func applyDelta(base, delta []byte) ([]byte, error) {
	srcSize, delta, err := deltaSize(delta)
	if err != nil {
		return nil, err
	}
	if srcSize != int64(len(base)) {
		return nil, corrupt("delta: base of %d bytes, %d expected", len(base), srcSize)
	}
	dstSize, delta, err := deltaSize(delta)
	if err != nil {
		return nil, err
	}
	if dstSize > maxObject {
		return nil, corrupt("delta: result of %d bytes", dstSize)
	}
	// The result's size is a claim of the delta: what is allocated ahead
	// is bounded by what the delta can make.
	out := make([]byte, 0, min(dstSize, int64(len(base))+int64(len(delta))))
	for len(delta) > 0 {
		op := delta[0]
		delta = delta[1:]
		switch {
		case op&0x80 != 0:
			var off, n int64
			for i := range 4 {
				if op&(1<<i) != 0 {
					if len(delta) == 0 {
						return nil, corrupt("delta: short copy")
					}
					off |= int64(delta[0]) << (8 * i)
					delta = delta[1:]
				}
			}
			for i := range 3 {
				if op&(0x10<<i) != 0 {
					if len(delta) == 0 {
						return nil, corrupt("delta: short copy")
					}
					n |= int64(delta[0]) << (8 * i)
					delta = delta[1:]
				}
			}
			if n == 0 {
				n = 0x10000
			}
			if off+n > int64(len(base)) || int64(len(out))+n > dstSize {
				return nil, corrupt("delta: copy of %d bytes at %d out of range", n, off)
			}
			out = append(out, base[off:off+n]...)
		case op != 0:
			n := int(op)
			if n > len(delta) || int64(len(out)+n) > dstSize {
				return nil, corrupt("delta: insert of %d bytes out of range", n)
			}
			out = append(out, delta[:n]...)
			delta = delta[n:]
		default:
			return nil, corrupt("delta: opcode 0")
		}
	}
	if int64(len(out)) != dstSize {
		return nil, corrupt("delta: made %d bytes, %d expected", len(out), dstSize)
	}
	return out, nil
}

func deltaSize(b []byte) (int64, []byte, error) {
	var n int64
	for i, shift := 0, uint(0); i < len(b) && shift < 63; i, shift = i+1, shift+7 {
		n |= int64(b[i]&0x7f) << shift
		if b[i]&0x80 == 0 {
			return n, b[i+1:], nil
		}
	}
	return 0, nil, corrupt("delta: bad size")
}
