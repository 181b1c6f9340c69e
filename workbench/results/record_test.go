package results

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func sample() Record {
	t0 := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	return Record{V: Version, EpisodeID: "e-1", TaskID: "logs/error_count@1", Domain: "logs", Reward: 0.9,
		Parts: Parts{Correctness: 1, Inspected: true, NoInvalid: true}, Steps: 4, End: EndSubmitted,
		StartedAt: t0, EndedAt: t0.Add(2 * time.Second)}
}

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	a, b := sample(), sample()
	b.EpisodeID, b.End, b.Reward, b.Parts = "e-2", EndAbandoned, 0, Parts{}
	for _, r := range []Record{a, b} {
		if err := Append(filepath.Join(dir, FileName), r); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	recs, next, refused, err := Read(f, 0)
	if err != nil || len(refused) != 0 || len(recs) != 2 || next != fi.Size() {
		t.Fatalf("Read: %v %v %d records, next %d of %d", err, refused, len(recs), next, fi.Size())
	}
	if recs[0] != a || recs[1] != b {
		t.Errorf("read back\n%+v\n%+v", recs[0], recs[1])
	}
	if recs, again, _, _ := Read(f, next); len(recs) != 0 || again != next {
		t.Errorf("a second read found %d records, next %d", len(recs), again)
	}
}

// TestErrorRecord: an episode voided by a grading error is recorded as
// such, with its reason, and read back; a reason outside Reasons is
// never written.
func TestErrorRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	r := sample()
	r.End, r.Reward, r.Parts, r.Reason = EndError, 0, Parts{}, ReasonCaseRun
	if err := Append(path, r); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, _, refused, err := Read(f, 0)
	if err != nil || len(refused) != 0 || len(recs) != 1 || recs[0] != r {
		t.Fatalf("read back %+v %v %v", recs, refused, err)
	}
	r.Reason = "the hidden inputs were [3, 1, 2]"
	if err := Append(path, r); err == nil {
		t.Fatal("a reason outside Reasons was written")
	}
	ok := sample()
	if b, _ := ok.Marshal(); strings.Contains(string(b), "reason") {
		t.Errorf("a record of another end carries a reason: %s", b)
	}
}

// TestWriteRefusesBadRecords: the writer never writes what a reader
// would refuse.
func TestWriteRefusesBadRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	r := sample()
	r.Reward = 1.5
	if err := Append(path, r); err == nil {
		t.Fatal("a reward of 1.5 was written")
	}
}

// TestAppendRefusesLinksAndOthers: the file is never opened through a
// symbolic link or as anything but a regular file.
func TestAppendRefusesLinksAndOthers(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "elsewhere")
	os.WriteFile(target, []byte("keep\n"), 0o644)
	link := filepath.Join(dir, "link")
	os.Symlink(target, link)
	if err := Append(link, sample()); err == nil {
		t.Fatal("appended through a symbolic link")
	}
	if b, _ := os.ReadFile(target); string(b) != "keep\n" {
		t.Fatalf("the link's target changed: %q", b)
	}
	if err := Append(dir, sample()); err == nil {
		t.Fatal("appended to a directory")
	}
}

