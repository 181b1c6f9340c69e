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
	// OpIntent is written, and synced, before a create call.
	OpIntent Op = "intent"
	// OpCreated records the id the daemon returned.
	OpCreated Op = "created"
	// OpCreateFailed records a create call that returned an error.
	OpCreateFailed Op = "create_failed"
	// OpRemoved records a removal by id (or that the id was already gone).
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
	Seq    int               `json:"seq"`
	Time   time.Time         `json:"time"`
	Op     Op                `json:"op"`
	Kind   Kind              `json:"kind,omitempty"`
	Role   string            `json:"role,omitempty"`
	Name   string            `json:"name,omitempty"`
	ID     string            `json:"id,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	Note   string            `json:"note,omitempty"`
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
	Kind   Kind
	Role   string
	Name   string
	ID     string // empty when the create's outcome was never recorded
	Labels map[string]string
	// Removed is true once a removal was recorded.
	Removed bool
}

// Resources folds records into the resources they describe, in intent
// order: every intent, the id its create returned, and whether it was
// removed.
func Resources(recs []Record) []Resource {
	var out []Resource
	byName := map[string]int{}
	for _, r := range recs {
		key := string(r.Kind) + "/" + r.Name
		switch r.Op {
		case OpIntent:
			if _, ok := byName[key]; !ok {
				byName[key] = len(out)
				out = append(out, Resource{Kind: r.Kind, Role: r.Role, Name: r.Name, Labels: r.Labels})
			}
		case OpCreated:
			if i, ok := byName[key]; ok {
				out[i].ID = r.ID
			}
		case OpRemoved:
			for i := range out {
				if out[i].Kind == r.Kind && (r.ID != "" && out[i].ID == r.ID || r.ID == "" && out[i].Name == r.Name) {
					out[i].Removed = true
				}
			}
		}
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
