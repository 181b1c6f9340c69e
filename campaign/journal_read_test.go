package campaign

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

// rec is one well-formed journal line.
func rec(seq int, op string) string {
	return `{"seq":` + strconv.Itoa(seq) + `,"time":"2026-11-30T12:00:00Z","op":"` + op + `","gen":1}` + "\n"
}

// journalCases are journal texts as a crash, a full disk or damage leave
// them, with what reading must find: the records, a torn tail (its size),
// or corruption at a line. They seed FuzzJournal.
var journalCases = []struct {
	name      string
	text      string
	records   int
	torn      int64 // size of the torn final line; 0 for none
	badLine   int   // first corrupt line; 0 for none
	badReason string
}{
	{name: "empty", text: ""},
	{name: "whole", text: rec(1, "begin") + rec(2, "intent"), records: 2},
	{name: "torn_tail", text: rec(1, "begin") + `{"seq":2,"op":"crea`, records: 1, torn: 19},
	{name: "torn_first_line", text: `{"seq":1,"op":"beg`, torn: 18},
	{name: "torn_tail_of_nuls", text: rec(1, "begin") + "\x00\x00\x00\x00", records: 1, torn: 4},
	{name: "torn_tail_30_bytes_short", text: rec(1, "begin") + rec(2, "intent")[:len(rec(2, "intent"))-30], records: 1, torn: int64(len(rec(2, "intent")) - 30)},
	{name: "garbage_line", text: rec(1, "begin") + "{bad}\n" + rec(2, "intent"), records: 2, badLine: 2, badReason: "invalid character"},
	{name: "torn_then_appended", text: rec(1, "begin") + `{"seq":2,"op":"crea` + rec(2, "note"), records: 1, badLine: 2, badReason: "invalid character"},
	{name: "null_line", text: "null\n" + rec(1, "begin"), records: 1, badLine: 1, badReason: "not a JSON object"},
	{name: "object_not_record", text: rec(1, "begin") + "{}\n", records: 1, badLine: 2, badReason: "not a journal record"},
	{name: "empty_line", text: rec(1, "begin") + "\n" + rec(2, "intent"), records: 2, badLine: 2, badReason: "not a JSON object"},
	{name: "trailing_garbage", text: strings.TrimSuffix(rec(1, "begin"), "\n") + "xyz\n", badLine: 1, badReason: "invalid character"},
	{name: "huge_line", text: rec(1, "begin") + strings.Repeat("a", MaxRecordBytes+10) + "\n" + rec(2, "intent"), records: 2, badLine: 2, badReason: "longer than a record can be"},
	{name: "huge_torn_tail", text: rec(1, "begin") + strings.Repeat("a", MaxRecordBytes+10), records: 1, torn: MaxRecordBytes + 10},
	{name: "unknown_op", text: rec(1, "begin") + rec(2, "bogus") + rec(3, "note"), records: 2, badLine: 2, badReason: `unknown op "bogus"`},
	{name: "unknown_kind", text: rec(1, "begin") + `{"seq":2,"op":"created","kind":"volume","id":"x"}` + "\n", records: 1, badLine: 2, badReason: `unknown kind "volume"`},
	{name: "two_bad_lines", text: "x\n" + rec(1, "begin") + "y\n", records: 1, badLine: 1, badReason: "not a JSON object"},
}

