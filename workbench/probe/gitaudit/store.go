package gitaudit

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// store is a repository's object database: its loose objects and packs,
// and those of its alternates.
type store struct {
	dirs  []string // objects directories: the repository's, then its alternates'
	packs []*pack
	// stray are the files of a pack directory that hold objects this
	// reader does not read: a pack without its index (git index-pack
	// makes one), a temporary pack or index of a write.
	stray []string
	// cache holds objects recently inflated from packs (delta bases,
	// mostly), by pack and offset.
	cache *cache
	zr    io.ReadCloser // a zlib reader reused (zlib.Resetter)
	br    bytes.Reader
	// types are the types of packed entries typeOf resolved.
	types map[cacheKey]Type
	// headers counts the entry headers typeOf parsed (its work: each
	// entry's once, whatever the chains).
	headers int
}

// pack is one pack: its index and its bytes (mapped).
type pack struct {
	path string
	idx  *index
	data []byte
	// unmap releases data.
	unmap func() error
}

// maxAlternates bounds the alternates followed (they may chain).
const maxAlternates = 8

// openStore opens the object database in dir (a repository's objects
// directory) and its alternates, with every pack's index.
func openStore(dir string) (*store, error) {
	s := &store{cache: newCache(64 << 20)}
	seen := map[string]bool{}
	queue := []string{dir}
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		if seen[d] {
			continue
		}
		if len(s.dirs) > maxAlternates {
			s.close()
			return nil, fmt.Errorf("objects: more than %d alternates: %w", maxAlternates, ErrUnsupported)
		}
		seen[d] = true
		s.dirs = append(s.dirs, d)
		alts, err := readAlternates(d)
		if err != nil {
			s.close()
			return nil, err
		}
		queue = append(queue, alts...)
	}
	for _, d := range s.dirs {
		names, err := readDirNames(filepath.Join(d, "pack"))
		if err != nil {
			s.close()
			return nil, err
		}
		for _, n := range names {
			base, isPack := strings.CutSuffix(n, ".pack")
			switch {
			case strings.HasPrefix(n, "tmp_"), isPack && !slices.Contains(names, base+".idx"):
				s.stray = append(s.stray, filepath.Join(d, "pack", n))
				continue
			case !strings.HasSuffix(n, ".idx"):
				continue
			}
			p, err := openPack(filepath.Join(d, "pack", strings.TrimSuffix(n, ".idx")))
			if err != nil {
				s.close()
				return nil, err
			}
			s.packs = append(s.packs, p)
		}
	}
	return s, nil
}

// readAlternates reads dir/info/alternates: one objects directory a line
// (relative to dir, or absolute); # starts a comment.
func readAlternates(dir string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "info", "alternates"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("objects: %w", err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		if !filepath.IsAbs(line) {
			line = filepath.Join(dir, line)
		}
		out = append(out, filepath.Clean(line))
	}
	return out, nil
}

// readDirNames lists a directory's names; a directory that is not there
// has none.
func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// openPack maps base.pack and reads base.idx.
func openPack(base string) (*pack, error) {
	ib, err := os.ReadFile(base + ".idx")
	if err != nil {
		return nil, err
	}
	ix, err := parseIndex(ib)
	if err != nil {
		return nil, fmt.Errorf("%s.idx: %w", filepath.Base(base), err)
	}
	data, unmap, err := mapFile(base + ".pack")
	if err != nil {
		return nil, err
	}
	p := &pack{path: base + ".pack", idx: ix, data: data, unmap: unmap}
	if len(data) < 12+20 || string(data[:4]) != "PACK" {
		p.close()
		return nil, fmt.Errorf("%s.pack: %w", filepath.Base(base), corrupt("not a pack"))
	}
	if v := binary.BigEndian.Uint32(data[4:8]); v != 2 && v != 3 {
		p.close()
		return nil, fmt.Errorf("%s.pack: %w", filepath.Base(base), corrupt("pack version %d", v))
	}
	if n := binary.BigEndian.Uint32(data[8:12]); int(n) != ix.count() {
		p.close()
		return nil, fmt.Errorf("%s.pack: %w", filepath.Base(base), corrupt("%d objects, its index names %d", n, ix.count()))
	}
	return p, nil
}

// mapFile maps a file read-only (read whole when it cannot be mapped).
func mapFile(path string) ([]byte, func() error, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if st.Size() == 0 || st.Size() != int64(int(st.Size())) {
		return nil, nil, fmt.Errorf("%s: %w", filepath.Base(path), corrupt("size %d", st.Size()))
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_PRIVATE)
	if err != nil {
		b, err := io.ReadAll(f)
		return b, func() error { return nil }, err
	}
	return b, func() error { return unix.Munmap(b) }, nil
}