// TestReadRefuses: each hostile line is refused with a reason and
// skipped; the good lines around it are read; a partial last line waits.
func TestReadRefuses(t *testing.T) {
	good, _ := sample().Marshal()
	bad := map[string]string{
		"unknown field":  strings.Replace(string(good), `"v":1`, `"v":1,"admin":true`, 1),
		"missing field":  strings.Replace(string(good), `"domain":"logs",`, "", 1),
		"reward":         strings.Replace(string(good), `"reward":0.9`, `"reward":7`, 1),
		"negative steps": strings.Replace(string(good), `"steps":4`, `"steps":-1`, 1),
		"end":            strings.Replace(string(good), `"end":"submitted"`, `"end":"won"`, 1),
		"version":        strings.Replace(string(good), `"v":1`, `"v":2`, 1),
		"task with nl":   strings.Replace(string(good), `"task_id":"logs/error_count@1"`, `"task_id":"a\nb"`, 1),
		"backwards time": strings.Replace(string(good), `"ended_at":"2026-12-02T03:00:02Z"`, `"ended_at":"2026-12-02T02:00:00Z"`, 1),
		"two values":     strings.TrimSuffix(string(good), "\n") + " {}\n",
		"not json":       "hello\n",
		"long":           `{"v":1,"episode_id":"` + strings.Repeat("x", MaxLine) + "\"}\n",
		// A reason is a word of Reasons on an error's record only: never
		// text a forger (or the grader) chose.
		"reason of another end": strings.Replace(string(good), `"ended_at"`, `"reason":"grader_failed","ended_at"`, 1),
		"error without reason":  strings.Replace(string(good), `"end":"submitted"`, `"end":"error"`, 1),
		"error with free text": strings.Replace(strings.Replace(string(good), `"end":"submitted"`, `"end":"error"`, 1),
			`"ended_at"`, `"reason":"hidden input 4 was [1, 2]","ended_at"`, 1),
	}
	for name, line := range bad {
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			if line == string(good) {
				t.Fatal("the case does not change the line")
			}
			f := fileWith(t, string(good)+line+string(good)+`{"v":1,"epis`)
			recs, next, refused, err := Read(f, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != 2 || len(refused) != 1 || refused[0].Offset != int64(len(good)) {
				t.Fatalf("%d records, refused %+v", len(recs), refused)
			}
			if want := int64(2*len(good) + len(line)); next != want {
				t.Errorf("next %d, want %d (the partial line is left)", next, want)
			}
		})
	}
}

// TestReadLongLineWithoutNewline: a line with no newline within MaxLine
// bytes is refused and skipped, so it cannot stall the reader.
func TestReadLongLineWithoutNewline(t *testing.T) {
	f := fileWith(t, strings.Repeat("x", 3*MaxLine))
	recs, next, refused, err := Read(f, 0)
	if err != nil || len(recs) != 0 || len(refused) != 1 || next != 3*MaxLine {
		t.Fatalf("%v: %d records, %v refused, next %d", err, len(recs), refused, next)
	}
}

func TestReadShrunk(t *testing.T) {
	f := fileWith(t, "")
	if _, _, _, err := Read(f, 10); err != ErrShrunk {
		t.Fatalf("err %v, want ErrShrunk", err)
	}
}

// TestReadBounded: one read takes in at most MaxFile bytes.
func TestReadBounded(t *testing.T) {
	line, _ := sample().Marshal()
	n := MaxFile/len(line) + 10
	f := fileWith(t, strings.Repeat(string(line), n))
	recs, next, _, err := Read(f, 0)
	if err != nil || next > MaxFile || len(recs) == n {
		t.Fatalf("%v: read %d of %d records, next %d", err, len(recs), n, next)
	}
	rest, end, _, err := Read(f, next)
	if err != nil || len(recs)+len(rest) != n || end != int64(n*len(line)) {
		t.Fatalf("%v: caught up with %d+%d of %d records", err, len(recs), len(rest), n)
	}
}

func fileWith(t *testing.T, content string) *os.File {
	t.Helper()
	p := filepath.Join(t.TempDir(), FileName)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func FuzzParse(f *testing.F) {
	good, _ := sample().Marshal()
	f.Add(good[:len(good)-1])
	f.Add([]byte(`{"v":1}`))
	f.Add([]byte(`{"v":1,"episode_id":"a","task_id":"b","domain":"c","reward":1e308,"parts":{},"steps":0,"end":"closed","started_at":"2026-01-01T00:00:00Z","ended_at":"2026-01-01T00:00:00Z"}`))
	f.Add([]byte("null"))
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := Parse(line)
		if err != nil {
			return
		}
		// What Parse accepts, Check accepts and Marshal writes back.
		if err := r.Check(); err != nil {
			t.Fatalf("accepted %q: %v", line, err)
		}
		if _, err := r.Marshal(); err != nil {
			t.Fatalf("accepted %q, cannot write it: %v", line, err)
		}
	})
}
