package beneath

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// plant makes a directory to open and, beside it, a victim file a link
// planted inside points at: what root must never write through.
func plant(t *testing.T) (root string, victim string) {
	t.Helper()
	base := t.TempDir()
	root = filepath.Join(base, "root")
	if err := os.MkdirAll(filepath.Join(root, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	victim = filepath.Join(base, "victim")
	if err := os.WriteFile(victim, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for link, to := range map[string]string{
		"lock":        victim,
		"sub/lock":    victim,
		"dirlink":     filepath.Dir(victim),
		"rel":         "../victim",
		"insidelink":  "sub",
		"sub/up":      "..",
		"dangling":    filepath.Join(filepath.Dir(victim), "new-file"),
		"sub/relfile": "../lock",
	} {
		if err := os.Symlink(to, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	return root, victim
}

// TestLinksNeverFollowed: every way a planted link could take an open,
// a create, a mkdir, a chown or a removal elsewhere is refused, and the
// file it points at is left as it was.
func TestLinksNeverFollowed(t *testing.T) {
	root, victim := plant(t)
	d, err := Open(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, name := range []string{"lock", "sub/lock", "rel", "dirlink/victim", "insidelink/x", "sub/up/lock", "dangling", "sub/relfile", "../victim", "sub/../../victim"} {
		t.Run(strings.ReplaceAll(name, "/", "_"), func(t *testing.T) {
			for what, open := range map[string]func() error{
				"read":   func() error { return closed(d.Open(name)) },
				"create": func() error { return closed(d.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)) },
				"append": func() error { return closed(d.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)) },
				"new":    func() error { return d.WriteNew(name, []byte("x"), 0o600) },
				"dir":    func() error { return closed(d.OpenDir(name)) },
				"mkdir":  func() error { return closed(d.MkdirAll(name+"/more", 0o700)) },
			} {
				if err := open(); err == nil {
					t.Errorf("%s %s: no error, want a refusal", what, name)
				}
			}
		})
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Fatalf("the victim now holds %q", b)
	}
	if _, err := os.Lstat(filepath.Join(filepath.Dir(victim), "new-file")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a file was made through the dangling link: %v", err)
	}
	// A link itself is removed or lstat'ed, never what it points at.
	if fi, err := d.Lstat("lock"); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("lstat lock: %v %v, want a symbolic link", fi, err)
	}
	if err := d.Chown("lock", os.Getuid(), os.Getgid()); err != nil {
		t.Fatalf("chown of the link itself: %v", err)
	}
	if err := d.Remove("lock"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(victim); err != nil {
		t.Fatalf("removing the link removed its target: %v", err)
	}
}

// closed closes what an open returned and passes its error on.
func closed[T interface{ Close() error }](c T, err error) error {
	if err == nil {
		c.Close()
	}
	return err
}

// TestNoTruncate: nothing here empties a file in place, and a new file is
// never made over an old one.
func TestNoTruncate(t *testing.T) {
	root := t.TempDir()
	d, err := Open(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.WriteNew("report.json", []byte("first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteNew("report.json", []byte("second\n"), 0o600); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("a second write of the same name: %v, want ErrExist", err)
	}
	if _, err := d.OpenFile("report.json", os.O_RDWR|os.O_TRUNC, 0); err == nil {
		t.Fatal("O_TRUNC accepted")
	}
	if b, err := d.ReadFile("report.json", 100); err != nil || string(b) != "first\n" {
		t.Fatalf("report: %q %v", b, err)
	}
	if _, err := d.ReadFile("report.json", 3); err == nil {
		t.Fatal("a file over the bound was read")
	}
}

// TestMkdirPerm: directories get the mode asked for, whatever the umask,
// and MkdirAll keeps what exists.
func TestMkdirPerm(t *testing.T) {
	d, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	sub, err := d.MkdirAll("a/b/c", 0o711)
	if err != nil {
		t.Fatal(err)
	}
	sub.Close()
	for _, name := range []string{"a", "a/b", "a/b/c"} {
		fi, err := d.Lstat(name)
		if err != nil || fi.Mode().Perm() != 0o711 || !fi.IsDir() {
			t.Fatalf("%s: %v %v", name, fi.Mode(), err)
		}
	}
	again, err := d.MkdirAll("a/b/c", 0o700)
	if err != nil {
		t.Fatalf("MkdirAll of an existing directory: %v", err)
	}
	again.Close()
	if err := d.Mkdir("a", 0o700); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("Mkdir of an existing directory: %v", err)
	}
	entries, err := d.ReadDir("a")
	if err != nil || len(entries) != 1 || entries[0].Name() != "b" {
		t.Fatalf("ReadDir: %v %v", entries, err)
	}
}

// TestOpenChecks: Open's check sees the directory it opened.
func TestOpenChecks(t *testing.T) {
	root := t.TempDir()
	refuse := errors.New("refused")
	if _, err := Open(root, func(fi fs.FileInfo) error {
		if !fi.IsDir() {
			t.Error("the check saw no directory")
		}
		return refuse
	}); !errors.Is(err, refuse) {
		t.Fatalf("Open: %v, want the check's error", err)
	}
	f := filepath.Join(root, "file")
	os.WriteFile(f, nil, 0o600)
	if _, err := Open(f, nil); err == nil {
		t.Fatal("a file opened as a directory")
	}
}

// TestRemoveAllNeverFollows: a tree with links planted in it (to a file
// and to a directory outside) is removed, links and all, and nothing they
// point at is touched.
func TestRemoveAllNeverFollows(t *testing.T) {
	root, victim := plant(t)
	outside := filepath.Dir(victim)
	os.MkdirAll(filepath.Join(root, "tree", "a", "b"), 0o700)
	os.WriteFile(filepath.Join(root, "tree", "a", "b", "f"), []byte("x"), 0o600)
	os.Symlink(outside, filepath.Join(root, "tree", "a", "out"))
	os.Symlink(victim, filepath.Join(root, "tree", "v"))
	d, err := Open(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.RemoveAll("tree"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(root, "tree")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("tree left: %v", err)
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "precious\n" {
		t.Fatalf("the victim: %q %v", b, err)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Fatalf("the directory a link pointed at: %v", err)
	}
	if err := d.RemoveAll("tree"); err != nil {
		t.Fatalf("a second RemoveAll: %v", err)
	}
	// Through a link on the way: refused, nothing removed.
	os.MkdirAll(filepath.Join(outside, "keep", "x"), 0o700)
	if err := d.RemoveAll("dirlink/keep"); err == nil {
		t.Fatal("RemoveAll through a link")
	}
	if _, err := os.Stat(filepath.Join(outside, "keep", "x")); err != nil {
		t.Fatalf("removed through a link: %v", err)
	}
}

// TestRenameNeverReplaces: Rename moves a directory into place, but never
// over anything already there (a file, a directory, a link planted by
// name: fs.ErrExist, and what was there is left as it was), nor through
// a link on the way.
func TestRenameNeverReplaces(t *testing.T) {
	root, victim := plant(t)
	d, err := Open(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Mkdir("staged", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "staged", "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"lock", "dangling", "sub", "insidelink"} {
		if err := d.Rename("staged", target); !errors.Is(err, fs.ErrExist) {
			t.Errorf("rename over %s: %v, want fs.ErrExist", target, err)
		}
	}
	if err := d.Rename("staged", "dirlink/moved"); !errors.Is(err, ErrLink) {
		t.Errorf("rename through a link: %v, want ErrLink", err)
	}
	if err := d.Rename("staged", "placed"); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "placed", "f")); err != nil || string(b) != "x" {
		t.Fatalf("after the rename: %q %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(root, "staged")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the old name is still there: %v", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Errorf("the victim changed: %q", b)
	}
}
