package custody

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"

	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/store"
)

// Files are a campaign's files, each read by its name in the campaign's
// directory without following a link: a *store.Campaign, or a copy of
// its directory (*beneath.Dir).
type Files interface {
	ReadFile(name string, max int64) ([]byte, error)
}

// maxJournalBytes bounds a journal read whole (one of a 256-workspace
// campaign is well under a megabyte per generation).
const maxJournalBytes = 1 << 30

// Seal signs, with key, the statement whose predicate is the report f of
// kind (written by store.Campaign.WriteReport; predicate is its content,
// or the value it encodes) about the campaign's files: the report itself,
// its generation's spec and bring-up daemon record, the journal as it is
// now, and extra (an attestation's images, the attestation a cleanup
// follows). It returns the envelope for store.Campaign.WriteEnvelope. The
// caller holds the campaign's lock and journals the report, with the
// envelope's digest, as the journal's very next record.
func Seal[P any](ctx context.Context, files Files, key ed25519.PrivateKey, kind Kind, f store.ReportFile, predicate P, extra ...Subject) ([]byte, error) {
	if f.Digest == "" {
		return nil, fmt.Errorf("seal %s: the report's digest is unknown", f.Name)
	}
	subs := []Subject{{Name: f.Name, Digest: map[string]string{"sha256": f.Digest}}}
	if f.Gen > 0 {
		b, err := files.ReadFile(store.SpecFile(f.Gen), maxFileBytes)
		if err != nil {
			return nil, fmt.Errorf("seal %s: %w", f.Name, err)
		}
		subs = append(subs, FileSubject(store.SpecFile(f.Gen), b))
		b, err = files.ReadFile(store.DaemonFile(f.Gen), maxFileBytes)
		switch {
		case err == nil:
			subs = append(subs, FileSubject(store.DaemonFile(f.Gen), b))
		case !errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("seal %s: %w", f.Name, err)
		}
	}
	b, err := files.ReadFile(campaign.JournalFile, maxJournalBytes)
	if err != nil {
		return nil, fmt.Errorf("seal %s: %w", f.Name, err)
	}
	subs = append(subs, journalSubject(b, bytes.Count(b, []byte{'\n'})))
	subs = append(subs, extra...)
	return Sign(ctx, key, NewStatement(kind.PredicateType, predicate, subs...))
}

// WriteReport writes a report of kind for generation gen as a new file
// of the campaign (store.Campaign.WriteReport), and its statement (Seal:
// about the campaign's files and extra, its predicate the report's JSON)
// signed with key beside it (store.Campaign.WriteEnvelope). It returns
// the report's file and the envelope's digest for the journal record the
// caller appends at once, holding the campaign's lock: nothing may come
// between, since the statement covers the journal as it is.
func WriteReport(ctx context.Context, c *store.Campaign, key ed25519.PrivateKey, kind Kind, gen int, data []byte, extra ...Subject) (store.ReportFile, string, error) {
	f, err := c.WriteReport(kind.Name, gen, data)
	if err != nil {
		return f, "", err
	}
	env, err := Seal(ctx, c, key, kind, f, json.RawMessage(data), extra...)
	if err != nil {
		return f, "", err
	}
	envDigest, err := c.WriteEnvelope(f, env)
	return f, envDigest, err
}

// maxFileBytes bounds a campaign's file (a spec, a report) read whole.
const maxFileBytes = store.MaxReportBytes

// journalSubject names the journal's first n complete lines (the journal
// as it was when it had n records).
func journalSubject(journal []byte, n int) Subject {
	s := FileSubject(campaign.JournalFile, journal[:lineEnd(journal, n)])
	s.Annotations = map[string]any{AnnotationRecords: n}
	return s
}

// lineEnd is the offset just past the n-th newline of b (len(b) when b
// has fewer; 0 for n 0).
func lineEnd(b []byte, n int) int {
	off := 0
	for range n {
		i := bytes.IndexByte(b[off:], '\n')
		if i < 0 {
			return len(b)
		}
		off += i + 1
	}
	return off
}

// ImageSubjects are the images an attestation found its containers
// running, each by its image id (one that is not sha256:<hex> names no
// digest, and is left to the report).
func ImageSubjects(rep *attest.Report) []Subject {
	var out []Subject
	for _, im := range rep.Images {
		if s, err := ImageSubject(im.Reference, im.ID, im.Containers); err == nil {
			out = append(out, s)
		}
	}
	return out
}

// Followed is the attestation a cleanup of generation gen follows: the
// last one of that generation the records journal (ok false for none: a
// generation removed before it was attested).
func Followed(recs []campaign.Record, gen int) (campaign.Record, bool) {
	for i := len(recs) - 1; i >= 0; i-- {
		if r := recs[i]; r.Op == campaign.OpAttested && r.Gen == gen && r.Report != "" {
			return r, true
		}
	}
	return campaign.Record{}, false
}

// FollowedSubject names the attestation a cleanup of generation gen
// follows (Followed), by the digest its journal recorded; ok false for
// none.
func FollowedSubject(recs []campaign.Record, gen int) (Subject, bool) {
	r, ok := Followed(recs, gen)
	if !ok {
		return Subject{}, false
	}
	return Subject{Name: r.Report, Digest: map[string]string{"sha256": r.Digest}}, true
}
