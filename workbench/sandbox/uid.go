package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// SpaceFirst..SpaceLimit-1 are the uids agentpen gives sandboxes on one
// Docker daemon (campaign's uid blocks lie inside; a test holds them to
// it). Every workspace's Range lies inside, and no other user of a
// container should: IsSandboxUID treats every uid of the space as episode
// code, whichever workspace's block it is in. The space stops short of
// 65534, the kernel's overflow uid: a process of a user the container's
// user namespace does not map (the host's root, calling a workspace's
// socket from the host) shows up as it, and is not episode code.
const (
	SpaceFirst = 20000
	SpaceLimit = 65534
)

// Range is the block of uids one process's sandbox uses: episodes get
// Base..Base+Count-2 (Slots of them) and the last, Killer, is the real uid
// of the kill thread, which no process may run as. A campaign gives each
// workspace a block of its own (WORKBENCH_UID_BASE, WORKBENCH_UID_COUNT),
// so no kernel uid is shared between two agents' episode code.
type Range struct {
	Base, Count int
}

// DefaultRange is the range of a server started outside a campaign:
// 20000..21023 for episodes and 21024 for the kill thread.
var DefaultRange = Range{Base: SpaceFirst, Count: 1025}

// Slots is how many uids episodes get.
func (r Range) Slots() int { return r.Count - 1 }

// Killer is the kill thread's real uid, the range's last.
func (r Range) Killer() int { return r.Base + r.Count - 1 }

// Contains reports whether uid is one r hands to episodes.
func (r Range) Contains(uid int) bool { return uid >= r.Base && uid < r.Base+r.Slots() }

// String is "base-last", the form of the io.agentpen.uid-block label.
func (r Range) String() string { return fmt.Sprintf("%d-%d", r.Base, r.Base+r.Count-1) }

// Validate returns an error unless r has at least one episode uid and its
// killer, all inside SpaceFirst..SpaceLimit-1.
func (r Range) Validate() error {
	switch {
	case r.Count < 2:
		return fmt.Errorf("uid range %d+%d: needs at least 2 uids (one for episodes, one for the kill thread)", r.Base, r.Count)
	case r.Base < SpaceFirst || r.Base+r.Count > SpaceLimit:
		return fmt.Errorf("uid range %d+%d: must lie within %d..%d", r.Base, r.Count, SpaceFirst, SpaceLimit-1)
	}
	return nil
}

// RangeFromEnv reads WORKBENCH_UID_BASE and WORKBENCH_UID_COUNT through
// getenv: DefaultRange when both are unset, an error when only one is set
// or either is not a valid number, or the range not Valid. A server must
// not fall back to the default when a campaign gave it a block: two
// workspaces would then share uids.
func RangeFromEnv(getenv func(string) string) (Range, error) {
	base, count := getenv("WORKBENCH_UID_BASE"), getenv("WORKBENCH_UID_COUNT")
	if base == "" && count == "" {
		return DefaultRange, nil
	}
	if base == "" || count == "" {
		return Range{}, fmt.Errorf("WORKBENCH_UID_BASE=%q WORKBENCH_UID_COUNT=%q: set both or neither", base, count)
	}
	b, err1 := strconv.Atoi(base)
	c, err2 := strconv.Atoi(count)
	if err1 != nil || err2 != nil {
		return Range{}, fmt.Errorf("WORKBENCH_UID_BASE=%q WORKBENCH_UID_COUNT=%q: not numbers", base, count)
	}
	r := Range{Base: b, Count: c}
	if err := r.Validate(); err != nil {
		return Range{}, fmt.Errorf("WORKBENCH_UID_BASE and WORKBENCH_UID_COUNT: %w", err)
	}
	return r, nil
}

// ErrNoFreeUID is returned (wrapped) by Claim when every uid is held.
var ErrNoFreeUID = errors.New("no free sandbox uid: too many live episodes")

// Available reports whether a uid sandbox can be used: the process runs
// as root.
func Available() bool { return os.Geteuid() == 0 }

// IsSandboxUID reports whether uid may be episode code's, in this
// workspace or any other on the daemon (SpaceFirst..SpaceLimit-1), so a
// server can refuse connections from it and the checks of what episode
// code can reach treat it as hostile.
func IsSandboxUID(uid int) bool { return uid >= SpaceFirst && uid < SpaceLimit }

