package sandbox

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"golang.org/x/sys/unix"
)

// setUserACL gives path a POSIX access ACL that grants uid r-x, without
// setfacl: the kernel's xattr format (version 2, then tag/perm/id
// entries).
func setUserACL(t *testing.T, path string, uid uint32) {
	t.Helper()
	entry := func(tag, perm uint16, id uint32) []byte {
		b := make([]byte, 8)
		binary.LittleEndian.PutUint16(b, tag)
		binary.LittleEndian.PutUint16(b[2:], perm)
		binary.LittleEndian.PutUint32(b[4:], id)
		return b
	}
	const undefined = ^uint32(0)
	acl := binary.LittleEndian.AppendUint32(nil, 2)
	acl = append(acl, entry(0x01, 7, undefined)...) // ACL_USER_OBJ rwx
	acl = append(acl, entry(0x02, 5, uid)...)       // ACL_USER r-x
	acl = append(acl, entry(0x04, 0, undefined)...) // ACL_GROUP_OBJ
	acl = append(acl, entry(0x10, 5, undefined)...) // ACL_MASK r-x
	acl = append(acl, entry(0x20, 0, undefined)...) // ACL_OTHER
	if err := unix.Setxattr(path, "system.posix_acl_access", acl, 0); err != nil {
		testenv.Unavailable(t, "this file system takes no POSIX ACL: "+err.Error())
	}
}

// TestCheckUnexposed: a file is out of the sandbox uids' reach through
// its mode, or through a directory on its only path; its owner, a sandbox
// group, read or execute bits for others, a second link, a second mount
// or an ACL expose it.
func TestCheckUnexposed(t *testing.T) {
	testenv.RequireRoot(t)
	t.Parallel()
	// Each case checks against a mount table that holds the file's file
	// system once unless it says otherwise: the host's own table may
	// mount it twice (a bind mount elsewhere), which would answer every
	// case before its directories are looked at.
	mountedOnce := func(t *testing.T, file string) []Mount {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Stat(file, &st); err != nil {
			t.Fatal(err)
		}
		return []Mount{{Major: unix.Major(st.Dev), Minor: unix.Minor(st.Dev)}}
	}
	tests := []struct {
		name string
		// setup makes the file under root (a 0755 directory) and returns
		// the path to check.
		setup  func(t *testing.T, root string) string
		mounts func(t *testing.T, file string) []Mount
		want   string // "" for unexposed, else a part of the reason
	}{
		{name: "root_0700", setup: file("bin/wb", 0o700, 0, 0), want: ""},
		{name: "root_0755_open_path", setup: file("bin/wb", 0o755, 0, 0), want: "every directory above it"},
		{name: "others_read_only", setup: file("bin/wb", 0o704, 0, 0), want: "mode 0704"},
		{name: "others_exec_only", setup: file("bin/wb", 0o701, 0, 0), want: "mode 0701"},
		{name: "others_write_only", setup: file("bin/wb", 0o702, 0, 0), want: ""},
		{name: "group_root_0750", setup: file("bin/wb", 0o750, 0, 0), want: ""},
		{name: "group_sandbox_0750", setup: file("bin/wb", 0o750, 0, DefaultRange.Base+1), want: "mode 0750"},
		{name: "owned_by_sandbox_uid", setup: file("bin/wb", 0o700, DefaultRange.Base, 0), want: "owned by sandbox uid"},
		{name: "closed_directory", setup: func(t *testing.T, root string) string {
			p := file("closed/bin/wb", 0o755, 0, 0)(t, root)
			os.Chmod(filepath.Join(root, "closed"), 0o700)
			return p
		}, want: ""},
		{name: "passable_directory", setup: func(t *testing.T, root string) string {
			p := file("pass/bin/wb", 0o755, 0, 0)(t, root)
			os.Chmod(filepath.Join(root, "pass"), 0o711)
			return p
		}, want: "every directory above it"},
		{name: "closed_by_sandbox_group_dir", setup: func(t *testing.T, root string) string {
			p := file("grp/bin/wb", 0o755, 0, 0)(t, root)
			os.Chmod(filepath.Join(root, "grp"), 0o750)
			os.Chown(filepath.Join(root, "grp"), 0, DefaultRange.Base+2)
			return p
		}, want: "every directory above it"},
		{name: "second_link", setup: func(t *testing.T, root string) string {
			p := file("closed/bin/wb", 0o755, 0, 0)(t, root)
			os.Chmod(filepath.Join(root, "closed"), 0o700)
			if err := os.Link(p, filepath.Join(root, "open-link")); err != nil {
				t.Fatal(err)
			}
			return p
		}, want: "2 hard links"},
		{name: "second_mount", setup: func(t *testing.T, root string) string {
			p := file("closed/bin/wb", 0o755, 0, 0)(t, root)
			os.Chmod(filepath.Join(root, "closed"), 0o700)
			return p
		}, mounts: func(t *testing.T, file string) []Mount {
			m := mountedOnce(t, file)
			return append(m, m[0])
		}, want: "mounted more than once"},
		{name: "symlink_to_open_file", setup: func(t *testing.T, root string) string {
			p := file("bin/wb", 0o755, 0, 0)(t, root)
			os.Mkdir(filepath.Join(root, "closed"), 0o700)
			link := filepath.Join(root, "closed", "wb")
			os.Symlink(p, link)
			return link
		}, want: "every directory above it"},
		{name: "acl_on_file", setup: func(t *testing.T, root string) string {
			p := file("bin/wb", 0o700, 0, 0)(t, root)
			setUserACL(t, p, uint32(DefaultRange.Base))
			return p
		}, want: "POSIX ACL"},
		{name: "acl_on_closing_dir", setup: func(t *testing.T, root string) string {
			p := file("acl/bin/wb", 0o755, 0, 0)(t, root)
			os.Chmod(filepath.Join(root, "acl"), 0o700)
			setUserACL(t, filepath.Join(root, "acl"), uint32(DefaultRange.Base))
			return p
		}, want: "every directory above it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := openRoot(t)
			p := tt.setup(t, root)
			m := mountedOnce(t, p)
			if tt.mounts != nil {
				m = tt.mounts(t, p)
			}
			err := CheckUnexposed(p, m)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("got %v, want unexposed", err)
			case tt.want != "" && (!errors.Is(err, ErrExposed) || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("got %v, want ErrExposed saying %q", err, tt.want)
			}
		})
	}
}

// file returns a setup that makes rel under root with mode, owner and
// group, its directories 0755.
func file(rel string, mode os.FileMode, uid, gid int) func(t *testing.T, root string) string {
	return func(t *testing.T, root string) string {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		for d := filepath.Dir(p); d != root; d = filepath.Dir(d) {
			os.Chmod(d, 0o755)
		}
		if err := os.WriteFile(p, []byte("#!/bin/true\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		// The mode first: root without CAP_FOWNER (the workspace
		// container) cannot chmod a file it gave away.
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
		return p
	}
}

// openRoot returns a temporary directory that others may pass through
// (its parents included), removed at the end.
func openRoot(t *testing.T) string {
	t.Helper()
	root, err := os.MkdirTemp("", "sbx-exposed-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { RemoveTree(root) })
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	return root
}
