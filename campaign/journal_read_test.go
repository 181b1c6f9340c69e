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

// jtext builds a journal's text as a writer would have written it, each
// record chained to the line before it, with whatever damage a case
// inserts.
type jtext struct{ b strings.Builder }

// last is the hash of the text's last complete line ("" for none).
func (j *jtext) last() string {
	t := strings.TrimSuffix(j.b.String(), "\n")
	if len(t) == len(j.b.String()) && t != "" {
		// ends in a torn line: the chain goes on from the line before
		t = t[:max(0, strings.LastIndexByte(t, '\n'))]
	}
	if i := strings.LastIndexByte(t, '\n'); i >= 0 {
		t = t[i+1:]
	}
	if t == "" {
		return ""
	}
	return lineHash([]byte(t))
}

// rec appends a record of seq and op, chained to the last line.
func (j *jtext) rec(seq int, op string) *jtext {
	j.b.WriteString(recLine(seq, op, j.last()))
	return j
}

// raw appends text as it is.
func (j *jtext) raw(s string) *jtext { j.b.WriteString(s); return j }

func (j *jtext) String() string { return j.b.String() }

// recLine is one journal line of seq and op chained to prev.
func recLine(seq int, op, prev string) string {
	p := ""
	if prev != "" {
		p = `,"prev":"` + prev + `"`
	}
	return `{"v":2,"seq":` + strconv.Itoa(seq) + p + `,"time":"2026-11-30T12:00:00Z","op":"` + op + `","gen":1}` + "\n"
}