func writeJournal(t *testing.T, text string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "c")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, JournalFile)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadJournal(t *testing.T) {
	for _, tt := range journalCases {
		t.Run(tt.name, func(t *testing.T) {
			path := writeJournal(t, tt.text)
			c, err := LoadJournal(path)
			if len(c.Records) != tt.records {
				t.Errorf("%d records, want %d", len(c.Records), tt.records)
			}
			switch {
			case tt.torn == 0 && c.Torn != nil:
				t.Errorf("torn tail %v, want none", c.Torn)
			case tt.torn != 0 && (c.Torn == nil || c.Torn.Size != tt.torn || c.Torn.Offset+c.Torn.Size != int64(len(tt.text))):
				t.Errorf("torn tail %+v, want %d bytes at the end", c.Torn, tt.torn)
			}
			if tt.badLine == 0 {
				if err != nil {
					t.Fatalf("err %v, want none", err)
				}
				return
			}
			var ce *CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, ErrJournalCorrupt) || ce.Line != tt.badLine || ce.Path != path ||
				!strings.Contains(err.Error(), tt.badReason) || !strings.Contains(err.Error(), path+" line "+strconv.Itoa(tt.badLine)) {
				t.Fatalf("err %v, want a corrupt line %d of %s (%s)", err, tt.badLine, path, tt.badReason)
			}
		})
	}
}

// TestOpenJournalCutsTornTail: a write that did not complete is cut
// before the next append (which used to land on the torn line and make
// the whole journal unreadable), and the cut is recorded.
func TestOpenJournalCutsTornTail(t *testing.T) {
	whole := rec(1, "begin") + rec(2, "intent")
	path := writeJournal(t, whole+rec(3, "created")[:20])
	j, err := OpenJournal(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if j.Cut() == nil || j.Cut().Offset != int64(len(whole)) || j.Cut().Size != 20 {
		t.Fatalf("Cut() = %+v, want the 20 bytes after offset %d", j.Cut(), len(whole))
	}
	if err := j.Append(Record{Op: OpRemoved, Kind: KindContainer, ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	c, err := LoadJournal(path)
	if err != nil || c.Torn != nil || len(c.Records) != 4 {
		t.Fatalf("after the cut: %v, torn %v, %d records", err, c.Torn, len(c.Records))
	}
	note, last := c.Records[2], c.Records[3]
	if note.Op != OpNote || note.Seq != 3 || !strings.Contains(note.Note, "cut a final line of 20 bytes without its newline") || !strings.Contains(note.Note, `{\"seq\":3`) {
		t.Fatalf("the cut's note: %+v", note)
	}
	if last.Op != OpRemoved || last.Seq != 4 {
		t.Fatalf("the append after the cut: %+v", last)
	}
	b, _ := os.ReadFile(path)
	if !bytes.HasPrefix(b, []byte(whole)) || bytes.Count(b, []byte("\n")) != 4 {
		t.Fatalf("journal after the cut:\n%s", b)
	}
}

// TestOpenJournalRefusesCorrupt: a journal with a corrupt complete line is
// not appended to, and is left as it was.
func TestOpenJournalRefusesCorrupt(t *testing.T) {
	text := rec(1, "begin") + "{bad}\n" + rec(2, "intent")
	path := writeJournal(t, text)
	if _, err := OpenJournal(filepath.Dir(path)); !errors.Is(err, ErrJournalCorrupt) {
		t.Fatalf("OpenJournal of a corrupt journal: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != text {
		t.Fatalf("the corrupt journal was changed:\n%s", b)
	}
}

// TestJournalTrust: a journal or campaign directory another user owns or
// can write is refused, naming the path and the fix; agentpen makes both
// private.
func TestJournalTrust(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "c")
	j, err := OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	j.Append(Record{Op: OpBegin, Gen: 1})
	j.Close()
	path := filepath.Join(dir, JournalFile)
	for p, want := range map[string]os.FileMode{dir: 0o700, filepath.Dir(dir): 0o700, path: 0o600} {
		if fi, _ := os.Stat(p); fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode().Perm(), want)
		}
	}
	tests := []struct {
		name  string
		spoil func() error
		want  string
	}{
		{"journal_writable", func() error { return os.Chmod(path, 0o666) }, "journal " + path + " has mode 0666: other users can write it; agentpen trusts no state another user can write; if it is yours: chmod 0600 " + path},
		{"dir_writable", func() error { return os.Chmod(dir, 0o777) }, "campaign directory " + dir + " has mode 0777: other users can write it; agentpen trusts no state another user can write; if it is yours: chmod 0700 " + dir},
		{"journal_foreign", func() error { return os.Lchown(path, 65534, 65534) }, "journal " + path + " is owned by uid 65534, not by this user (uid 0)"},
		{"dir_foreign", func() error { return os.Lchown(dir, 65534, 65534) }, "campaign directory " + dir + " is owned by uid 65534"},
		{"journal_symlink", func() error {
			os.Rename(path, path+".real")
			return os.Symlink(path+".real", path)
		}, "open"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if strings.HasSuffix(tt.name, "_foreign") {
				testenv.RequireRoot(t) // changing a file's owner
			}
			if err := tt.spoil(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSymlink != 0 {
					os.Remove(path)
					os.Rename(path+".real", path)
				}
				os.Chmod(path, 0o600)
				os.Chmod(dir, 0o700)
				os.Lchown(path, os.Geteuid(), os.Getegid())
				os.Lchown(dir, os.Geteuid(), os.Getegid())
			}()
			_, rerr := LoadJournal(path)
			_, oerr := OpenJournal(dir)
			for _, err := range []error{rerr, oerr} {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("err %v, want it to say %q", err, tt.want)
				}
				if tt.want != "open" && !errors.Is(err, ErrUntrusted) {
					t.Fatalf("err %v is not ErrUntrusted", err)
				}
			}
		})
	}
	if _, err := LoadJournal(path); err != nil {
		t.Fatalf("the restored journal: %v", err)
	}
}