func (p *pack) close() {
	if p.unmap != nil {
		p.unmap()
		p.unmap = nil
	}
}

func (s *store) close() {
	for _, p := range s.packs {
		p.close()
	}
	s.packs = nil
}

// packedCount is how many objects the packs name (bounded: it sizes
// maps, and an index's count is its claim).
func (s *store) packedCount() int {
	n := 0
	for _, p := range s.packs {
		n += p.idx.count()
	}
	return min(n, 1<<20)
}

// each calls fn with the name of every object the store holds (an object
// in several packs, or loose and packed, more than once).
func (s *store) each(fn func(ID) error) error {
	for _, p := range s.packs {
		for i := range p.idx.count() {
			if err := fn(p.idx.name(i)); err != nil {
				return err
			}
		}
	}
	for _, d := range s.dirs {
		fans, err := readDirNames(d)
		if err != nil {
			return err
		}
		for _, fan := range fans {
			if len(fan) != 2 || !isHex(fan) {
				continue
			}
			names, err := readDirNames(filepath.Join(d, fan))
			if err != nil {
				return err
			}
			for _, n := range names {
				if len(n) != 38 || !isHex(n) {
					continue // a temporary file of a write in progress
				}
				id, err := ParseID(fan + n)
				if err != nil {
					return err
				}
				if err := fn(id); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// read returns an object's type and content.
func (s *store) read(id ID) (Type, []byte, error) {
	for _, p := range s.packs {
		off, ok, err := p.idx.find(id)
		if err != nil {
			return 0, nil, fmt.Errorf("%s: %w", filepath.Base(p.path), err)
		}
		if ok {
			t, b, err := s.readPacked(p, off, chain{})
			if err != nil {
				return 0, nil, fmt.Errorf("object %s in %s: %w", id, filepath.Base(p.path), err)
			}
			return t, b, nil
		}
	}
	for _, d := range s.dirs {
		h := id.String()
		t, b, err := s.readLoose(filepath.Join(d, h[:2], h[2:]))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, nil, fmt.Errorf("object %s: %w", id, err)
		}
		return t, b, nil
	}
	return 0, nil, fmt.Errorf("%w: %s", ErrMissing, id)
}

// typeOf is an object's type, reading as little as it can: a packed
// object's header (and its delta bases' headers), a loose object's first
// bytes. Each entry's type is kept once known (types): an entry is
// resolved once, however many chains pass through it.
func (s *store) typeOf(id ID) (Type, error) {
	var path []cacheKey // the entries whose type is the chain's end
	done := func(t Type) (Type, error) {
		if s.types == nil {
			s.types = map[cacheKey]Type{}
		}
		for _, k := range path {
			s.types[k] = t
		}
		return t, nil
	}
	var ch chain
	for {
		p, off, err := s.locate(id)
		if err != nil {
			return 0, err
		}
		if p == nil {
			t, _, err := s.read(id)
			if err != nil {
				return 0, err
			}
			return done(t)
		}
		for {
			k := cacheKey{p, off}
			if t, ok := s.types[k]; ok {
				return done(t)
			}
			h, err := parseEntryHeader(p.data, off)
			s.headers++
			if err != nil {
				return 0, err
			}
			if ch, err = ch.follow(p, off, h.typ == typeRefDelta); err != nil {
				return 0, fmt.Errorf("object %s: %w", id, err)
			}
			path = append(path, k)
			if h.typ == typeOfsDelta {
				off = h.baseOff
				continue
			}
			if h.typ != typeRefDelta {
				return done(h.typ)
			}
			id = h.baseID
			break
		}
	}
}

// locate is the pack and offset of id, or a nil pack when no pack holds
// it.
func (s *store) locate(id ID) (*pack, int64, error) {
	for _, p := range s.packs {
		off, ok, err := p.idx.find(id)
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %w", filepath.Base(p.path), err)
		}
		if ok {
			return p, off, nil
		}
	}
	return nil, 0, nil
}

// maxDeltaDepth bounds a delta chain (git's default --depth is 50, its
// largest 4095).
const maxDeltaDepth = 4095

// chain is a delta chain being followed: its depth, and the reference
// deltas on it. An offset delta's base is strictly earlier in its pack,
// so a chain of them cannot loop; one that loops passes a reference delta
// twice, and only those are remembered.
type chain struct {
	depth int
	refs  []cacheKey
}

// follow adds the entry at off to the chain (ref: a reference delta): a
// chain longer than maxDeltaDepth, or one that comes back to a reference
// delta (one naming itself, or a base whose chain names it), is corrupt.
func (c chain) follow(p *pack, off int64, ref bool) (chain, error) {
	if c.depth >= maxDeltaDepth {
		return c, corrupt("a delta chain longer than %d", maxDeltaDepth)
	}
	c.depth++
	if !ref {
		return c, nil
	}
	k := cacheKey{p, off}
	if slices.Contains(c.refs, k) {
		return c, corrupt("a delta chain that loops at %s offset %d", filepath.Base(p.path), off)
	}
	c.refs = append(slices.Clip(c.refs), k)
	return c, nil
}

// readPacked inflates the entry at off, resolving its delta chain (ch is
// the chain that led to it).
func (s *store) readPacked(p *pack, off int64, ch chain) (Type, []byte, error) {
	if t, b, ok := s.cache.get(p, off); ok {
		return t, b, nil
	}
	h, err := parseEntryHeader(p.data, off)
	if err != nil {
		return 0, nil, err
	}
	if ch, err = ch.follow(p, off, h.typ == typeRefDelta); err != nil {
		return 0, nil, err
	}
	raw, err := s.inflate(p.data[h.data:], h.size)
	if err != nil {
		return 0, nil, fmt.Errorf("entry at %d: %w", off, err)
	}
	var base []byte
	var t Type
	switch h.typ {
	case typeOfsDelta:
		t, base, err = s.readPacked(p, h.baseOff, ch)
	case typeRefDelta:
		// The base may be in this pack or another (a thin pack fixed up),
		// or loose.
		bp, bo, lerr := s.locate(h.baseID)
		switch {
		case lerr != nil:
			err = lerr
		case bp != nil:
			t, base, err = s.readPacked(bp, bo, ch)
		default:
			t, base, err = s.read(h.baseID)
		}
	default:
		s.cache.put(p, off, h.typ, raw)
		return h.typ, raw, nil
	}
	if err != nil {
		return 0, nil, err
	}
	out, err := applyDelta(base, raw)
	if err != nil {
		return 0, nil, fmt.Errorf("entry at %d: %w", off, err)
	}
	s.cache.put(p, off, t, out)
	return t, out, nil
}

// inflate reads size bytes of the zlib stream at the start of b.
func (s *store) inflate(b []byte, size int64) ([]byte, error) {
	s.br.Reset(b)
	var err error
	if s.zr == nil {
		s.zr, err = zlib.NewReader(&s.br)
	} else {
		err = s.zr.(zlib.Resetter).Reset(&s.br, nil)
	}
	if err != nil {
		return nil, corrupt("zlib: %v", err)
	}
	return readSized(s.zr, size)
}

// readSized reads exactly size bytes of r, allocating as they come (a
// header's size is a claim, not a promise: a forged one must not make the
// reader allocate it).
func readSized(r io.Reader, size int64) ([]byte, error) {
	out, err := io.ReadAll(io.LimitReader(r, size))
	if err != nil {
		return nil, corrupt("zlib: %v", err)
	}
	if int64(len(out)) != size {
		return nil, corrupt("zlib: %d bytes, the header says %d", len(out), size)
	}
	return out, nil
}

// maxLoose bounds a loose object file read whole.
const maxLoose = 256 << 20

// readLoose reads a loose object: zlib of "TYPE SIZE\0" and the content.
func (s *store) readLoose(path string) (Type, []byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	zr, err := zlib.NewReader(bufio.NewReader(io.LimitReader(f, maxLoose)))
	if err != nil {
		return 0, nil, corrupt("loose object: %v", err)
	}
	defer zr.Close()
	br := bufio.NewReader(zr)
	hdr, err := br.ReadSlice(0)
	if err != nil || len(hdr) > 32 {
		return 0, nil, corrupt("loose object: no header")
	}
	name, sz, ok := bytes.Cut(hdr[:len(hdr)-1], []byte{' '})
	t, known := parseType(name)
	size, perr := strconv.ParseInt(string(sz), 10, 64)
	if !ok || !known || perr != nil || size < 0 || size > maxObject {
		return 0, nil, corrupt("loose object: header %q", clip(string(hdr)))
	}
	out, err := readSized(br, size)
	if err != nil {
		return 0, nil, fmt.Errorf("loose object: %w", err)
	}
	return t, out, nil
}
