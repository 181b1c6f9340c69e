package campaign

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// JournalFile is the name of a campaign's journal in its directory.
const JournalFile = "journal.jsonl"

// Op is what a journal record says happened.
type Op string

// Journal operations.
const (
	// OpBegin opens a generation: one bring-up of the campaign id, with the
	// instance nonce that labels everything it creates (Record.Gen,
	// Record.Instance).
	OpBegin Op = "begin"
	// OpIntent is written, and synced, before a create call.
	OpIntent Op = "intent"
	// OpCreated records the id the daemon returned.
	OpCreated Op = "created"
	// OpCreateFailed records a create call that returned an error.
	OpCreateFailed Op = "create_failed"
	// OpRemoved records a removal by id, confirmed by the daemon saying the
	// id is gone; without an id, that an intent was confirmed never
	// created.
	OpRemoved Op = "removed"
	// OpNote records a campaign-level event (bring-up failed, rolled back,
	// ready, cleanup started).
	OpNote Op = "note"
)

// Kind is the kind of resource a journal record is about.
type Kind string

// Resource kinds in the journal.
const (
	KindNetwork   Kind = "network"
	KindContainer Kind = "container"
	// KindDir is a host directory agentpen made for a workspace (its
	// /run/workbench).
	KindDir Kind = "dir"
)