// FuzzJournal: whatever the journal holds, reading never panics; a torn
// tail is exactly a final line without its newline; a journal with no
// corrupt line is opened, its tail cut, and appended to so that it reads
// back whole; a corrupt one is refused and left unchanged.
func FuzzJournal(f *testing.F) {
	for _, tt := range journalCases {
		f.Add([]byte(tt.text))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		path := writeJournal(t, string(data))
		c, err := LoadJournal(path)
		endsWhole := len(data) == 0 || data[len(data)-1] == '\n'
		if endsWhole != (c.Torn == nil) {
			t.Fatalf("torn %+v for a journal ending %q", c.Torn, data[max(0, len(data)-8):])
		}
		if c.Torn != nil {
			if c.Torn.Offset+c.Torn.Size != int64(len(data)) || (c.Torn.Offset > 0 && data[c.Torn.Offset-1] != '\n') ||
				bytes.IndexByte(data[c.Torn.Offset:], '\n') >= 0 {
				t.Fatalf("torn %+v is not the final line", c.Torn)
			}
		}
		if len(c.Records) > bytes.Count(data, []byte("\n")) {
			t.Fatalf("%d records from %d lines", len(c.Records), bytes.Count(data, []byte("\n")))
		}
		if err != nil && !errors.Is(err, ErrJournalCorrupt) {
			t.Fatalf("an error that is not corruption: %v", err)
		}
		j, oerr := OpenJournal(filepath.Dir(path))
		if err != nil {
			if !errors.Is(oerr, ErrJournalCorrupt) {
				t.Fatalf("OpenJournal of a corrupt journal: %v", oerr)
			}
			if b, _ := os.ReadFile(path); !bytes.Equal(b, data) {
				t.Fatal("a corrupt journal was changed")
			}
			return
		}
		if oerr != nil {
			t.Fatalf("OpenJournal: %v", oerr)
		}
		if err := j.Append(Record{Op: OpNote, Note: "after"}); err != nil {
			t.Fatal(err)
		}
		j.Close()
		after, err := LoadJournal(path)
		want := len(c.Records) + 1
		if c.Torn != nil {
			want++ // the cut's note
		}
		if err != nil || after.Torn != nil || len(after.Records) != want || after.Records[want-1].Note != "after" {
			t.Fatalf("after open and append: %v, torn %v, %d records, want %d", err, after.Torn, len(after.Records), want)
		}
	})
}
