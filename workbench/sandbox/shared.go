package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"golang.org/x/sys/unix"
)

// SharedPlaces are the places outside its workspace where episode code can
// leave something for a later run or episode: the world-writable
// directories of the mount table and the POSIX message queues of this IPC
// namespace (System V IPC objects are found by RemoveIPC on their own).
// FindSharedPlaces fills it; it does not change afterwards.
type SharedPlaces struct {
	// Dirs are the world-writable directories that a sandbox uid can
	// reach and write, each the top of a tree the sweep walks: a
	// directory whose parent is world-writable too is reached through its
	// parent and not listed.
	Dirs []string
	// Queues says how the POSIX message queues are seen: through a
	// private mount of the mqueue file system, through the mount named,
	// or not at all because the kernel has none.
	Queues string
	// Skipped says what the search left out and why: a walk that hit
	// its bound, a directory that could not be read. Empty when nothing
	// was.
	Skipped []string

	// queueDir is the root of the mqueue file system, opened O_PATH (a
	// mount fd for a private mount); -1 when the kernel has no POSIX
	// message queues.
	queueDir int
}

// Bounds of the search for world-writable directories, so a host with a
// huge or hostile tree (a 10,000-deep one left in /tmp) cannot stall a
// server's start.
const (
	// findMaxDepth is how deep below a mount point directories are
	// entered.
	findMaxDepth = 48
	// findMaxEntries bounds the directory entries read over all mounts.
	findMaxEntries = 4 << 20
)

// pseudoFS are file system types that hold no files episode code could
// write (kernel interfaces), or that are swept another way (mqueue).
var pseudoFS = map[string]bool{
	"proc": true, "sysfs": true, "cgroup": true, "cgroup2": true, "devpts": true,
	"securityfs": true, "debugfs": true, "tracefs": true, "pstore": true, "bpf": true,
	"configfs": true, "fusectl": true, "binfmt_misc": true, "efivarfs": true,
	"autofs": true, "nsfs": true, "rpc_pipefs": true, "selinuxfs": true, "mqueue": true,
}

var (
	sharedOnce = sync.OnceValues(func() (*SharedPlaces, error) {
		b, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			return nil, fmt.Errorf("find shared places: %w", err)
		}
		mounts, err := ParseMountinfo(b)
		if err != nil {
			return nil, fmt.Errorf("find shared places: %w", err)
		}
		return FindSharedPlaces(mounts)
	})
)

// DefaultSharedPlaces returns the shared places of this process's mount
// table and IPC namespace, found on the first call (FindSharedPlaces over
// /proc/self/mountinfo) and the same afterwards: a directory made
// world-writable later is not among them. It is what Sweep sweeps; a
// server calls it at start to fail early and log what it found.
func DefaultSharedPlaces() (*SharedPlaces, error) { return sharedOnce() }

// Sweep removes everything uid left in the shared places
// (DefaultSharedPlaces): its files at any depth in every shared
// directory, its POSIX message queues and its System V IPC objects. It
// goes on past errors and returns them all.
func Sweep(uid int) error {
	if uid < 0 {
		return nil
	}
	p, err := DefaultSharedPlaces()
	if err != nil {
		return err
	}
	return p.Sweep(uid)
}

// Sweep removes everything uid left in p's places, and its System V IPC
// objects (RemoveIPC). Everything is done as the uid (AsUID), so the
// kernel lets it remove the uid's own entries only: never another uid's
// or root's, never through a symlink to a place the uid could not reach.
func (p *SharedPlaces) Sweep(uid int) error {
	if uid < 0 {
		return nil
	}
	return errors.Join(
		RemoveSharedTmp(uid, p.Dirs),
		p.removeQueues(uid),
		RemoveIPC(uid),
	)
}

// Close releases the view of the message queues. The places returned by
// DefaultSharedPlaces are never closed.
func (p *SharedPlaces) Close() error {
	if p.queueDir < 0 {
		return nil
	}
	fd := p.queueDir
	p.queueDir = -1
	return unix.Close(fd)
}

