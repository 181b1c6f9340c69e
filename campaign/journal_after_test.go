package campaign

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

// readAfter reads the journal at path as ReadJournalAfter does from prev.
func readAfter(t *testing.T, path string, prev JournalContents) (JournalContents, error) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return ReadJournalAfter(f, path, prev)
}

// appendText appends s to the file at path.
func appendText(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// sameRead fails unless got and want read the same records, torn tail
// and error.
func sameRead(t *testing.T, what string, got JournalContents, gerr error, want JournalContents, werr error) {
	t.Helper()
	if fmt.Sprint(gerr) != fmt.Sprint(werr) {
		t.Fatalf("%s: err %v, a read from the start says %v", what, gerr, werr)
	}
	if !reflect.DeepEqual(got.Records, want.Records) || !reflect.DeepEqual(got.Torn, want.Torn) {
		t.Fatalf("%s: %d records (torn %+v), a read from the start: %d (torn %+v)", what, len(got.Records), got.Torn, len(want.Records), want.Torn)
	}
}

// TestReadJournalAfterAgreesWithAFullRead: every journal text of
// journalCases (and one grown by more records), written up to any
// offset, read, then written to its end (another writer's appends, a
// torn line completed, damage appended), reads after the first read as
// it reads from the start: the same records, torn tail and error (its
// line numbers too).
func TestReadJournalAfterAgreesWithAFullRead(t *testing.T) {
	cases := append(journalCases[:len(journalCases):len(journalCases)], struct {
		name      string
		text      string
		records   int
		torn      int64
		badLine   int
		badReason string
	}{name: "grown", text: text().rec(1, "begin").rec(2, "intent").rec(3, "created").rec(4, "ready").raw(recLine(4, "note", "x")).String()})
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			var cuts []int
			if len(tt.text) < 4096 {
				for k := range len(tt.text) + 1 {
					cuts = append(cuts, k)
				}
			} else { // the huge lines: at each line's end
				for k := range len(tt.text) {
					if tt.text[k] == '\n' {
						cuts = append(cuts, k+1)
					}
				}
			}
			for _, k := range cuts {
				path := writeJournal(t, tt.text[:k])
				prev, _ := loadJournalPath(path)
				appendText(t, path, tt.text[k:])
				got, gerr := readAfter(t, path, prev)
				want, werr := loadJournalPath(path)
				sameRead(t, fmt.Sprintf("read at %d of %d bytes, then after", k, len(tt.text)), got, gerr, want, werr)
				// Read after again, nothing appended: the same.
				again, aerr := readAfter(t, path, got)
				sameRead(t, fmt.Sprintf("read at %d of %d bytes, after, and after again", k, len(tt.text)), again, aerr, want, werr)
				if again.ReadOn() != (gerr == nil) {
					t.Fatalf("read at %d of %d bytes, after, and after again: read on %v after a read with error %v", k, len(tt.text), again.ReadOn(), gerr)
				}
			}
		})
	}
}

// TestReadJournalAfterRereadsAChangedFile: a journal that is not the one
// read before with lines appended is read from its start: another file
// put in its place (a campaign removed and made again), its last line
// read rewritten and the file grown, or a line edited in place (its
// length kept, written later). Each says what a read from the start says.
func TestReadJournalAfterRereadsAChangedFile(t *testing.T) {
	whole := text().rec(1, "begin").rec(2, "intent").String()
	t.Run("another file", func(t *testing.T) {
		path := writeJournal(t, whole)
		prev, err := loadJournalPath(path)
		if err != nil {
			t.Fatal(err)
		}
		other := text().rec(1, "begin").rec(2, "note").rec(3, "orphan").String()
		tmp := filepath.Join(filepath.Dir(path), "new")
		if err := os.WriteFile(tmp, []byte(other), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
		got, gerr := readAfter(t, path, prev)
		want, werr := loadJournalPath(path)
		sameRead(t, "another file", got, gerr, want, werr)
		if got.ReadOn() {
			t.Fatalf("%s: read on from the earlier read", "another file")
		}
		if len(got.Records) != 3 || got.Records[1].Op != OpNote {
			t.Fatalf("another file: %+v", got.Records)
		}
	})
	t.Run("last line rewritten and grown", func(t *testing.T) {
		path := writeJournal(t, whole)
		prev, err := loadJournalPath(path)
		if err != nil {
			t.Fatal(err)
		}
		edited := strings.Replace(whole, `"op":"intent"`, `"op":"orphan"`, 1) + recLine(3, "note", "x")
		if err := os.WriteFile(path, []byte(edited), 0o600); err != nil {
			t.Fatal(err)
		}
		got, gerr := readAfter(t, path, prev)
		want, werr := loadJournalPath(path)
		sameRead(t, "rewritten", got, gerr, want, werr)
		if got.ReadOn() {
			t.Fatalf("%s: read on from the earlier read", "rewritten")
		}
		if gerr == nil || got.Records[1].Op != OpOrphan {
			t.Fatalf("rewritten: %v, %+v: want the edited record and the broken chain after it", gerr, got.Records)
		}
	})
	t.Run("edited in place", func(t *testing.T) {
		path := writeJournal(t, whole)
		prev, err := loadJournalPath(path)
		if err != nil {
			t.Fatal(err)
		}
		edited := strings.Replace(whole, `"op":"begin"`, `"op":"ready"`, 1)
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte(edited), 0); err != nil {
			t.Fatal(err)
		}
		f.Close()
		later := prev.FileInfo().ModTime().Add(time.Second)
		if err := os.Chtimes(path, later, later); err != nil {
			t.Fatal(err)
		}
		got, gerr := readAfter(t, path, prev)
		want, werr := loadJournalPath(path)
		sameRead(t, "edited in place", got, gerr, want, werr)
		if got.ReadOn() {
			t.Fatalf("%s: read on from the earlier read", "edited in place")
		}
		if gerr == nil {
			t.Fatalf("edited in place: no error, records %+v", got.Records)
		}
	})
}