func text() *jtext { return &jtext{} }

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
	{name: "whole", text: text().rec(1, "begin").rec(2, "intent").String(), records: 2},
	{name: "torn_tail", text: text().rec(1, "begin").raw(`{"seq":2,"op":"crea`).String(), records: 1, torn: 19},
	{name: "torn_first_line", text: `{"seq":1,"op":"beg`, torn: 18},
	{name: "torn_tail_of_nuls", text: text().rec(1, "begin").raw("\x00\x00\x00\x00").String(), records: 1, torn: 4},
	{name: "torn_tail_30_bytes_short", text: func() string {
		whole := text().rec(1, "begin").rec(2, "intent").String()
		return whole[:len(whole)-30]
	}(), records: 1, torn: int64(len(recLine(2, "intent", lineHash([]byte(strings.TrimSuffix(recLine(1, "begin", ""), "\n"))))) - 30)},
	{name: "garbage_line", text: text().rec(1, "begin").raw("{bad}\n").rec(2, "intent").String(), records: 2, badLine: 2, badReason: "invalid character"},
	{name: "torn_then_appended", text: text().rec(1, "begin").raw(`{"seq":2,"op":"crea`).rec(2, "note").String(), records: 1, badLine: 2, badReason: "invalid character"},
	{name: "null_line", text: text().raw("null\n").rec(1, "begin").String(), records: 1, badLine: 1, badReason: "not a JSON object"},
	{name: "object_not_record", text: text().rec(1, "begin").raw(`{"v":2}` + "\n").String(), records: 1, badLine: 2, badReason: "not a journal record"},
	{name: "empty_line", text: text().rec(1, "begin").raw("\n").rec(2, "intent").String(), records: 2, badLine: 2, badReason: "not a JSON object"},
	{name: "trailing_garbage", text: strings.TrimSuffix(recLine(1, "begin", ""), "\n") + "xyz\n", badLine: 1, badReason: "invalid character"},
	{name: "huge_line", text: text().rec(1, "begin").raw(strings.Repeat("a", MaxRecordBytes+10)+"\n").rec(2, "intent").String(), records: 2, badLine: 2, badReason: "longer than a record can be"},
	{name: "huge_torn_tail", text: text().rec(1, "begin").raw(strings.Repeat("a", MaxRecordBytes+10)).String(), records: 1, torn: MaxRecordBytes + 10},
	{name: "unknown_op", text: text().rec(1, "begin").rec(2, "bogus").rec(3, "note").String(), records: 2, badLine: 2, badReason: `unknown op "bogus"`},
	{name: "unknown_kind", text: text().rec(1, "begin").raw(`{"v":2,"seq":2,"op":"created","kind":"volume","id":"x"}` + "\n").String(), records: 1, badLine: 2, badReason: `unknown kind "volume"`},
	{name: "two_bad_lines", text: text().raw("x\n").rec(1, "begin").raw("y\n").String(), records: 1, badLine: 1, badReason: "not a JSON object"},
	{name: "older_format", text: `{"seq":1,"time":"2026-11-30T12:00:00Z","op":"begin","gen":1}` + "\n", badLine: 1, badReason: "journal format 0, not 2"},
	{name: "record_dropped", text: text().rec(1, "begin").rec(3, "intent").String(), records: 1, badLine: 2, badReason: "record 3 follows record 1"},
	{name: "record_edited", text: func() string {
		t := text().rec(1, "begin").rec(2, "intent").rec(3, "note").String()
		return strings.Replace(t, `"op":"intent"`, `"op":"created"`, 1)
	}(), records: 2, badLine: 3, badReason: "record 3 does not follow the line before it"},
	{name: "records_swapped", text: func() string {
		lines := strings.SplitAfter(text().rec(1, "begin").rec(2, "intent").rec(3, "note").String(), "\n")
		return lines[0] + lines[2] + lines[1]
	}(), records: 2, badLine: 2, badReason: "record 3 follows record 1"},
	{name: "unknown_verdict", text: text().rec(1, "begin").raw(`{"v":2,"seq":2,"op":"attested","status":"maybe"}` + "\n").String(), records: 1, badLine: 2, badReason: `attestation verdict "maybe"`},
	{name: "begin_images", text: text().raw(`{"v":2,"seq":1,"op":"begin","gen":1,"images":{"agentpen/workbench:dev":"sha256:` + strings.Repeat("a", 64) + `"}}` + "\n").String(), records: 1},
	{name: "begin_image_not_an_id", text: text().raw(`{"v":2,"seq":1,"op":"begin","gen":1,"images":{"agentpen/workbench:dev":"agentpen/workbench:other"}}` + "\n").String(), badLine: 1, badReason: `image "agentpen/workbench:dev" pinned as "agentpen/workbench:other"`},
	{name: "begin_image_pin_pinned", text: text().raw(`{"v":2,"seq":1,"op":"begin","gen":1,"images":{"sha256:` + strings.Repeat("b", 64) + `":"sha256:` + strings.Repeat("a", 64) + `"}}` + "\n").String(), badLine: 1, badReason: "not a tag and an image id"},
	{name: "begin_owner", text: text().raw(`{"v":2,"seq":1,"op":"begin","gen":1,"owner":"team-a_2"}` + "\n").String(), records: 1},
	{name: "begin_owner_not_a_name", text: text().raw(`{"v":2,"seq":1,"op":"begin","gen":1,"owner":"Team A"}` + "\n").String(), badLine: 1, badReason: "its owner is not a launcher's name"},
	{name: "begin_owner_too_long", text: text().raw(`{"v":2,"seq":1,"op":"begin","gen":1,"owner":"` + strings.Repeat("a", 65) + `"}` + "\n").String(), badLine: 1, badReason: "its owner is not a launcher's name"},
	{name: "lifetime_negative", text: text().raw(`{"v":2,"seq":1,"op":"lifetime","gen":1,"accepted":"2026-11-30T12:00:00Z","ttl_seconds":-20}` + "\n").String(), badLine: 1, badReason: "lifetime of generation 1"},
	{name: "lifetime_unaccepted", text: text().raw(`{"v":2,"seq":1,"op":"lifetime","gen":1,"ttl_seconds":20}` + "\n").String(), badLine: 1, badReason: "lifetime of generation 1"},
	{name: "lifetime_ok", text: text().raw(`{"v":2,"seq":1,"op":"lifetime","gen":1,"accepted":"2026-11-30T12:00:00Z","ttl_seconds":20,"idle_timeout_seconds":5}` + "\n").String(), records: 1},
	{name: "removal_reason_ttl", text: text().raw(`{"v":2,"seq":1,"op":"removal_started","reason":"ttl"}` + "\n").String(), records: 1},
	{name: "removal_reason_launcher_gone", text: text().raw(`{"v":2,"seq":1,"op":"removal_started","reason":"launcher_gone"}` + "\n").String(), records: 1},
	{name: "lifetime_launcher", text: text().raw(`{"v":2,"seq":1,"op":"lifetime","gen":1,"accepted":"2026-11-30T12:00:00Z","launcher_timeout_seconds":30}` + "\n").String(), records: 1},
	{name: "lifetime_launcher_negative", text: text().raw(`{"v":2,"seq":1,"op":"lifetime","gen":1,"accepted":"2026-11-30T12:00:00Z","launcher_timeout_seconds":-1}` + "\n").String(), badLine: 1, badReason: "launcher timeout -1 s"},
	{name: "expiring_ok", text: text().raw(`{"v":2,"seq":1,"op":"expiring","gen":1,"reason":"ttl","deadline":"2026-11-30T12:00:00Z"}` + "\n").String(), records: 1},
	{name: "expiring_no_deadline", text: text().raw(`{"v":2,"seq":1,"op":"expiring","gen":1,"reason":"idle"}` + "\n").String(), badLine: 1, badReason: "expiring warning of generation 1"},
	{name: "expiring_not_a_lifetime_reason", text: text().raw(`{"v":2,"seq":1,"op":"expiring","gen":1,"reason":"delete","deadline":"2026-11-30T12:00:00Z"}` + "\n").String(), badLine: 1, badReason: `reason "delete"`},
	{name: "unknown_removal_reason", text: text().rec(1, "begin").raw(`{"v":2,"seq":2,"op":"removal_started","reason":"whim"}` + "\n").String(), records: 1, badLine: 2, badReason: `removal reason "whim"`},
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
			c, err := loadJournalPath(path)
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
	whole := text().rec(1, "begin").rec(2, "intent").String()
	path := writeJournal(t, text().raw(whole).rec(3, "created").String()[:len(whole)+20])
	j, err := openJournalDir(filepath.Dir(path))
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
	c, err := loadJournalPath(path)
	if err != nil || c.Torn != nil || len(c.Records) != 4 {
		t.Fatalf("after the cut: %v, torn %v, %d records", err, c.Torn, len(c.Records))
	}
	note, last := c.Records[2], c.Records[3]
	if note.Op != OpNote || note.Seq != 3 || !strings.Contains(note.Note, "cut a final line of 20 bytes without its newline") || !strings.Contains(note.Note, `{\"v\":2,\"seq\":3`) {
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
	bad := text().rec(1, "begin").raw("{bad}\n").rec(2, "intent").String()
	path := writeJournal(t, bad)
	if _, err := openJournalDir(filepath.Dir(path)); !errors.Is(err, ErrJournalCorrupt) {
		t.Fatalf("OpenJournal of a corrupt journal: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != bad {
		t.Fatalf("the corrupt journal was changed:\n%s", b)
	}
}

// TestJournalTrust: a journal another user owns or can write is refused,
// naming the path and the fix (the store checks the directories).
func TestJournalTrust(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "c")
	j, err := openJournalDir(dir)
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
		{"journal_foreign", func() error { return os.Lchown(path, 65534, 65534) }, "journal " + path + " is owned by uid 65534, not by this user (uid 0)"},
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
			_, rerr := loadJournalPath(path)
			_, oerr := openJournalDir(dir)
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
	if _, err := loadJournalPath(path); err != nil {
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
		c, err := loadJournalPath(path)
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
		j, oerr := openJournalDir(filepath.Dir(path))
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
		after, err := loadJournalPath(path)
		want := len(c.Records) + 1
		if c.Torn != nil {
			want++ // the cut's note
		}
		if err != nil || after.Torn != nil || len(after.Records) != want || after.Records[want-1].Note != "after" {
			t.Fatalf("after open and append: %v, torn %v, %d records, want %d", err, after.Torn, len(after.Records), want)
		}
	})
}
