package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestEmptyDirLockedAndDeep: as the uid, a tree whose directories lost
// every permission and a tree deeper than WalkDepth (and PATH_MAX) are
// removed.
func TestEmptyDirLockedAndDeep(t *testing.T) {
	uid := claimUID(t)
	ws := uidDir(t, uid)
	err := AsUID(uid, func() error {
		mustWrite(t, filepath.Join(ws, "a", "b", "c.txt"), "x")
		for _, p := range []string{"a/b/c.txt", "a/b", "a"} {
			if err := os.Chmod(filepath.Join(ws, p), 0); err != nil {
				return err
			}
		}
		fd, err := unix.Open(ws, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return err
		}
		for range 3 * WalkDepth {
			if err := unix.Mkdirat(fd, "d", 0o700); err != nil {
				return err
			}
			next, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY, 0)
			unix.Close(fd)
			if err != nil {
				return err
			}
			fd = next
		}
		unix.Close(fd)
		return os.Chmod(ws, 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := AsUID(uid, func() error { return EmptyDir(ws) }); err != nil {
		t.Fatal(err)
	}
	var entries []os.DirEntry
	err = AsUID(uid, func() error { entries, err = os.ReadDir(ws); return err })
	if err != nil || len(entries) != 0 {
		t.Fatalf("left: %v, %v", entries, err)
	}
}

// TestAsUIDChecksAsTheUID: as the uid, root's files are out of reach and
// what is created belongs to the uid; afterwards the thread is root again.
func TestAsUIDChecksAsTheUID(t *testing.T) {
	uid := claimUID(t)
	ws := uidDir(t, uid)
	err := AsUID(uid, func() error {
		if _, err := os.ReadFile("/etc/shadow"); !errors.Is(err, os.ErrPermission) {
			t.Errorf("read /etc/shadow as uid: %v", err)
		}
		return os.WriteFile(filepath.Join(ws, "f"), []byte("x"), 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	err = AsUID(uid, func() error { return unix.Stat(filepath.Join(ws, "f"), &st) })
	if err != nil || int(st.Uid) != uid || int(st.Gid) != uid {
		t.Fatalf("created file owner %d:%d, err %v", st.Uid, st.Gid, err)
	}
	if _, err := os.ReadFile("/etc/shadow"); err != nil {
		t.Fatalf("root again afterwards: %v", err)
	}
}

func TestDigest(t *testing.T) {
	root := t.TempDir()
	mustWrite(t, filepath.Join(root, "a.txt"), "a")
	mustWrite(t, filepath.Join(root, "sub", "b.txt"), "b")
	mustWrite(t, filepath.Join(root, ".run.py"), "server")
	skip := func(rel string) bool { return rel == ".run.py" }
	base, err := Digest(root, skip, DigestBytes)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := Digest(root, skip, DigestBytes); again != base {
		t.Fatal("digest is not stable")
	}
	mustWrite(t, filepath.Join(root, ".run.py"), "changed server file")
	if got, _ := Digest(root, skip, DigestBytes); got != base {
		t.Fatal("a skipped file changed the digest")
	}
	changes := []struct {
		name string
		do   func() error
	}{
		{"content", func() error { return os.WriteFile(filepath.Join(root, "a.txt"), []byte("A"), 0o644) }},
		{"mode", func() error { return os.Chmod(filepath.Join(root, "sub", "b.txt"), 0o600) }},
		{"new_file", func() error { return os.WriteFile(filepath.Join(root, "sub", "c"), nil, 0o644) }},
		{"symlink", func() error { return os.Symlink("a.txt", filepath.Join(root, "l")) }},
		{"xattr", func() error { return unix.Lsetxattr(filepath.Join(root, "a.txt"), "user.x", []byte("1"), 0) }},
	}
	prev := base
	for _, c := range changes {
		if err := c.do(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got, err := Digest(root, skip, DigestBytes)
		if err != nil || got == prev {
			t.Fatalf("%s: digest %q unchanged (err %v)", c.name, got, err)
		}
		prev = got
	}
	if _, err := Digest(root, skip, 1); !errors.Is(err, ErrDigestTooLarge) {
		t.Fatalf("cap: %v", err)
	}
}

// TestChmodDirNoFollow: a symlink put in place of a directory never has
// its target's mode changed; a real directory gets the mode. Both ways
// (fchmodat2 and the O_PATH fallback) are checked.
func TestChmodDirNoFollow(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		chmod func(dirfd int, name string, mode uint32)
	}{
		{"fchmodat2", chmodDirNoFollow},
		{"opath_fallback", chmodDirOPath},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			target := filepath.Join(root, "target")
			if err := os.Mkdir(target, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(target, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, filepath.Join(root, "link")); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(filepath.Join(root, "dir"), 0o755); err != nil {
				t.Fatal(err)
			}
			fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)
			tt.chmod(fd, "link", 0o700)
			tt.chmod(fd, "dir", 0o700)
			for _, c := range []struct {
				path string
				want os.FileMode
			}{{target, 0o755}, {filepath.Join(root, "dir"), 0o700}} {
				st, err := os.Lstat(c.path)
				if err != nil {
					t.Fatal(err)
				}
				if st.Mode().Perm() != c.want {
					t.Errorf("%s: mode %o, want %o", c.path, st.Mode().Perm(), c.want)
				}
			}
		})
	}
}
