package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

var splitPathTests = []struct {
	name string
	in   string
	want []string
	err  string
}{
	{name: "plain", in: "a.txt", want: []string{"a.txt"}},
	{name: "nested", in: "dir/sub/a.txt", want: []string{"dir", "sub", "a.txt"}},
	{name: "dot_parts_dropped", in: "./dir/./a.txt", want: []string{"dir", "a.txt"}},
	{name: "double_slash", in: "dir//a.txt", want: []string{"dir", "a.txt"}},
	{name: "trailing_slash", in: "dir/", want: []string{"dir"}},
	{name: "leading_space_kept", in: " a", want: []string{" a"}},
	{name: "dotfile_ok", in: ".hidden", want: []string{".hidden"}},
	{name: "dots_in_name_ok", in: "a..b", want: []string{"a..b"}},
	{name: "empty", in: "", err: ReasonPathEmpty},
	{name: "blank", in: "  \t", err: ReasonPathEmpty},
	{name: "nul", in: "a\x00b", err: ReasonPathEmpty},
	{name: "absolute", in: "/etc/passwd", err: ReasonPathOutside},
	{name: "dotdot", in: "../x", err: ReasonPathOutside},
	{name: "dotdot_inside", in: "a/../../x", err: ReasonPathOutside},
	{name: "dotdot_trailing", in: "a/..", err: ReasonPathOutside},
	{name: "only_dot", in: ".", err: ReasonPathNoName},
	{name: "only_dot_slash", in: "./", err: ReasonPathNoName},
	{name: "reserved_run", in: ".run.py", err: ReasonPathReserved},
	{name: "reserved_grade_dir", in: ".grade.py/x", err: ReasonPathReserved},
	{name: "reserved_prefix", in: "sub/.runner", err: ReasonPathReserved},
	{name: "reserved_grade_tests", in: ".grade_tests.py", err: ReasonPathReserved},
}

func TestSplitPath(t *testing.T) {
	for _, tt := range splitPathTests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SplitPath(tt.in)
			if tt.err != "" {
				var pe *PathError
				if !errors.As(err, &pe) || pe.Reason != tt.err {
					t.Fatalf("SplitPath(%q) = %v, %v; want error %q", tt.in, got, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("SplitPath(%q): %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("SplitPath(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

// FuzzSplitPath: whatever it accepts is relative, free of "..", NUL,
// empty and reserved components, and names the same path again.
func FuzzSplitPath(f *testing.F) {
	for _, tt := range splitPathTests {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		parts, err := SplitPath(in)
		if err != nil {
			var pe *PathError
			if !errors.As(err, &pe) {
				t.Fatalf("SplitPath(%q): error %T is not a *PathError", in, err)
			}
			return
		}
		if len(parts) == 0 || strings.HasPrefix(in, "/") || strings.ContainsRune(in, 0) {
			t.Fatalf("SplitPath(%q) accepted %q", in, parts)
		}
		for _, p := range parts {
			if p == "" || p == "." || p == ".." || strings.Contains(p, "/") ||
				strings.HasPrefix(p, ".run") || strings.HasPrefix(p, ".grade") {
				t.Fatalf("SplitPath(%q) accepted component %q", in, p)
			}
		}
		joined := strings.Join(parts, "/")
		if strings.TrimSpace(joined) == "" {
			return // " /" names a file " ", as in the seed; the bare " " is blank
		}
		again, err := SplitPath(joined)
		if err != nil || !cmp.Equal(again, parts) {
			t.Fatalf("SplitPath(%q) = %q, but its join gives %q, %v", in, parts, again, err)
		}
		if filepath.IsAbs(filepath.Join(parts...)) || (func(c string) bool { return c == ".." || strings.HasPrefix(c, "../") })(filepath.Clean(filepath.Join(parts...))) {
			t.Fatalf("SplitPath(%q) = %q escapes", in, parts)
		}
	})
}

func TestOpenFile(t *testing.T) {
	root := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret")
	mustWrite(t, outside, "secret")
	mustWrite(t, filepath.Join(root, "a.txt"), "hello")
	mustWrite(t, filepath.Join(root, "dir", "b.txt"), "b")
	mustSymlink(t, outside, filepath.Join(root, "link"))
	mustSymlink(t, filepath.Dir(outside), filepath.Join(root, "dirlink"))
	mustSymlink(t, filepath.Join(root, "missing"), filepath.Join(root, "dangling"))
	if err := unix.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		path   string
		flags  int
		mkdirs bool
		check  func(err error) bool
	}{
		{name: "regular", path: "a.txt", flags: unix.O_RDONLY, check: func(err error) bool { return err == nil }},
		{name: "nested", path: "dir/b.txt", flags: unix.O_RDONLY, check: func(err error) bool { return err == nil }},
		{name: "symlink_file", path: "link", flags: unix.O_RDONLY, check: isErr(ErrSymlink)},
		{name: "symlink_dir", path: "dirlink/secret", flags: unix.O_RDONLY, check: isErr(ErrSymlink)},
		{name: "symlink_dangling_create", path: "dangling", flags: unix.O_WRONLY | unix.O_CREAT, check: isErr(ErrSymlink)},
		{name: "symlink_dir_create", path: "dirlink/new", flags: unix.O_WRONLY | unix.O_CREAT, mkdirs: true, check: isErr(ErrSymlink)},
		{name: "fifo_read", path: "fifo", flags: unix.O_RDONLY, check: isErr(ErrNotRegular)},
		// Without a reader a non-blocking open for writing fails at once (ENXIO).
		{name: "fifo_write", path: "fifo", flags: unix.O_WRONLY | unix.O_CREAT, check: func(err error) bool {
			return errors.Is(err, ErrNotRegular) || errors.Is(err, unix.ENXIO)
		}},
		{name: "directory", path: "dir", flags: unix.O_RDONLY, check: isErr(ErrNotRegular)},
		{name: "missing", path: "nope.txt", flags: unix.O_RDONLY, check: isErr(unix.ENOENT)},
		{name: "missing_dir", path: "nodir/x", flags: unix.O_RDONLY, check: isErr(unix.ENOENT)},
		{name: "file_as_dir", path: "a.txt/x", flags: unix.O_RDONLY, check: isErr(unix.ENOTDIR)},
		{name: "create_with_dirs", path: "new/deep/c.txt", flags: unix.O_WRONLY | unix.O_CREAT, mkdirs: true, check: func(err error) bool { return err == nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				parts, err := SplitPath(tt.path)
				if err != nil {
					done <- err
					return
				}
				f, err := OpenFile(root, parts, tt.flags, 0o644, tt.mkdirs)
				if err == nil {
					f.Close()
				}
				done <- err
			}()
			select {
			case err := <-done:
				if !tt.check(err) {
					t.Fatalf("OpenFile(%q): unexpected error %v", tt.path, err)
				}
			case <-testenv.Context(t).Done():
				t.Fatalf("OpenFile(%q) hangs", tt.path)
			}
		})
	}
	if got, _ := os.ReadFile(outside); string(got) != "secret" {
		t.Fatalf("the file outside was changed: %q", got)
	}
}

func isErr(target error) func(error) bool {
	return func(err error) bool { return errors.Is(err, target) }
}

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}
