package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentpen/agentpen/workbench/results"
)

// ResultsFile is the campaign's episode results: one Result per line,
// appended as they are collected from the workspaces, never rewritten,
// kept when the campaign is removed.
const ResultsFile = "results.jsonl"

// maxResults bounds what Results reads of the file (about a million
// episodes).
const maxResults = 1 << 30

// Result is an episode's record as the campaign keeps it: the
// workbench's record, the workspace it came from and where collection
// of that workspace's results file resumes after it.
type Result struct {
	// Generation is the bring-up the workspace belonged to.
	Generation int `json:"generation"`
	// Workspace is the workspace's index in the campaign.
	Workspace int `json:"workspace"`
	// AgentID is the workspace's agent id.
	AgentID string `json:"agent_id"`
	results.Record
	// SourceEnd is the offset in the workspace's results file just past
	// the lines collected with this record (collection resumes there).
	SourceEnd int64 `json:"source_end"`
	// CollectedAt is when agentpen collected it.
	CollectedAt time.Time `json:"collected_at"`
	// Attestation is the SHA-256 (hex) of the signed attestation report
	// that covered the workspace when the result was collected (the
	// campaign's, or its pool slot's refill's; a report file in the
	// campaign's state directory, recorded in its journal): the record of
	// the runtime (its fingerprint) the episode ran on. Empty when none
	// had passed, or a later one failed.
	Attestation string `json:"attestation,omitempty" doc:"SHA-256 (hex) of the signed attestation report that covered the workspace when the result was collected (the campaign's, or its pool slot's refill's; the journal names its file): the runtime fingerprint the episode ran on; empty when none had passed, or a later one failed"`
}

// ResultsLog is the campaign's results file held open and locked (an
// exclusive flock) by one collector, so two processes collecting the same
// campaign never both append what they read.
type ResultsLog struct {
	f *os.File
}

// OpenResultsLog opens the campaign's results file for collecting
// (created 0600 when missing) and waits for its lock. Close it.
func (c *Campaign) OpenResultsLog() (*ResultsLog, error) {
	f, err := c.dir.OpenFile(ResultsFile, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return &ResultsLog{f: f}, nil
}

// Size is the file's size.
func (l *ResultsLog) Size() (int64, error) {
	fi, err := l.f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// Source names one workspace's results file: a generation's workspace.
type Source struct{ Generation, Workspace int }

// Offsets returns, for each workspace results were collected from, the
// offset in its results file just past the last one collected.
func (l *ResultsLog) Offsets() (map[Source]int64, error) {
	rs, err := parseResults(l.f.Name(), readAll(l.f))
	if err != nil {
		return nil, err
	}
	out := map[Source]int64{}
	for _, r := range rs {
		k := Source{r.Generation, r.Workspace}
		out[k] = max(out[k], r.SourceEnd)
	}
	return out, nil
}

// Append appends rs in one write and syncs the file.
func (l *ResultsLog) Append(rs []Result) error {
	if len(rs) == 0 {
		return nil
	}
	var buf bytes.Buffer
	for _, r := range rs {
		if err := r.Check(); err != nil {
			return fmt.Errorf("result of episode %q: %w", r.EpisodeID, err)
		}
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		buf.Write(append(b, '\n'))
	}
	if _, err := l.f.Write(buf.Bytes()); err != nil {
		return err
	}
	return l.f.Sync()
}

// Close releases the lock and closes the file.
func (l *ResultsLog) Close() error { return l.f.Close() }

func readAll(f *os.File) func() ([]byte, error) {
	return func() ([]byte, error) {
		fi, err := f.Stat()
		if err != nil {
			return nil, err
		}
		if fi.Size() > maxResults {
			return nil, fmt.Errorf("%s: %d bytes, more than %d", f.Name(), fi.Size(), maxResults)
		}
		b := make([]byte, fi.Size())
		n, err := f.ReadAt(b, 0)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		return b[:n], nil
	}
}

// Results reads the campaign's results, oldest first; none when nothing
// was collected. A final line without its newline (a write cut short) is
// ignored.
func (c *Campaign) Results() ([]Result, error) {
	return parseResults(c.dir.Join(ResultsFile), func() ([]byte, error) {
		b, err := c.dir.ReadFile(ResultsFile, maxResults)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return b, err
	})
}

// parseResults parses the lines read returns, ignoring a final line
// without its newline.
func parseResults(name string, read func() ([]byte, error)) ([]Result, error) {
	b, err := read()
	if err != nil {
		return nil, err
	}
	var rs []Result
	for n := 1; len(b) > 0; n++ {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			break
		}
		var r Result
		if err := json.Unmarshal(b[:i], &r); err != nil {
			return rs, fmt.Errorf("%s line %d: %w", name, n, err)
		}
		rs = append(rs, r)
		b = b[i+1:]
	}
	return rs, nil
}
