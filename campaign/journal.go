package campaign

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"
)

// JournalFile is the name of a campaign's journal in its directory.
const JournalFile = "journal.jsonl"

// Op is what a journal record says happened. Every control event of a
// campaign's lifecycle has an op of its own (Fold reads them); OpNote is
// prose for people, never read back.
type Op string

// Journal operations.
const (
	// OpBegin opens a generation: one bring-up of the campaign id, with the
	// instance nonce that labels everything it creates (Record.Gen,
	// Record.Instance), and the launcher that asked for it (Record.Owner).
	OpBegin Op = "begin"
	// OpIntent is written, and synced, before a create call.
	OpIntent Op = "intent"
	// OpCreated records the id the daemon returned.
	OpCreated Op = "created"
	// OpCreateFailed records a create call that returned an error.
	OpCreateFailed Op = "create_failed"
	// OpOrphan records a resource of the generation that no create record
	// accounted for (found by agentpen orphans), before its removal: it is
	// folded like OpCreated, and its removal is not the campaign's.
	OpOrphan Op = "orphan"
	// OpRemoved records a removal by id, confirmed by the daemon saying the
	// id is gone; without an id, that an intent was confirmed never
	// created.
	OpRemoved Op = "removed"
	// OpReady: the generation reached readiness (every container ready)
	// and is handed out without an attestation.
	OpReady Op = "ready"
	// OpAttesting: the generation reached readiness and its bring-up's
	// attestation began. Ready and pending are one record, so no instant
	// reads ready and unattested: until OpAttested, the campaign is not
	// up.
	OpAttesting Op = "attesting"
	// OpAttested records an attestation's verdict (Status AttestOK or
	// AttestFailed) and its report (Report, Digest), at bring-up or later.
	OpAttested Op = "attested"
	// OpRolledBack: the generation's bring-up failed and what it made was
	// removed (its cleanup is the OpCleanup before it); Note says why.
	OpRolledBack Op = "rolled_back"
	// OpRemovalStarted is written before a removal's first act; Reason
	// says why the campaign is being removed (RemovalReasons).
	OpRemovalStarted Op = "removal_started"
	// OpCleanup records a cleanup's verdict (Status CleanupVerified or
	// CleanupFailed) and its report (Report, Digest).
	OpCleanup Op = "cleanup"
	// OpLifetime sets the generation's lifetime (Record.Accepted, TTL,
	// Idle): written after OpBegin when its spec or the service gives it
	// one, and again by each extension (PATCH). The latest one counts.
	OpLifetime Op = "lifetime"
	// OpClaim binds a task to a pooled workspace (Name, ID: its
	// container; Task, Attempt): written once its bind file is in place.
	// A slot is claimed once.
	OpClaim Op = "claim"
	// OpExpiring is a warning agentpen serve journals shortly before it
	// removes a campaign that is up for its lifetime (Lifecycle.Warning):
	// Reason (ReasonTTL, ReasonIdle) and Deadline say which removal comes
	// when unless the lifetime is extended (or, for idle, an episode is
	// played). It changes nothing of the campaign: it is there to be told
	// (an event), and once.
	OpExpiring Op = "expiring"
	// OpNote is prose for a person (a bring-up's summary, the cut of a
	// torn line); nothing reads it back.
	OpNote Op = "note"
)

// Verdicts in Record.Status.
const (
	AttestOK        = "ok"
	AttestFailed    = "failed"
	CleanupVerified = "verified"
	CleanupFailed   = "failed"
)

// Why a removal began (Record.Reason of OpRemovalStarted).
const (
	// ReasonDown: agentpen down.
	ReasonDown = "down"
	// ReasonDelete: DELETE /v1/campaigns/{id}.
	ReasonDelete = "delete"
	// ReasonRollback: a bring-up that failed removes what it made.
	ReasonRollback = "rollback"
	// ReasonNotAttested: a campaign that did not attest is removed (fail
	// closed).
	ReasonNotAttested = "not_attested"
	// ReasonUndelivered: up could not hand its ids to anyone.
	ReasonUndelivered = "undelivered"
	// ReasonExit: agentpen serve --cleanup-on-exit.
	ReasonExit = "exit"
	// ReasonOrphan: agentpen orphans --remove.
	ReasonOrphan = "orphan"
	// ReasonTTL: its lifetime's deadline passed (ttl_seconds).
	ReasonTTL = "ttl"
	// ReasonIdle: nothing used it for its idle timeout
	// (idle_timeout_seconds).
	ReasonIdle = "idle"
	// ReasonLauncherGone: the launcher that created it (its token) held
	// no event stream of it and sent it no keepalive for its
	// lifetime's launcher timeout (launcher_timeout_seconds).
	ReasonLauncherGone = "launcher_gone"
	// ReasonReconcile: agentpen reconcile (or serve at start) removed what
	// an earlier generation left live, with no removal of its own to
	// finish.
	ReasonReconcile = "reconcile"
)

