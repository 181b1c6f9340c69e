package bind

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

func write(t *testing.T, dir string) string {
	t.Helper()
	if err := Write(dir, "software/median@7", os.Getuid(), os.Getgid()); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, FileName)
}

// dirNames lists dir's entries.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestWrite: the file holds the task and a newline, mode 0400, owned as
// asked; it is never written over an existing file or through a link,
// and dir is not followed when it is a link.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := write(t, dir)
	st, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode() != FileMode || !st.Mode().IsRegular() {
		t.Errorf("mode %v, want %v", st.Mode(), os.FileMode(FileMode))
	}
	if b, _ := os.ReadFile(path); string(b) != "software/median@7\n" {
		t.Errorf("content %q", b)
	}
	// Again: refused, and the first file is untouched.
	if err := Write(dir, "sql/top_customer", os.Getuid(), os.Getgid()); !errors.Is(err, os.ErrExist) {
		t.Errorf("second write: %v, want exists", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "software/median@7\n" {
		t.Errorf("content after a refused write %q", b)
	}
	// The file was made under a name of its own and linked into place:
	// that name is gone, after the write and after the refusal.
	if names := dirNames(t, dir); len(names) != 1 || names[0] != FileName {
		t.Errorf("the directory holds %q, want only %s", names, FileName)
	}

	// A link planted where the file goes: not followed, its target untouched.
	dir2 := t.TempDir()
	target := filepath.Join(t.TempDir(), "target")
	os.WriteFile(target, []byte("keep"), 0o600)
	os.Symlink(target, filepath.Join(dir2, FileName))
	if err := Write(dir2, "x/y", os.Getuid(), os.Getgid()); err == nil {
		t.Error("write through a planted link succeeded")
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Errorf("the link's target was written: %q", b)
	}
	// A dangling link: O_EXCL refuses it too (nothing is created at its target).
	dir3 := t.TempDir()
	dangling := filepath.Join(t.TempDir(), "nothing")
	os.Symlink(dangling, filepath.Join(dir3, FileName))
	if err := Write(dir3, "x/y", os.Getuid(), os.Getgid()); err == nil {
		t.Error("write through a dangling link succeeded")
	}
	if _, err := os.Lstat(dangling); !os.IsNotExist(err) {
		t.Errorf("the dangling link's target was created: %v", err)
	}
	if names := dirNames(t, dir3); len(names) != 1 || names[0] != FileName {
		t.Errorf("after a refused write the directory holds %q", names)
	}
	// dir itself a link: refused.
	link := filepath.Join(t.TempDir(), "link")
	os.Symlink(t.TempDir(), link)
	if err := Write(link, "x/y", os.Getuid(), os.Getgid()); err == nil {
		t.Error("write into a linked directory succeeded")
	}
	// A bad task: nothing made.
	dir4 := t.TempDir()
	if err := Write(dir4, "two words", os.Getuid(), os.Getgid()); err == nil {
		t.Error("a task id with a space was written")
	}
	if _, err := os.Lstat(filepath.Join(dir4, FileName)); !os.IsNotExist(err) {
		t.Errorf("a refused write left a file: %v", err)
	}
}

// TestFileBinding: unbound while the file is missing (ErrUnbound on every
// reset), bound lazily when it appears, and never rebound after: a
// changed or removed file changes nothing.
func TestFileBinding(t *testing.T) {
	dir := t.TempDir()
	b, err := File(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	for _, asked := range []string{"", "software/median@7"} {
		if _, err := b.Resolve(asked); !errors.Is(err, ErrUnbound) {
			t.Fatalf("Resolve(%q) without the file: %v, want ErrUnbound", asked, err)
		}
	}
	if b.Bound() {
		t.Fatal("bound without a file")
	}
	path := write(t, dir)
	for _, tt := range []struct {
		asked, want string
		err         error
	}{
		{"", "software/median@7", nil},
		{"software/median@7", "software/median@7", nil},
		{"sql/top_customer", "", ErrOtherTask},
		{"software/median@8", "", ErrOtherTask},
	} {
		got, err := b.Resolve(tt.asked)
		if got != tt.want || !errors.Is(err, tt.err) {
			t.Errorf("Resolve(%q) = %q, %v; want %q, %v", tt.asked, got, err, tt.want, tt.err)
		}
	}
	// Rebinding attempts: the file replaced, then removed.
	os.Remove(path)
	if err := Write(dir, "sql/top_customer", os.Getuid(), os.Getgid()); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Resolve(""); got != "software/median@7" || err != nil {
		t.Errorf("after the file changed: %q, %v; want the first binding", got, err)
	}
	if _, err := b.Resolve("sql/top_customer"); !errors.Is(err, ErrOtherTask) {
		t.Errorf("the changed file's task: %v, want ErrOtherTask", err)
	}
	os.Remove(path)
	if got, err := b.Resolve(""); got != "software/median@7" || err != nil {
		t.Errorf("after the file was removed: %q, %v", got, err)
	}
}

// TestFileBindingConcurrent: resets racing the file's arrival each get the
// one task or ErrUnbound, never another answer (a reset that read the file
// between its creation and its write was refused as a bad file, until
// Write linked the finished file into place).
func TestFileBindingConcurrent(t *testing.T) {
	dir := t.TempDir()
	b, _ := File(filepath.Join(dir, FileName))
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			if i == 8 {
				write(t, dir)
			}
			got, err := b.Resolve("")
			if err != nil && !errors.Is(err, ErrUnbound) || err == nil && got != "software/median@7" {
				t.Errorf("Resolve = %q, %v", got, err)
			}
		})
	}
	wg.Wait()
	if got, err := b.Task(); got != "software/median@7" || err != nil {
		t.Errorf("Task = %q, %v", got, err)
	}
}

