package sandbox

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var mountinfoTests = []struct {
	name string
	line string
	want Mount
	bad  bool
}{
	{name: "proc_man_page", line: "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue",
		want: Mount{ID: 36, Parent: 35, Major: 98, Root: "/mnt1", Point: "/mnt2", Options: []string{"rw", "noatime"}, FSType: "ext3", Source: "/dev/root", SuperOptions: []string{"rw", "errors=continue"}}},
	{name: "no_optional_fields", line: "25 24 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=24731708k",
		want: Mount{ID: 25, Parent: 24, Minor: 23, Root: "/", Point: "/dev/shm", Options: []string{"rw", "relatime"}, FSType: "tmpfs", Source: "tmpfs", SuperOptions: []string{"rw", "size=24731708k"}}},
	{name: "several_optional_fields", line: "40 1 0:40 / /run/lock rw,nosuid shared:7 master:3 propagate_from:2 - tmpfs none rw,mode=1777",
		want: Mount{ID: 40, Parent: 1, Minor: 40, Root: "/", Point: "/run/lock", Options: []string{"rw", "nosuid"}, FSType: "tmpfs", Source: "none", SuperOptions: []string{"rw", "mode=1777"}}},
	{name: "escaped_space_tab_newline_backslash", line: `50 1 8:1 /a\040b /mnt/x\011y\012z\134w ro - fuse.sshfs me@host:/a\040b ro,user_id=0`,
		want: Mount{ID: 50, Parent: 1, Major: 8, Minor: 1, Root: "/a b", Point: "/mnt/x\ty\nz\\w", Options: []string{"ro"}, FSType: "fuse.sshfs", Source: "me@host:/a b", SuperOptions: []string{"ro", "user_id=0"}}},
	{name: "empty_source", line: "60 1 0:50 / /dev/mqueue rw,nosuid - mqueue  rw",
		want: Mount{ID: 60, Parent: 1, Minor: 50, Root: "/", Point: "/dev/mqueue", Options: []string{"rw", "nosuid"}, FSType: "mqueue", Source: "", SuperOptions: []string{"rw"}}},
	{name: "too_few_fields", line: "36 35 98:0 /mnt1 /mnt2 rw", bad: true},
	{name: "no_separator", line: "36 35 98:0 /mnt1 /mnt2 rw master:1 ext3 /dev/root rw", bad: true},
	{name: "nothing_after_separator", line: "36 35 98:0 /mnt1 /mnt2 rw - ext3 /dev/root", bad: true},
	{name: "extra_field", line: "36 35 98:0 / /mnt rw - ext3 /dev/root rw extra", bad: true},
	{name: "relative_point", line: "36 35 98:0 / mnt rw - ext3 /dev/root rw", bad: true},
	{name: "bad_id", line: "x 35 98:0 / /mnt rw - ext3 /dev/root rw", bad: true},
	{name: "bad_device", line: "36 35 98 / /mnt rw - ext3 /dev/root rw", bad: true},
	{name: "device_too_big", line: "36 35 98:4294967296 / /mnt rw - ext3 /dev/root rw", bad: true},
	{name: "bad_escape", line: `36 35 98:0 / /mnt\04 rw - ext3 /dev/root rw`, bad: true},
	{name: "escape_not_a_byte", line: `36 35 98:0 / /mnt\777 rw - ext3 /dev/root rw`, bad: true},
	{name: "empty_type", line: "36 35 98:0 / /mnt rw -  /dev/root rw", bad: true},
}

func TestParseMountinfo(t *testing.T) {
	t.Parallel()
	for _, tt := range mountinfoTests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseMountinfo([]byte(tt.line + "\n"))
			if tt.bad {
				if err == nil {
					t.Fatalf("got %+v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 {
				t.Fatalf("got %d mounts, want 1", len(got))
			}
			if diff := cmp.Diff(tt.want, got[0]); diff != "" {
				t.Errorf("mount (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("one_bad_line_fails_all", func(t *testing.T) {
		in := mountinfoTests[0].line + "\n" + "garbage\n" + mountinfoTests[1].line + "\n"
		if got, err := ParseMountinfo([]byte(in)); err == nil {
			t.Fatalf("got %d mounts, want an error (a skipped mount is never swept)", len(got))
		}
	})
	t.Run("read_only", func(t *testing.T) {
		for _, tt := range []struct {
			opts, super string
			ro          bool
		}{{"rw", "rw", false}, {"ro", "rw", true}, {"rw,nosuid", "ro,size=1", true}} {
			m := Mount{Options: strings.Split(tt.opts, ","), SuperOptions: strings.Split(tt.super, ",")}
			if m.ReadOnly() != tt.ro {
				t.Errorf("%s / %s: ReadOnly %v, want %v", tt.opts, tt.super, m.ReadOnly(), tt.ro)
			}
		}
	})
}

// TestParseMountinfoSelf: this process's own mount table parses, and has
// a root mount.
func TestParseMountinfoSelf(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	mounts, err := ParseMountinfo(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mounts {
		if m.Point == "/" {
			return
		}
	}
	t.Fatalf("no mount at / among %d", len(mounts))
}

// formatMount writes m as the kernel would.
func formatMount(m Mount) string {
	return fmt.Sprintf("%d %d %d:%d %s %s %s - %s %s %s", m.ID, m.Parent, m.Major, m.Minor, escapeMountField(m.Root), escapeMountField(m.Point),
		strings.Join(m.Options, ","), m.FSType, escapeMountField(m.Source), strings.Join(m.SuperOptions, ","))
}

// FuzzParseMountinfo: the parser never panics, never returns a relative
// mount point, and what it accepts reads back the same once written the
// way the kernel writes it.
func FuzzParseMountinfo(f *testing.F) {
	for _, tt := range mountinfoTests {
		f.Add(tt.line)
	}
	f.Fuzz(func(t *testing.T, in string) {
		mounts, err := ParseMountinfo([]byte(in))
		if err != nil {
			return
		}
		var lines []string
		for _, m := range mounts {
			if !strings.HasPrefix(m.Point, "/") {
				t.Fatalf("relative mount point %q accepted", m.Point)
			}
			if strings.ContainsAny(m.FSType, " \n") || m.FSType == "" {
				t.Fatalf("file system type %q accepted", m.FSType)
			}
			lines = append(lines, formatMount(m))
		}
		again, err := ParseMountinfo([]byte(strings.Join(lines, "\n")))
		if err != nil {
			t.Fatalf("reparse of %q: %v", lines, err)
		}
		if diff := cmp.Diff(mounts, again); diff != "" {
			t.Fatalf("round trip (-first +second):\n%s", diff)
		}
	})
}