// RemovalReasons are the reasons a journal may give.
var RemovalReasons = []string{ReasonDown, ReasonDelete, ReasonRollback, ReasonNotAttested, ReasonUndelivered, ReasonExit, ReasonOrphan,
	ReasonTTL, ReasonIdle, ReasonLauncherGone, ReasonReconcile}

// Kind is the kind of resource a journal record is about.
type Kind string

// Resource kinds in the journal.
const (
	KindNetwork   Kind = "network"
	KindContainer Kind = "container"
	// KindDir is a host directory agentpen made for a workspace (its
	// /run/workbench).
	KindDir Kind = "dir"
	// The kinds of a cluster's objects (adapter/kube): a campaign
	// generation's namespace, its service account, the grader key's
	// secret and its network policies. A pod, the cluster's unit that
	// runs a container, is journalled as a KindContainer, so every reader
	// of a campaign's containers reads a cluster's pods.
	KindNamespace      Kind = "namespace"
	KindServiceAccount Kind = "serviceaccount"
	KindSecret         Kind = "secret"
	KindNetworkPolicy  Kind = "networkpolicy"
)

// Known reports whether k is a kind a journal may record.
func (k Kind) Known() bool {
	switch k {
	case KindNetwork, KindContainer, KindDir, KindNamespace, KindServiceAccount, KindSecret, KindNetworkPolicy:
		return true
	}
	return false
}

// JournalFormat is the format every record of a journal carries (V). A
// journal written by an agentpen before typed lifecycle records (format
// 1, without V) is refused as corrupt, never translated.
const JournalFormat = 2

// Record is one line of the journal.
type Record struct {
	// V is the journal format (JournalFormat).
	V   int `json:"v"`
	Seq int `json:"seq"`
	// Prev is the SHA-256 (hex) of the record before this one, as its
	// line was written ("" for the first): the records are a chain, so an
	// edited, removed or reordered record is seen on reading.
	Prev string    `json:"prev,omitempty"`
	Time time.Time `json:"time"`
	Op   Op        `json:"op"`
	// Gen is the generation the record belongs to; 0 on the records of a
	// removal (OpRemovalStarted, OpCleanup), which span generations.
	Gen int `json:"gen,omitempty"`
	// Instance is the generation's nonce (on OpBegin records).
	Instance string `json:"instance,omitempty"`
	// Images maps each tag the generation's spec names to the image id the
	// bring-up resolved it to (on OpBegin records; Plan.Images).
	Images map[string]string `json:"images,omitempty"`
	// Owner is the name of the launcher whose token created the
	// generation through agentpen serve (on OpBegin records; Plan.Owner,
	// CheckOwner's grammar); empty for agentpen up. A name, never a token.
	Owner  string            `json:"owner,omitempty"`
	Kind   Kind              `json:"kind,omitempty"`
	Role   string            `json:"role,omitempty"`
	Name   string            `json:"name,omitempty"`
	ID     string            `json:"id,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	// Status is a verdict (OpAttested, OpCleanup); Reason why a removal
	// began (OpRemovalStarted).
	Status string `json:"status,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Report names a report's file in the campaign's directory and Digest
	// its SHA-256 (hex), on OpAttested and OpCleanup; Envelope is the
	// SHA-256 (hex) of the report's signed statement (its DSSE envelope,
	// the file beside it), empty for a report that was not signed.
	Report   string `json:"report,omitempty"`
	Digest   string `json:"digest,omitempty"`
	Envelope string `json:"envelope,omitempty"`
	// Accepted (when the create was accepted: the TTL counts from it),
	// TTL, Idle and Launcher (seconds; 0 for none) are an OpLifetime's.
	Accepted time.Time `json:"accepted,omitzero"`
	TTL      int       `json:"ttl_seconds,omitempty"`
	Idle     int       `json:"idle_timeout_seconds,omitempty"`
	Launcher int       `json:"launcher_timeout_seconds,omitempty"`
	// Deadline is when an OpExpiring's removal comes (Reason: ttl, idle).
	Deadline time.Time `json:"deadline,omitzero"`
	// Slots are the pool slots a refill's attestation covered (on
	// OpAttested; none: the whole campaign), or the one pool slot an
	// OpRemoved drops (its workspace did not come up: the campaign
	// stays, and the pool makes another).
	Slots []int `json:"slots,omitempty"`
	// Task and Attempt are what an OpClaim bound (the trainer's task id
	// and attempt id).
	Task    string `json:"task_id,omitempty"`
	Attempt string `json:"attempt_id,omitempty"`
	Note    string `json:"note,omitempty"`
}