// Record is one line of the journal.
type Record struct {
	Seq  int       `json:"seq"`
	Time time.Time `json:"time"`
	Op   Op        `json:"op"`
	// Gen is the generation the record belongs to (0 in journals older
	// than generations).
	Gen int `json:"gen,omitempty"`
	// Instance is the generation's nonce (on OpBegin records).
	Instance string            `json:"instance,omitempty"`
	Kind     Kind              `json:"kind,omitempty"`
	Role     string            `json:"role,omitempty"`
	Name     string            `json:"name,omitempty"`
	ID       string            `json:"id,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	Note     string            `json:"note,omitempty"`
}

// Journal is a campaign's append-only, fsync'd record of what agentpen
// meant to create, what it created (by id) and what it removed, so cleanup
// after a crash finds everything. Safe for concurrent use.
type Journal struct {
	mu   sync.Mutex
	f    *os.File
	seq  int
	now  func() time.Time
	path string
	cut  *TornTail
}

// MaxRecordBytes bounds one journal line. A record is far smaller: its
// largest part, labels, comes from a spec of at most MaxSpecBytes.
const MaxRecordBytes = 2 * MaxSpecBytes

// ErrJournalCorrupt is the kind of every *CorruptError.
var ErrJournalCorrupt = errors.New("journal corrupt")

// CorruptError is a journal with a complete line (one that ends in a
// newline) that is not a record. A write that did not complete never
// leaves one (see TornTail), so this is real corruption: nothing acts on
// such a journal until a person has looked at it.
type CorruptError struct {
	Path string
	// Line is the first bad line (from 1); More counts the bad lines
	// after it.
	Line int
	More int
	Err  error
}

func (e *CorruptError) Error() string {
	more := ""
	if e.More > 0 {
		more = fmt.Sprintf(" (and %d more bad lines)", e.More)
	}
	return fmt.Sprintf("journal %s line %d%s: %v: the journal is corrupt (a complete line that is not a record; docs/troubleshooting.md says what to do)", e.Path, e.Line, more, e.Err)
}

// Unwrap makes every CorruptError match ErrJournalCorrupt; the cause is
// in Err.
func (e *CorruptError) Unwrap() []error { return []error{ErrJournalCorrupt, e.Err} }

// TornTail is a journal's final line without its newline: a write that
// did not complete (a crash, a power loss or a full disk in the middle of
// an append; each append is one write of a whole line, synced before the
// next). Reading ignores it; OpenJournal cuts it before appending.
type TornTail struct {
	// Line is its line number; Offset where it starts (the journal's
	// length without it); Size its length in bytes.
	Line   int
	Offset int64
	Size   int64
	// Head is its first bytes (at most tornHead), for the record of the
	// cut.
	Head []byte
}

// String describes the torn line for a person.
func (t *TornTail) String() string {
	return fmt.Sprintf("a final line of %d bytes without its newline (line %d, offset %d: a write that did not complete), starting %q", t.Size, t.Line, t.Offset, t.Head)
}

// tornHead bounds TornTail.Head.
const tornHead = 256

// JournalContents is what LoadJournal read.
type JournalContents struct {
	// Records are the journal's records. With a *CorruptError they are
	// every well-formed line, for listing only: nothing may be removed
	// on the word of a corrupt journal.
	Records []Record
	// Torn is the ignored final line without its newline (nil for none).
	Torn *TornTail
}

// OpenJournal opens (creating if needed) the journal in dir, which is
// created 0700 if missing. The directory and the journal must be private
// to this user (CheckPrivate; a *TrustError otherwise). Existing records
// are read to continue the sequence; a torn last line (TornTail) is cut
// from the file (truncated and synced) and the cut recorded in a note
// before anything else is appended; Cut says what was cut. A journal with
// a corrupt line (*CorruptError) is not opened: appending to it would
// bury the damage.
func OpenJournal(dir string) (*Journal, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("journal dir %s: %w", dir, err)
	}
	if err := checkPrivatePath("campaign directory", dir, true); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, JournalFile)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	c, err := readOpen(path, f)
	if err != nil {
		f.Close()
		return nil, err
	}
	j := &Journal{f: f, now: time.Now, path: path}
	if n := len(c.Records); n > 0 {
		j.seq = c.Records[n-1].Seq
	}
	if t := c.Torn; t != nil {
		if err := f.Truncate(t.Offset); err != nil {
			f.Close()
			return nil, fmt.Errorf("journal %s: cut %s: %w", path, t, err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, fmt.Errorf("journal %s: cut %s: %w", path, t, err)
		}
		j.cut = t
		if err := j.Append(Record{Op: OpNote, Note: "journal: cut " + t.String()}); err != nil {
			f.Close()
			return nil, err
		}
	}
	if err := syncDir(dir); err != nil {
		f.Close()
		return nil, err
	}
	return j, nil
}

// Cut returns the torn final line OpenJournal cut (nil for none).
func (j *Journal) Cut() *TornTail { return j.cut }

// Path returns the journal file's path.
func (j *Journal) Path() string { return j.path }

// Append writes r (with the next sequence number and the time) and syncs
// it to disk before returning.
func (j *Journal) Append(r Record) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return fmt.Errorf("journal %s: closed", j.path)
	}
	j.seq++
	r.Seq = j.seq
	r.Time = j.now().UTC()
	line, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("journal record: %w", err)
	}
	if _, err := j.f.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("journal write: %w", err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("journal sync: %w", err)
	}
	return nil
}

// Close closes the journal file; a second Close is a no-op.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return nil
	}
	err := j.f.Close()
	j.f = nil
	return err
}

// ReadJournal reads every record of the journal at path (LoadJournal
// without the torn tail it ignores).
func ReadJournal(path string) ([]Record, error) {
	c, err := LoadJournal(path)
	return c.Records, err
}

// LoadJournal reads the journal at path, which must be private to this
// user, as its directory must (CheckPrivate; a *TrustError otherwise). A
// final line without its newline (a write that did not complete) is
// ignored and returned as Torn; a complete line that is not a record, or
// one longer than MaxRecordBytes, is a *CorruptError naming the file and
// the line, returned with every well-formed record.
func LoadJournal(path string) (JournalContents, error) {
	if err := checkPrivatePath("campaign directory", filepath.Dir(path), true); err != nil {
		return JournalContents{}, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return JournalContents{}, err
	}
	defer f.Close()
	return readOpen(path, f)
}

// readOpen checks the opened journal f is private and reads it from the
// start.
func readOpen(path string, f *os.File) (JournalContents, error) {
	fi, err := f.Stat()
	if err != nil {
		return JournalContents{}, fmt.Errorf("journal %s: %w", path, err)
	}
	if err := CheckPrivate("journal", path, fi, false); err != nil {
		return JournalContents{}, err
	}
	c, err := scanJournal(path, io.NewSectionReader(f, 0, fi.Size()))
	return c, err
}

// scanJournal reads records, one per line, from r (the journal at path).
func scanJournal(path string, r io.Reader) (JournalContents, error) {
	var c JournalContents
	var bad *CorruptError
	corrupt := func(line int, err error) {
		if bad == nil {
			bad = &CorruptError{Path: path, Line: line, Err: err}
		} else {
			bad.More++
		}
	}
	br := bufio.NewReaderSize(r, 64<<10)
	var off int64
	var buf []byte
	for n := 1; ; n++ {
		buf = buf[:0]
		size, long := int64(0), false
		var err error
		for {
			var chunk []byte
			chunk, err = br.ReadSlice('\n')
			size += int64(len(chunk))
			if !long && len(buf)+len(chunk) <= MaxRecordBytes+1 {
				buf = append(buf, chunk...)
			} else {
				long = true
			}
			if !errors.Is(err, bufio.ErrBufferFull) {
				break
			}
		}
		if errors.Is(err, io.EOF) {
			if size > 0 {
				c.Torn = &TornTail{Line: n, Offset: off, Size: size, Head: bytes.Clone(buf[:min(len(buf), tornHead)])}
			}
			break
		}
		if err != nil {
			return c, fmt.Errorf("read journal %s: %w", path, err)
		}
		off += size
		if long {
			corrupt(n, fmt.Errorf("a line of %d bytes, longer than a record can be (%d)", size, MaxRecordBytes))
			continue
		}
		rec, err := parseRecord(buf)
		if err != nil {
			corrupt(n, err)
			continue
		}
		c.Records = append(c.Records, rec)
	}
	if bad != nil {
		return c, bad
	}
	return c, nil
}

// parseRecord decodes one complete journal line: a JSON object with a
// sequence number and an operation.
func parseRecord(line []byte) (Record, error) {
	var rec Record
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return rec, errors.New("not a JSON object")
	}
	if err := json.Unmarshal(trimmed, &rec); err != nil {
		return rec, err
	}
	if rec.Seq < 1 || rec.Op == "" {
		return rec, errors.New("not a journal record (no seq or op)")
	}
	switch rec.Op {
	case OpBegin, OpIntent, OpCreated, OpCreateFailed, OpRemoved, OpNote:
	default:
		return rec, fmt.Errorf("unknown op %q", rec.Op)
	}
	switch rec.Kind {
	case "", KindNetwork, KindContainer, KindDir:
	default:
		return rec, fmt.Errorf("unknown kind %q", rec.Kind)
	}
	return rec, nil
}

// Resource is one thing the journal says agentpen meant to create.
type Resource struct {
	// Gen is the generation whose bring-up meant to create it.
	Gen  int
	Kind Kind
	Role string
	Name string
	// ID is the id the daemon returned (the path, for a directory); empty
	// when the create's outcome was never recorded.
	ID     string
	Labels map[string]string
	// Intended is when the intent was journalled.
	Intended time.Time
	// Removed is true once a removal was recorded: by id, or, for an
	// intent without one, the confirmation that it was never created.
	Removed bool
}

// Generation is one bring-up of a campaign id: its nonce and what it meant
// to create.
type Generation struct {
	N        int
	Instance string
	Started  time.Time
	// Resources are in intent order.
	Resources []Resource
}

// Live returns the resources not yet removed.
func (g Generation) Live() []Resource {
	var out []Resource
	for _, r := range g.Resources {
		if !r.Removed {
			out = append(out, r)
		}
	}
	return out
}

// Generations folds records into generations and the resources each meant
// to create. Within a generation the fold is keyed by immutable id, and by
// kind and name only for intents that have not got an id yet, so a name
// created again (in a later generation, or after a removal) is a new
// resource, never the old one. A created record with no intent before it
// (a resource found by its instance label) is a resource of its own.
func Generations(recs []Record) []Generation {
	var gens []Generation
	type key struct {
		gen  int
		kind Kind
		name string
	}
	type idKey struct {
		gen  int
		kind Kind
		id   string
	}
	gi := map[int]int{}        // generation number -> index in gens
	pending := map[key]int{}   // latest intent still without an id
	byID := map[idKey][2]int{} // -> gens index, resource index
	gen := func(n int, t time.Time) *Generation {
		i, ok := gi[n]
		if !ok {
			i = len(gens)
			gi[n] = i
			gens = append(gens, Generation{N: n, Started: t})
		}
		return &gens[i]
	}
	for _, r := range recs {
		switch r.Op {
		case OpBegin:
			g := gen(r.Gen, r.Time)
			g.Instance, g.Started = r.Instance, r.Time
		case OpIntent:
			g := gen(r.Gen, r.Time)
			pending[key{r.Gen, r.Kind, r.Name}] = len(g.Resources)
			g.Resources = append(g.Resources, Resource{Gen: r.Gen, Kind: r.Kind, Role: r.Role, Name: r.Name, Labels: r.Labels, Intended: r.Time})
		case OpCreated:
			if r.ID == "" {
				continue
			}
			g := gen(r.Gen, r.Time)
			ik := idKey{r.Gen, r.Kind, r.ID}
			if _, seen := byID[ik]; seen {
				continue
			}
			k := key{r.Gen, r.Kind, r.Name}
			if i, ok := pending[k]; ok && g.Resources[i].ID == "" {
				g.Resources[i].ID = r.ID
				delete(pending, k)
				byID[ik] = [2]int{gi[r.Gen], i}
				continue
			}
			byID[ik] = [2]int{gi[r.Gen], len(g.Resources)}
			g.Resources = append(g.Resources, Resource{Gen: r.Gen, Kind: r.Kind, Role: r.Role, Name: r.Name, ID: r.ID, Labels: r.Labels, Intended: r.Time})
		case OpRemoved:
			if r.ID != "" {
				if at, ok := byID[idKey{r.Gen, r.Kind, r.ID}]; ok {
					gens[at[0]].Resources[at[1]].Removed = true
				}
				continue
			}
			k := key{r.Gen, r.Kind, r.Name}
			if i, ok := pending[k]; ok {
				g := gen(r.Gen, r.Time)
				g.Resources[i].Removed = true
				delete(pending, k)
			}
		}
	}
	return gens
}

// Resources returns the resources of every generation, oldest first.
func Resources(recs []Record) []Resource {
	var out []Resource
	for _, g := range Generations(recs) {
		out = append(out, g.Resources...)
	}
	return out
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}