// TestBadFiles: a file the workbench does not trust binds nothing and
// refuses every reset, saying why.
func TestBadFiles(t *testing.T) {
	for _, tt := range []struct {
		name string
		make func(t *testing.T, path string)
		want string
	}{
		{"link", func(t *testing.T, path string) {
			target := filepath.Join(t.TempDir(), "t")
			os.WriteFile(target, []byte("software/median@7\n"), 0o400)
			os.Symlink(target, path)
		}, "open"},
		{"readable_by_others", func(t *testing.T, path string) {
			os.WriteFile(path, []byte("software/median@7\n"), 0o400)
			os.Chmod(path, 0o444)
		}, "mode 0444"},
		{"directory", func(t *testing.T, path string) { os.Mkdir(path, 0o700) }, "not a regular file"},
		{"fifo", func(t *testing.T, path string) { mkfifo(t, path) }, "not a regular file"},
		{"no_newline", func(t *testing.T, path string) { os.WriteFile(path, []byte("software/median@7"), 0o400) }, "newline"},
		{"two_lines", func(t *testing.T, path string) { os.WriteFile(path, []byte("a/b\nc/d\n"), 0o400) }, "printable"},
		{"empty", func(t *testing.T, path string) { os.WriteFile(path, nil, 0o400) }, "newline"},
		{"huge", func(t *testing.T, path string) {
			os.WriteFile(path, []byte(strings.Repeat("a", 4096)+"\n"), 0o400)
		}, "bytes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), FileName)
			tt.make(t, path)
			b, _ := File(path)
			_, err := b.Resolve("")
			if !errors.Is(err, ErrBadFile) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Resolve: %v, want ErrBadFile saying %q", err, tt.want)
			}
			if b.Bound() {
				t.Error("bound by a bad file")
			}
		})
	}
}

// TestNilAndFixed: nil serves whatever is asked; Fixed is bound from the
// start and reads no file.
func TestNilAndFixed(t *testing.T) {
	var none *Binding
	if got, err := none.Resolve("sql/top_customer"); got != "sql/top_customer" || err != nil {
		t.Errorf("nil Resolve = %q, %v", got, err)
	}
	if none.Bound() || none.Path() != "" {
		t.Error("nil binding bound")
	}
	b, err := Fixed("logs/error_count")
	if err != nil || !b.Bound() {
		t.Fatalf("Fixed: %v", err)
	}
	if got, err := b.Resolve(""); got != "logs/error_count" || err != nil {
		t.Errorf("Fixed Resolve = %q, %v", got, err)
	}
	if _, err := b.Resolve("software/median"); !errors.Is(err, ErrOtherTask) {
		t.Errorf("Fixed Resolve(other) = %v", err)
	}
	for _, bad := range []string{"", "a b", strings.Repeat("x", 200), "a\x00b"} {
		if _, err := Fixed(bad); err == nil {
			t.Errorf("Fixed(%q) accepted", bad)
		}
	}
	if _, err := File("relative/task"); err == nil {
		t.Error("File with a relative path accepted")
	}
}

// FuzzParse: whatever Parse accepts is a task id Write writes back the
// same, and what it refuses binds nothing.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"software/median@7\n", "a\n", "", "\n", "a b\n", "x\n\n", strings.Repeat("y", 128) + "\n", strings.Repeat("y", 129) + "\n", "é\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		task, err := Parse(b)
		if err != nil {
			if task != "" {
				t.Fatalf("Parse(%q) refused with a task %q", b, task)
			}
			return
		}
		if task+"\n" != string(b) {
			t.Fatalf("Parse(%q) = %q: not the content less its newline", b, task)
		}
		if strings.ContainsAny(task, " \n\t\x00") || len(task) > 128 {
			t.Fatalf("Parse accepted %q", task)
		}
	})
}

func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := unix.Mkfifo(path, 0o400); err != nil {
		t.Fatal(err)
	}
}