// Journal is a campaign's append-only, fsync'd record of what agentpen
// meant to create, what it created (by id), what it removed and what
// became of the campaign, so cleanup after a crash finds everything and
// every reader agrees on its state (Fold). Safe for concurrent use.
type Journal struct {
	mu   sync.Mutex
	f    *os.File
	seq  int
	prev string // the hash of the last line
	now  func() time.Time
	path string
	cut  *TornTail
	// observe is called with each record once it is on disk (Observe).
	observe func(Record)
	// first runs once the first record Append writes is on disk
	// (OnFirstRecord); broken is why appending can no longer go on (it
	// failed).
	first  func() error
	broken error
}

// OnFirstRecord sets f to run once, when the first record Append writes
// is on disk, before Append returns (and before Observe's function sees
// it): the store puts a new campaign's directory in place then, so that
// it appears with its first record or not at all. When f fails, Append
// returns its error and the journal takes no more records.
func (j *Journal) OnFirstRecord(f func() error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.first = f
}

// Observe sets f to be called with each record Append writes, once it
// is synced, in the journal's order (under the journal's lock: f must
// return quickly). agentpen's commands show a campaign's events from it.
func (j *Journal) Observe(f func(Record)) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.observe = f
}

// MaxRecordBytes bounds one journal line. A record is far smaller: its
// largest part, labels, comes from a spec of at most MaxSpecBytes.
const MaxRecordBytes = 2 * MaxSpecBytes

// ErrJournalCorrupt is the kind of every *CorruptError.
var ErrJournalCorrupt = errors.New("journal corrupt")

// CorruptError is a journal with a complete line (one that ends in a
// newline) that is not a record of this format, or a record that does not
// follow the one before it. A write that did not complete never leaves
// one (see TornTail), so this is real damage (or an older agentpen's
// journal): nothing acts on such a journal until a person has looked at
// it.
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
	return fmt.Sprintf("journal %s line %d%s: %v: the journal is corrupt (docs/troubleshooting.md says what to do)", e.Path, e.Line, more, e.Err)
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

// JournalContents is what ReadJournal read.
type JournalContents struct {
	// Records are the journal's records. With a *CorruptError they are
	// every well-formed line, for listing only: nothing may be removed
	// on the word of a corrupt journal.
	Records []Record
	// Torn is the ignored final line without its newline (nil for none).
	Torn *TornTail
	// last is the hash of the last complete line ("" for none).
	last string
	// file is the journal read (ReadJournalAfter), end the offset after
	// its last complete line and lastSize that line's length with its
	// newline; clean: every complete line was a record that followed the
	// one before it.
	file          os.FileInfo
	end, lastSize int64
	clean         bool
	// readOn: ReadJournalAfter read on from its prev.
	readOn bool
}

// FileInfo is the journal file as it was read (nil for contents not
// read from a file).
func (c JournalContents) FileInfo() os.FileInfo { return c.file }

// ReadOn reports whether ReadJournalAfter read the file on from the
// earlier read it was given (false: from its start).
func (c JournalContents) ReadOn() bool { return c.readOn }

// OpenJournal continues the journal in f, which its caller opened for
// reading and appending (O_RDWR|O_APPEND, never following a link) and
// names path in messages. The file must be private to this user
// (CheckPrivate; a *TrustError otherwise). Existing records are read to
// continue the sequence and the chain; a torn last line (TornTail) is cut
// from the file (truncated and synced) and the cut recorded in a note
// before anything else is appended; Cut says what was cut. A journal with
// a corrupt line (*CorruptError) is not opened: appending to it would
// bury the damage. The Journal owns f from then on (Close closes it), also
// on error.
func OpenJournal(f *os.File, path string) (*Journal, error) {
	j, _, err := OpenJournalAfter(f, path, JournalContents{})
	return j, err
}

