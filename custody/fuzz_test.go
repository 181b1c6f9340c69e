package custody_test

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/custody"
	"github.com/agentpen/agentpen/internal/custodytest"
)

// memFiles are a campaign's files in memory (custody.Files).
type memFiles map[string][]byte

func (m memFiles) ReadFile(name string, max int64) ([]byte, error) {
	b, ok := m[name]
	if !ok {
		return nil, fs.ErrNotExist
	}
	return b, nil
}

// FuzzVerifyJournal: whatever the journal holds, Verify never panics, and
// it verifies only the journal the reports were signed over, followed by
// nothing but whole lines of notes (which no statement covers, and which
// nothing reads back).
func FuzzVerifyJournal(f *testing.F) {
	dir, key := custodytest.Campaign(f, filepath.Join(f.TempDir(), "state"), lifecycle{})
	files := memFiles{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			f.Fatal(err)
		}
		files[e.Name()] = b
	}
	orig := files[campaign.JournalFile]
	if !custody.Verify(context.Background(), files, pubOf(key), custody.Options{}).OK {
		f.Fatal("the fixture does not verify")
	}
	lines := bytes.SplitAfter(orig, []byte("\n"))
	f.Add(orig)
	f.Add(bytes.Join(append(append([][]byte{}, lines[:2]...), lines[3:]...), nil))
	f.Add(append(bytes.Clone(orig), []byte(`{"v":2,"seq":10,"time":"2026-01-01T00:00:00Z","op":"note","note":"x"}`+"\n")...))
	f.Add(append(bytes.Clone(orig), []byte(`{"v":2,"seq":10,"time":"2026-01-01T00:00:00Z","op":"expiring","gen":1,"reason":"ttl","deadline":"2026-01-01T00:01:00Z"}`+"\n")...))
	f.Add(orig[:len(orig)-1])
	f.Fuzz(func(t *testing.T, journal []byte) {
		m := memFiles{}
		for k, v := range files {
			m[k] = v
		}
		m[campaign.JournalFile] = journal
		res := custody.Verify(context.Background(), m, pubOf(key), custody.Options{})
		if !res.OK {
			return
		}
		if !bytes.HasPrefix(journal, orig) {
			t.Fatalf("verified a journal that is not the signed one:\n%s", journal)
		}
		rest := journal[len(orig):]
		jc, err := campaign.ParseJournal("j", bytes.NewReader(journal))
		if err != nil || jc.Torn != nil {
			t.Fatalf("verified a journal that does not parse whole: %v %v", err, jc.Torn)
		}
		for _, r := range jc.Records[len(jc.Records)-bytes.Count(rest, []byte("\n")):] {
			if r.Op != campaign.OpNote && r.Op != campaign.OpExpiring {
				t.Fatalf("verified a journal whose unsigned tail holds a %s record", r.Op)
			}
		}
	})
}