// Pool hands out a Range's uids, each held by an exclusive flock on its
// own file in a directory only root may write, so two workbench processes
// (or two Sandboxes) on one machine never hand out the same uid, and a
// process that dies frees its uids with its descriptors.
type Pool struct {
	dir string
	r   Range

	mu   sync.Mutex
	held map[int]*os.File
	next int
}

// NewPool returns a pool of r's uids locked in dir. A Sandbox makes its
// own; tests that run processes as a sandbox uid claim it from one too.
func NewPool(dir string, r Range) *Pool {
	return &Pool{dir: filepath.Clean(dir), r: r, held: map[int]*os.File{}}
}

// Dir returns the pool's lock directory.
func (p *Pool) Dir() string { return p.dir }

// Range returns the range the pool hands uids out of.
func (p *Pool) Range() Range { return p.r }

// Claim returns a uid that no other episode of any process using the same
// lock directory holds. Slots are handed out in rotation, so a uid just
// released is the last to be reused.
func (p *Pool) Claim() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := EnsurePrivateDir(p.dir); err != nil {
		return 0, err
	}
	slots := p.r.Slots()
	for step := range slots {
		slot := (p.next + step) % slots
		uid := p.r.Base + slot
		if _, mine := p.held[uid]; mine {
			continue
		}
		path := filepath.Join(p.dir, strconv.Itoa(uid))
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
		if err != nil {
			return 0, fmt.Errorf("open uid lock %s: %w", path, err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				continue // another process holds it
			}
			return 0, fmt.Errorf("lock %s: %w", path, err)
		}
		p.held[uid] = f
		p.next = (slot + 1) % slots
		return uid, nil
	}
	return 0, fmt.Errorf("claim uid in %s: %w", p.dir, ErrNoFreeUID)
}

// Release frees uid; releasing a uid the pool does not hold does nothing.
func (p *Pool) Release(uid int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f, ok := p.held[uid]; ok {
		delete(p.held, uid)
		f.Close()
	}
}

// Holds reports whether this process holds uid through p.
func (p *Pool) Holds(uid int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.held[uid]
	return ok
}

// EnsurePrivateDir makes dir (mode 0700, missing parents 0755) when it is
// missing, and returns an error unless it is a directory, not a symlink,
// owned by this process's user and writable by no one else.
func EnsurePrivateDir(dir string) error {
	if err := ensureDir(dir, 0o700); err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return fmt.Errorf("stat %s: %w", dir, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != os.Geteuid() || st.Mode&0o022 != 0 {
		return fmt.Errorf("%s must be a directory only uid %d can write (mode %#o, owner %d)", dir, os.Geteuid(), st.Mode&0o7777, st.Uid)
	}
	return nil
}

// ensureDir makes dir with mode when missing; missing parents get 0755 so
// a directory below them stays reachable.
func ensureDir(dir string, mode uint32) error {
	if _, err := os.Lstat(dir); err == nil {
		return nil
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := ensureDir(parent, 0o755); err != nil {
			return err
		}
	}
	if err := unix.Mkdir(dir, mode); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("mkdir %s: %w", dir, err)
	}
	if err := unix.Chmod(dir, mode); err != nil {
		return fmt.Errorf("chmod %s: %w", dir, err)
	}
	return nil
}

// RangeFileName is the file in a pool's lock directory where a server
// records the range it hands uids out of (RecordRange), so a probe in the
// container can compare what the server runs with what it was given.
const RangeFileName = "range"

// RecordRange writes r (Range.String) to dir/RangeFileName, making dir
// as EnsurePrivateDir does; the write is atomic (a temporary file renamed
// over it).
func RecordRange(dir string, r Range) error {
	if err := EnsurePrivateDir(dir); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".range-*")
	if err != nil {
		return fmt.Errorf("record uid range: %w", err)
	}
	_, werr := f.WriteString(r.String() + "\n")
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("record uid range: %w", err)
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, RangeFileName)); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("record uid range: %w", err)
	}
	return nil
}

// ParseRange reads Range.String's "base-last" form back.
func ParseRange(s string) (Range, error) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), "-")
	first, err1 := strconv.Atoi(a)
	last, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil {
		return Range{}, fmt.Errorf("uid range %q: want base-last", s)
	}
	r := Range{Base: first, Count: last - first + 1}
	if err := r.Validate(); err != nil {
		return Range{}, err
	}
	return r, nil
}