// OpenJournalAfter is OpenJournal reading f as ReadJournalAfter does
// (prev: an earlier read of the same file), and returns what it read.
func OpenJournalAfter(f *os.File, path string, prev JournalContents) (*Journal, JournalContents, error) {
	c, err := ReadJournalAfter(f, path, prev)
	if err != nil {
		f.Close()
		return nil, c, err
	}
	j := &Journal{f: f, now: time.Now, path: path, prev: c.last}
	if n := len(c.Records); n > 0 {
		j.seq = c.Records[n-1].Seq
	}
	if t := c.Torn; t != nil {
		if err := f.Truncate(t.Offset); err != nil {
			f.Close()
			return nil, c, fmt.Errorf("journal %s: cut %s: %w", path, t, err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, c, fmt.Errorf("journal %s: cut %s: %w", path, t, err)
		}
		j.cut = t
		if err := j.Append(Record{Op: OpNote, Note: "journal: cut " + t.String()}); err != nil {
			f.Close()
			return nil, c, err
		}
	}
	return j, c, nil
}

// Cut returns the torn final line OpenJournal cut (nil for none).
func (j *Journal) Cut() *TornTail { return j.cut }

// Path returns the journal file's path.
func (j *Journal) Path() string { return j.path }

// Append writes r (with the format, the next sequence number, the hash of
// the record before it and the time) and syncs it to disk before
// returning.
func (j *Journal) Append(r Record) error { return j.AppendAll([]Record{r}) }

// AppendAll writes the records as Append does each, in order, in one
// write synced once: a batch of claims costs one sync, not one each. A
// crash during the write leaves the records before the torn one in the
// journal (OpenJournal cuts the torn line).
func (j *Journal) AppendAll(recs []Record) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return fmt.Errorf("journal %s: closed", j.path)
	}
	if j.broken != nil {
		return j.broken
	}
	if len(recs) == 0 {
		return nil
	}
	seq, prev, now := j.seq, j.prev, j.now().UTC()
	out := make([]Record, len(recs))
	var buf []byte
	for i, r := range recs {
		seq++
		r.V, r.Seq, r.Prev, r.Time = JournalFormat, seq, prev, now
		line, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("journal record: %w", err)
		}
		buf = append(append(buf, line...), '\n')
		prev, out[i] = lineHash(line), r
	}
	if _, err := j.f.Write(buf); err != nil {
		return fmt.Errorf("journal write: %w", err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("journal sync: %w", err)
	}
	j.seq, j.prev = seq, prev
	if f := j.first; f != nil {
		j.first = nil
		if err := f(); err != nil {
			j.broken = fmt.Errorf("journal %s: %w", j.path, err)
			return j.broken
		}
	}
	if j.observe != nil {
		for _, r := range out {
			j.observe(r)
		}
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

// lineHash is the chain's hash of one line (without its newline).
func lineHash(line []byte) string {
	sum := sha256.Sum256(line)
	return hex.EncodeToString(sum[:])
}

// ReadJournal reads the journal in f from its start (f is named path in
// messages); f must be private to this user (CheckPrivate; a *TrustError
// otherwise). A final line without its newline (a write that did not
// complete) is ignored and returned as Torn; a complete line that is not
// a record of JournalFormat, one longer than MaxRecordBytes, or a record
// that does not follow the one before it (its sequence number and hash),
// is a *CorruptError naming the file and the line, returned with every
// well-formed record.
func ReadJournal(f *os.File, path string) (JournalContents, error) {
	fi, err := f.Stat()
	if err != nil {
		return JournalContents{}, fmt.Errorf("journal %s: %w", path, err)
	}
	if err := CheckPrivate("journal", path, fi, false); err != nil {
		return JournalContents{}, err
	}
	c, err := scanJournal(path, io.NewSectionReader(f, 0, fi.Size()), JournalContents{})
	c.file = fi
	return c, err
}

// ReadJournalAfter reads the journal in f as ReadJournal does, reusing
// prev, the contents of an earlier read (ReadJournal's or this one's)
// without error: when f is the file prev read (os.SameFile), as long as
// prev read it (and not written since) or longer, and the last line prev
// read is still where prev read it, only the lines after that line are
// read, and the first of them must follow it (the chain); otherwise all
// of f is read. A journal is only ever appended to (and a torn final
// line cut, which prev did not count), so that is what a read from the
// start would say, in a fraction of its time. It does not look again at
// the lines before prev's last: a line edited in place while the file
// also grew is seen by the next read from the start (any other reader's).
// prev is not changed.
func ReadJournalAfter(f *os.File, path string, prev JournalContents) (JournalContents, error) {
	fi, err := f.Stat()
	if err != nil {
		return JournalContents{}, fmt.Errorf("journal %s: %w", path, err)
	}
	if err := CheckPrivate("journal", path, fi, false); err != nil {
		return JournalContents{}, err
	}
	from := JournalContents{}
	if prev.continuedBy(f, fi) {
		from = prev
		from.Torn = nil
	}
	c, err := scanJournal(path, io.NewSectionReader(f, from.end, fi.Size()-from.end), from)
	c.file, c.readOn = fi, from.file != nil
	return c, err
}

// continuedBy reports whether fi, the file f, is c's journal with
// nothing but lines appended after c's last line (see ReadJournalAfter).
func (c JournalContents) continuedBy(f io.ReaderAt, fi os.FileInfo) bool {
	switch {
	case !c.clean || c.file == nil || !os.SameFile(c.file, fi) || fi.Size() < c.end:
		return false
	case fi.Size() == c.file.Size() && !fi.ModTime().Equal(c.file.ModTime()):
		return false // written in place
	case c.end == 0:
		return true
	}
	line := make([]byte, c.lastSize)
	if _, err := f.ReadAt(line, c.end-c.lastSize); err != nil {
		return false
	}
	return bytes.HasSuffix(line, []byte("\n")) && lineHash(line[:len(line)-1]) == c.last
}

// ParseJournal reads a journal's records from r (named path in messages)
// as ReadJournal does, without its owner and mode check: for verifying a
// copy of a campaign's files, whose trust comes from the signed
// statements that cover it, never for acting on a campaign.
func ParseJournal(path string, r io.Reader) (JournalContents, error) {
	return scanJournal(path, r, JournalContents{})
}

// scanJournal reads records, one per line, from r (the journal at path
// after the lines c read, clean: r starts at c.end) and returns c with
// them after its records (c's own are not changed).
func scanJournal(path string, r io.Reader, c JournalContents) (JournalContents, error) {
	c.Records = slices.Clip(c.Records) // appended to: copied, never shared
	c.clean = false
	var bad *CorruptError
	corrupt := func(line int, err error) {
		if bad == nil {
			bad = &CorruptError{Path: path, Line: line, Err: err}
		} else {
			bad.More++
		}
	}
	br := bufio.NewReaderSize(r, 64<<10)
	off := c.end
	var buf []byte
	seq, resync := 0, false
	if k := len(c.Records); k > 0 {
		seq = c.Records[k-1].Seq
	}
	for n := len(c.Records) + 1; ; n++ {
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
		c.end, c.lastSize = off, size
		if long {
			corrupt(n, fmt.Errorf("a line of %d bytes, longer than a record can be (%d)", size, MaxRecordBytes))
			c.last, resync = "", true
			continue
		}
		line := bytes.TrimSuffix(buf, []byte("\n"))
		rec, err := parseRecord(line)
		switch {
		case err != nil, resync:
			// After a bad line the chain is broken already: the next
			// record is kept (for listing) without judging its link.
		case rec.Seq != seq+1:
			err = fmt.Errorf("record %d follows record %d: a record was removed, added or moved", rec.Seq, seq)
		case rec.Prev != c.last:
			err = fmt.Errorf("record %d does not follow the line before it (its hash of it differs): a record was edited, removed or moved", rec.Seq)
		}
		c.last = lineHash(line)
		if err != nil {
			corrupt(n, err)
			resync = true
			continue
		}
		seq, resync = rec.Seq, false
		c.Records = append(c.Records, rec)
	}
	if bad != nil {
		return c, bad
	}
	c.clean = true
	return c, nil
}

// parseRecord decodes one complete journal line: a JSON object of this
// format with a sequence number, a known operation and a known kind.
func parseRecord(line []byte) (Record, error) {
	var rec Record
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return rec, errors.New("not a JSON object")
	}
	if err := json.Unmarshal(trimmed, &rec); err != nil {
		return rec, err
	}
	if rec.V != JournalFormat {
		return rec, fmt.Errorf("journal format %d, not %d (an older agentpen wrote it; it is not read: move the campaign's directory aside)", rec.V, JournalFormat)
	}
	if rec.Seq < 1 || rec.Op == "" {
		return rec, errors.New("not a journal record (no seq or op)")
	}
	switch rec.Op {
	case OpBegin:
		for ref, id := range rec.Images {
			if CheckImage("images", ref) != nil || Pinned(ref) || !pinOf(ref, id) {
				return rec, fmt.Errorf("begin record: image %q pinned as %q: not a tag and an image id (or its qualified name)", ref, id)
			}
		}
		if rec.Owner != "" && CheckOwner("owner", rec.Owner) != nil {
			return rec, errors.New("begin record: its owner is not a launcher's name")
		}
	case OpIntent, OpCreated, OpCreateFailed, OpOrphan, OpRemoved, OpReady, OpAttesting, OpRolledBack, OpNote:
	case OpClaim:
		if rec.Gen < 1 || rec.Name == "" || rec.ID == "" || CheckTaskID("task_id", rec.Task) != nil || (rec.Attempt != "" && CheckID("attempt_id", rec.Attempt) != nil) {
			return rec, errors.New("claim record: want a generation, a container's name and id, and a task id")
		}
	case OpAttested:
		if rec.Status != AttestOK && rec.Status != AttestFailed {
			return rec, fmt.Errorf("attestation verdict %q", rec.Status)
		}
	case OpCleanup:
		if rec.Status != CleanupVerified && rec.Status != CleanupFailed {
			return rec, fmt.Errorf("cleanup verdict %q", rec.Status)
		}
	case OpRemovalStarted:
		if !slices.Contains(RemovalReasons, rec.Reason) {
			return rec, fmt.Errorf("removal reason %q", rec.Reason)
		}
	case OpLifetime:
		if rec.Gen < 1 || rec.Accepted.IsZero() || rec.TTL < 0 || rec.TTL > MaxTTLSeconds || rec.Idle < 0 || rec.Idle > MaxIdleTimeoutSeconds ||
			rec.Launcher < 0 || rec.Launcher > MaxLauncherTimeoutSeconds {
			return rec, fmt.Errorf("lifetime of generation %d: accepted %v, ttl %d s, idle timeout %d s, launcher timeout %d s", rec.Gen, rec.Accepted, rec.TTL, rec.Idle, rec.Launcher)
		}
	case OpExpiring:
		if rec.Gen < 1 || rec.Deadline.IsZero() || (rec.Reason != ReasonTTL && rec.Reason != ReasonIdle) {
			return rec, fmt.Errorf("expiring warning of generation %d: reason %q, deadline %v", rec.Gen, rec.Reason, rec.Deadline)
		}
	default:
		return rec, fmt.Errorf("unknown op %q", rec.Op)
	}
	if rec.Kind != "" && !rec.Kind.Known() {
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
	// Orphan is true for a resource recorded by OpOrphan.
	Orphan bool
	// Dropped is true when its removal dropped a pool slot that did not
	// come up (an OpRemoved with Slots): no removal of the campaign.
	Dropped bool
}

// Generation is one bring-up of a campaign id: its nonce and what it meant
// to create.
type Generation struct {
	N        int
	Instance string
	Started  time.Time
	// Images are the image ids its bring-up pinned its spec's tags to
	// (Plan.Pin takes them); nil for a spec of pins only.
	Images map[string]string
	// Owner is the launcher that created it through agentpen serve (its
	// begin record's Record.Owner); empty for agentpen up. The launcher
	// API shows a campaign only to its latest generation's owner and to
	// the operator.
	Owner string
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
			g.Instance, g.Started, g.Images, g.Owner = r.Instance, r.Time, r.Images, r.Owner
		case OpIntent:
			g := gen(r.Gen, r.Time)
			pending[key{r.Gen, r.Kind, r.Name}] = len(g.Resources)
			g.Resources = append(g.Resources, Resource{Gen: r.Gen, Kind: r.Kind, Role: r.Role, Name: r.Name, Labels: r.Labels, Intended: r.Time})
		case OpCreated, OpOrphan:
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
			g.Resources = append(g.Resources, Resource{Gen: r.Gen, Kind: r.Kind, Role: r.Role, Name: r.Name, ID: r.ID, Labels: r.Labels, Intended: r.Time, Orphan: r.Op == OpOrphan})
		case OpRemoved:
			if r.ID != "" {
				if at, ok := byID[idKey{r.Gen, r.Kind, r.ID}]; ok {
					res := &gens[at[0]].Resources[at[1]]
					res.Removed, res.Dropped = true, len(r.Slots) > 0
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
