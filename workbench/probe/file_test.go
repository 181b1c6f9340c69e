package probe

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

// TestProbeFile (root): what a uid can open, and what root sees, of a
// root-owned file; the content is never in the result.
func TestProbeFile(t *testing.T) {
	testenv.RequireRoot(t)
	dir, err := os.MkdirTemp("", "probe-file")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	const uid = 61234 // any uid but root's: nothing runs as it
	path := filepath.Join(dir, "task")
	os.WriteFile(path, []byte("secret/task@1\n"), 0o400)
	os.Chmod(path, 0o400)
	link := filepath.Join(dir, "link")
	os.Symlink(path, link)
	for _, tt := range []struct {
		name, path string
		mode       os.FileMode
		as         int
		want       string
		file       *File
	}{
		{"denied", path, 0o400, uid, OutcomeDenied, &File{Regular: true, Mode: "0400", UID: 0}},
		{"readable_by_others", path, 0o444, uid, OutcomeReadable, &File{Regular: true, Mode: "0444", UID: 0}},
		{"root_reads", path, 0o400, 0, OutcomeReadable, &File{Regular: true, Mode: "0400", UID: 0}},
		{"missing", filepath.Join(dir, "none"), 0, uid, OutcomeNotFound, nil},
		{"link_not_followed", link, 0o444, uid, OutcomeError, &File{Regular: false, Mode: "0777", UID: 0}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.mode != 0 {
				os.Chmod(path, tt.mode)
			}
			res, err := RunBatch(t.Context(), Batch{Probes: []Request{{ID: "f", Kind: KindFile, Path: tt.path, As: tt.as}}}, os.Getenv)
			if err != nil {
				t.Fatal(err)
			}
			o := res.Results[0]
			if o.Outcome != tt.want || (o.File == nil) != (tt.file == nil) || o.File != nil && *o.File != *tt.file {
				t.Errorf("outcome %s %+v (%s), want %s %+v", o.Outcome, o.File, o.Error, tt.want, tt.file)
			}
		})
	}
	for _, bad := range []Request{
		{ID: "rel", Kind: KindFile, Path: "run/task", As: uid},
		{ID: "unclean", Kind: KindFile, Path: "/run/../task", As: uid},
		{ID: "as_http", Kind: KindHTTP, URL: "http://127.0.0.1:1/", As: uid},
	} {
		if err := Validate(Batch{Probes: []Request{bad}}); err == nil {
			t.Errorf("%s: accepted", bad.ID)
		}
	}
}

// TestProbeFileOwnerCouldRead (root): a refusal is no proof when the
// uid owns the file, or owns a directory above it and the file's bits let
// it read: an owner may change the mode. The same refusal by what it does
// not own stands. It used to be taken as denied (found by a hostile
// review: a forbidden file the agent owned, mode 0000, passed).
func TestProbeFileOwnerCouldRead(t *testing.T) {
	testenv.RequireRoot(t)
	const uid = 61234 // any uid but root's: nothing runs as it
	for _, tt := range []struct {
		name     string
		fileMode os.FileMode
		fileUID  int
		dirMode  os.FileMode
		dirUID   int
		want     string
	}{
		{"owns_the_file", 0o000, uid, 0o755, 0, OutcomeReadable},
		{"owns_the_closed_directory", 0o644, 0, 0o000, uid, OutcomeReadable},
		{"owns_the_directory_file_closed", 0o600, 0, 0o000, uid, OutcomeDenied},
		{"root_closes_the_directory", 0o644, 0, 0o700, 0, OutcomeDenied},
		{"root_closes_the_file", 0o600, 0, 0o755, 0, OutcomeDenied},
	} {
		t.Run(tt.name, func(t *testing.T) {
			top, err := os.MkdirTemp("", "probe-owner")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(top) })
			os.Chmod(top, 0o755)
			dir := filepath.Join(top, "d")
			path := filepath.Join(dir, "answers")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte("the answer\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			os.Chown(path, tt.fileUID, tt.fileUID)
			os.Chmod(path, tt.fileMode)
			os.Chown(dir, tt.dirUID, tt.dirUID)
			os.Chmod(dir, tt.dirMode)
			res, err := RunBatch(t.Context(), Batch{Probes: []Request{{ID: "f", Kind: KindFile, Path: path, As: uid}}}, os.Getenv)
			if err != nil {
				t.Fatal(err)
			}
			if o := res.Results[0]; o.Outcome != tt.want {
				t.Errorf("outcome %s (%s), want %s", o.Outcome, o.Error, tt.want)
			}
		})
	}
}

// TestAsMain (root): as_main runs a probe as the uid of the main process
// (here, whoever PID 1 is), and goes with no explicit uid.
func TestAsMain(t *testing.T) {
	testenv.RequireRoot(t)
	main, err := FindProcess("")
	if err != nil {
		testenv.Unavailable(t, "no main process to read: "+err.Error())
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	path := filepath.Join(dir, "answer")
	os.WriteFile(path, []byte("42\n"), 0o400)
	res, err := RunBatch(t.Context(), Batch{Probes: []Request{{ID: "f", Kind: KindFile, Path: path, AsMain: true}}}, os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	want := OutcomeDenied
	if main.UID == 0 {
		want = OutcomeReadable
	}
	if o := res.Results[0]; o.Outcome != want {
		t.Fatalf("as the main process (uid %d): %s (%s), want %s", main.UID, o.Outcome, o.Error, want)
	}
	for _, bad := range []Request{
		{ID: "both", Kind: KindFile, Path: path, As: 61234, AsMain: true},
		{ID: "http", Kind: KindHTTP, URL: "http://127.0.0.1:1/", AsMain: true},
	} {
		if err := Validate(Batch{Probes: []Request{bad}}); err == nil {
			t.Errorf("%s: accepted", bad.ID)
		}
	}
}
