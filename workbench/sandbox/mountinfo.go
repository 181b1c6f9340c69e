package sandbox

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// Mount is one line of /proc/<pid>/mountinfo (proc(5)).
type Mount struct {
	// ID and Parent are the mount's id and its parent's.
	ID, Parent int
	// Major and Minor are the device of the file system (st_dev).
	Major, Minor uint32
	// Root is the directory of the file system mounted here; Point is
	// where, both unescaped.
	Root, Point string
	// Options are the per-mount options ("rw", "nosuid", ...).
	Options []string
	// FSType is the file system type ("ext4", "tmpfs", "fuse.sshfs").
	FSType string
	// Source is the mount source, unescaped; "none" or empty for most
	// virtual file systems.
	Source string
	// SuperOptions are the file system's own options.
	SuperOptions []string
}

// ReadOnly reports whether the mount, or the file system under it, is
// mounted read-only.
func (m Mount) ReadOnly() bool {
	for _, o := range m.Options {
		if o == "ro" {
			return true
		}
	}
	for _, o := range m.SuperOptions {
		if o == "ro" {
			return true
		}
	}
	return false
}

// ParseMountinfo parses the contents of /proc/<pid>/mountinfo:
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//
// (mount id, parent id, major:minor, root, mount point, mount options,
// optional fields up to "-", then file system type, source and super
// options). Paths come unescaped (the kernel writes space, tab, newline
// and backslash as \ooo). A line that does not have this shape is an
// error: a mount the parser skipped would be a place nobody sweeps.
func ParseMountinfo(b []byte) ([]Mount, error) {
	var mounts []Mount
	for n, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		m, err := parseMountLine(string(line))
		if err != nil {
			return nil, fmt.Errorf("mountinfo line %d: %w", n+1, err)
		}
		mounts = append(mounts, m)
	}
	return mounts, nil
}

func parseMountLine(line string) (Mount, error) {
	f := strings.Split(line, " ")
	sep := -1
	for i := 6; i < len(f); i++ {
		if f[i] == "-" {
			sep = i
			break
		}
	}
	if len(f) < 10 || sep < 0 || len(f) < sep+4 {
		return Mount{}, fmt.Errorf("%q: want id, parent, dev, root, mount point, options, optional fields, \"-\", type, source and super options", line)
	}
	var m Mount
	var err error
	if m.ID, err = strconv.Atoi(f[0]); err != nil {
		return Mount{}, fmt.Errorf("mount id %q: %w", f[0], err)
	}
	if m.Parent, err = strconv.Atoi(f[1]); err != nil {
		return Mount{}, fmt.Errorf("parent id %q: %w", f[1], err)
	}
	maj, min, ok := strings.Cut(f[2], ":")
	major, err1 := strconv.ParseUint(maj, 10, 32)
	minor, err2 := strconv.ParseUint(min, 10, 32)
	if !ok || !isDigits(maj) || !isDigits(min) || err1 != nil || err2 != nil {
		return Mount{}, fmt.Errorf("device %q: want major:minor", f[2])
	}
	m.Major, m.Minor = uint32(major), uint32(minor)
	if m.Root, err = unescapeMountField(f[3]); err != nil {
		return Mount{}, fmt.Errorf("root: %w", err)
	}
	if m.Point, err = unescapeMountField(f[4]); err != nil {
		return Mount{}, fmt.Errorf("mount point: %w", err)
	}
	if !strings.HasPrefix(m.Point, "/") {
		return Mount{}, fmt.Errorf("mount point %q is not absolute", m.Point)
	}
	m.Options = strings.Split(f[5], ",")
	m.FSType = f[sep+1]
	if m.FSType == "" {
		return Mount{}, fmt.Errorf("%q: empty file system type", line)
	}
	if m.Source, err = unescapeMountField(f[sep+2]); err != nil {
		return Mount{}, fmt.Errorf("source: %w", err)
	}
	// Super options may hold escaped spaces but never a raw one; anything
	// after them is a malformed line.
	if len(f) != sep+4 {
		return Mount{}, fmt.Errorf("%q: %d fields after the type, want 3", line, len(f)-sep-1)
	}
	m.SuperOptions = strings.Split(f[sep+3], ",")
	return m, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// unescapeMountField undoes the kernel's mangle: \ooo (three octal digits)
// for a byte, as seq_file writes space, tab, newline and backslash.
func unescapeMountField(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+4 > len(s) || !isOctal(s[i+1:i+4]) {
			return "", fmt.Errorf("%q: a backslash not followed by three octal digits", s)
		}
		v, _ := strconv.ParseUint(s[i+1:i+4], 8, 16)
		if v > 0xff {
			return "", fmt.Errorf("%q: \\%s is not a byte", s, s[i+1:i+4])
		}
		b.WriteByte(byte(v))
		i += 3
	}
	return b.String(), nil
}

func isOctal(s string) bool {
	for _, c := range []byte(s) {
		if c < '0' || c > '7' {
			return false
		}
	}
	return len(s) == 3
}

// escapeMountField is unescapeMountField's inverse, as the kernel writes
// a path (for tests and the fuzz round trip).
func escapeMountField(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ' ', '\t', '\n', '\\':
			fmt.Fprintf(&b, `\%03o`, c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