// FindSharedPlaces finds the shared places of a mount table (as
// ParseMountinfo returns it): every writable mount whose file system holds
// files is walked from its mount point (bounded; never through a symlink,
// never into another mount or a directory others cannot pass through), and
// every world-writable directory found is kept if a sandbox uid can
// actually write it (faccessat as CurrentRange().Base, which also checks every
// directory on its path). It also opens a view of the POSIX message queues
// (openQueueView). It needs root.
func FindSharedPlaces(mounts []Mount) (*SharedPlaces, error) {
	p := &SharedPlaces{queueDir: -1}
	budget := findMaxEntries
	seenPoints := map[string]bool{}
	var candidates []string
	for _, m := range mounts {
		if pseudoFS[m.FSType] || m.ReadOnly() || seenPoints[m.Point] {
			continue
		}
		seenPoints[m.Point] = true
		found, skipped := findWorldWritable(m.Point, &budget)
		candidates = append(candidates, found...)
		p.Skipped = append(p.Skipped, skipped...)
	}
	slices.Sort(candidates)
	candidates = slices.Compact(candidates)
	err := AsUID(CurrentRange().Base, func() error {
		for _, d := range candidates {
			if unix.Faccessat(unix.AT_FDCWD, d, unix.W_OK|unix.X_OK, unix.AT_EACCESS) == nil {
				p.Dirs = append(p.Dirs, d)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("find shared places: %w", err)
	}
	if err := p.openQueueView(mounts); err != nil {
		return nil, err
	}
	return p, nil
}

// findWorldWritable walks the mount at point and returns the
// world-writable directories whose parent is not, and notes on what it
// left out. budget is the directory entries it may still read.
func findWorldWritable(point string, budget *int) (found, skipped []string) {
	const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Open(point, dirFlags, 0)
	if err != nil {
		// A mount of a file (Docker masks paths with /dev/null) holds no
		// directory; one that is gone or closed to root holds none either.
		if !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EACCES) && !errors.Is(err, unix.ENOTDIR) {
			skipped = append(skipped, fmt.Sprintf("%s: %v", point, err))
		}
		return nil, skipped
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, append(skipped, fmt.Sprintf("%s: %v", point, err))
	}
	dev := st.Dev
	type dir struct {
		fd    int
		path  string
		depth int
		ww    bool // world-writable: its world-writable children are reached through it
	}
	rootWW := worldWritable(&st)
	if rootWW {
		found = append(found, point)
	}
	if st.Mode&unix.S_IXOTH == 0 {
		unix.Close(fd)
		return found, skipped
	}
	stack := []dir{{fd: fd, path: point, ww: rootWW}}
	buf := make([]byte, direntBufSize)
	var names []string
	for len(stack) > 0 {
		d := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		var err error
		names, err = readSubdirs(d.fd, buf, names[:0], budget)
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("%s: %v", d.path, err))
		}
		for _, name := range names {
			var cst unix.Stat_t
			if unix.Fstatat(d.fd, name, &cst, unix.AT_SYMLINK_NOFOLLOW) != nil || cst.Mode&unix.S_IFMT != unix.S_IFDIR {
				continue
			}
			if cst.Dev != dev {
				continue // another mount: walked from its own mount point
			}
			path := filepath.Join(d.path, name)
			ww := worldWritable(&cst)
			if ww && !d.ww && !IsSandboxUID(int(cst.Uid)) {
				found = append(found, path)
			}
			// Others reach nothing below a directory they cannot pass
			// through; a sandbox uid's own directory is reached through the
			// shared directory it was made in.
			if cst.Mode&unix.S_IXOTH == 0 || IsSandboxUID(int(cst.Uid)) {
				continue
			}
			if d.depth+1 > findMaxDepth {
				skipped = append(skipped, fmt.Sprintf("%s: deeper than %d directories below %s, not searched", path, findMaxDepth, point))
				continue
			}
			cfd, err := unix.Openat(d.fd, name, dirFlags, 0)
			if err != nil {
				continue
			}
			stack = append(stack, dir{fd: cfd, path: path, depth: d.depth + 1, ww: ww})
		}
		unix.Close(d.fd)
		if *budget <= 0 {
			for _, rest := range stack {
				unix.Close(rest.fd)
			}
			return found, append(skipped, fmt.Sprintf("%s: stopped after reading %d directory entries", point, findMaxEntries))
		}
	}
	return found, skipped
}

// worldWritable reports whether st is a directory others may write and
// pass through.
func worldWritable(st *unix.Stat_t) bool {
	return st.Mode&unix.S_IFMT == unix.S_IFDIR && st.Mode&unix.S_IWOTH != 0 && st.Mode&unix.S_IXOTH != 0
}

// direntBufSize is the getdents buffer of a walk: one, reused for every
// directory, so a walk of a whole host leaves little garbage behind.
const direntBufSize = 8 << 10

// readDirNames lists the directory open at fd, taking each name read from
// budget; it stops when budget runs out.
func readDirNames(fd int, budget *int) ([]string, error) {
	var names []string
	err := readDirents(fd, make([]byte, direntBufSize), budget, func(name []byte, _ byte) { names = append(names, string(name)) })
	return names, err
}

// readSubdirs appends to names those in the directory open at fd that may
// be directories: the file system says so, or does not say
// (DT_UNKNOWN). buf is getdents' buffer. Each entry read is taken from
// budget; it stops when budget runs out.
func readSubdirs(fd int, buf []byte, names []string, budget *int) ([]string, error) {
	err := readDirents(fd, buf, budget, func(name []byte, typ byte) {
		if typ == unix.DT_DIR || typ == unix.DT_UNKNOWN {
			names = append(names, string(name))
		}
	})
	return names, err
}

// readDirents calls fn with the name and type of each entry of the
// directory open at fd but "." and "..", from fd's current offset, reading
// into buf. name is valid during the call only.
func readDirents(fd int, buf []byte, budget *int, fn func(name []byte, typ byte)) error {
	for *budget > 0 {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			return err
		}
		if n <= 0 {
			return nil
		}
		// struct linux_dirent64: ino u64, off s64, reclen u16, type u8,
		// then the name, NUL-terminated and padded.
		for b := buf[:n]; len(b) >= 19; {
			reclen := int(b[16]) | int(b[17])<<8
			if reclen < 19 || reclen > len(b) {
				return fmt.Errorf("getdents: bad record length %d", reclen)
			}
			name := b[19:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			if !(len(name) == 1 && name[0] == '.') && !(len(name) == 2 && name[0] == '.' && name[1] == '.') {
				*budget--
				fn(name, b[18])
			}
			b = b[reclen:]
		}
	}
	return nil
}
