package campaign

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
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
}

// OpenJournal opens (creating if needed) the journal in dir, which is
// created 0700 if missing. Existing records are read to continue the
// sequence; a torn last line from a crash is ignored.
func OpenJournal(dir string) (*Journal, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("journal dir %s: %w", dir, err)
	}
	path := filepath.Join(dir, JournalFile)
	recs, err := ReadJournal(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	if err := syncDir(dir); err != nil {
		f.Close()
		return nil, err
	}
	j := &Journal{f: f, now: time.Now, path: path}
	if n := len(recs); n > 0 {
		j.seq = recs[n-1].Seq
	}
	return j, nil
}

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

// ReadJournal reads every complete record of the journal at path. A final
// line without its newline (a write torn by a crash) is ignored; a corrupt
// line anywhere else is an error.
func ReadJournal(path string) ([]Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Record
	r := bufio.NewReader(f)
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return out, nil // a torn tail, if any, is dropped
		}
		if err != nil {
			return nil, fmt.Errorf("read journal %s: %w", path, err)
		}
		var rec Record
		if err := json.Unmarshal(line, &rec); err != nil {
			return nil, fmt.Errorf("journal %s line %d: %w", path, n, err)
		}
		out = append(out, rec)
	}
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
