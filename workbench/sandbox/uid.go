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

var (
	rangeMu   sync.Mutex
	current   = DefaultRange
	rangeUsed bool
)

// SetRange makes r the process's range. It must come before anything uses
// the range (a Pool, a kill, the shared places); afterwards it fails, so a
// process never hands out uids of two ranges.
func SetRange(r Range) error {
	if err := r.Validate(); err != nil {
		return err
	}
	rangeMu.Lock()
	defer rangeMu.Unlock()
	if rangeUsed && r != current {
		return fmt.Errorf("uid range %v: the sandbox already uses %v", r, current)
	}
	current = r
	return nil
}

// CurrentRange returns the process's range (DefaultRange unless SetRange
// changed it) and fixes it: SetRange to another range fails from now on.
func CurrentRange() Range {
	rangeMu.Lock()
	defer rangeMu.Unlock()
	rangeUsed = true
	return current
}

// DefaultLockDir is where uid lock files live unless WORKBENCH_UID_LOCK_DIR
// names another directory.
const DefaultLockDir = "/run/agent-workbench/uids"

// ErrNoFreeUID is returned (wrapped) by Claim when every uid is held.
var ErrNoFreeUID = errors.New("no free sandbox uid: too many live episodes")

// Available reports whether the uid sandbox can be used: the process runs
// as root.
func Available() bool { return os.Geteuid() == 0 }

// IsSandboxUID reports whether uid may be episode code's, in this
// workspace or any other on the daemon (SpaceFirst..SpaceLimit-1), so a
// server can refuse connections from it and the checks of what episode
// code can reach treat it as hostile.
func IsSandboxUID(uid int) bool { return uid >= SpaceFirst && uid < SpaceLimit }

// LockDir returns the uid lock directory: WORKBENCH_UID_LOCK_DIR, or
// DefaultLockDir when that is empty.
func LockDir() string {
	if d := os.Getenv("WORKBENCH_UID_LOCK_DIR"); d != "" {
		return d
	}
	return DefaultLockDir
}

// Pool hands out sandbox uids, each held by an exclusive flock on its own
// file in Dir. Use PoolFor so every user of one directory in a process
// shares the rotation.
type Pool struct {
	dir string
	r   Range // CurrentRange when the pool was made

	mu      sync.Mutex
	held    map[int]*os.File
	retired map[int]bool // held until no process of the uid is alive
	clean   map[int]bool // the lock file said clean when claimed
	next    int

	// alive reports the uid's live processes; nil means LiveProcesses
	// (tests replace it).
	alive func(uid int) ([]int, error)
}

var (
	poolsMu sync.Mutex
	pools   = map[string]*Pool{}
)

// PoolFor returns the process's pool for the lock directory dir (LockDir()
// when empty). Its uids are CurrentRange's.
func PoolFor(dir string) *Pool {
	if dir == "" {
		dir = LockDir()
	}
	dir = filepath.Clean(dir)
	poolsMu.Lock()
	defer poolsMu.Unlock()
	p, ok := pools[dir]
	if !ok {
		p = newPool(dir, CurrentRange())
		pools[dir] = p
	}
	return p
}

func newPool(dir string, r Range) *Pool {
	return &Pool{dir: dir, r: r, held: map[int]*os.File{}, retired: map[int]bool{}, clean: map[int]bool{}}
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
	p.releaseRetiredLocked()
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
		var mark [1]byte
		n, _ := f.ReadAt(mark[:], 0)
		p.clean[uid] = n == 1 && mark[0] == cleanMark
		p.next = (slot + 1) % slots
		return uid, nil
	}
	return 0, fmt.Errorf("claim uid in %s: %w", p.dir, ErrNoFreeUID)
}

// Release frees uid; releasing a uid the pool does not hold does nothing.
func (p *Pool) Release(uid int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.retired, uid)
	delete(p.clean, uid)
	if f, ok := p.held[uid]; ok {
		delete(p.held, uid)
		f.Close()
	}
}

// The first byte of a uid's lock file says whether its last holder left
// nothing of it behind (cleanMark) or may have (anything else: dirtyMark,
// or an empty file that no holder wrote yet).
const (
	cleanMark = 'c'
	dirtyMark = 'd'
)

// Clean reports whether, when p claimed uid, its lock file said that the
// previous holder (in any process) released it with nothing of it left:
// no process, no file in the shared tmp directories, no IPC object, no
// home. It is false for a uid never used and for one whose holder died
// while it had given the uid anything.
func (p *Pool) Clean(uid int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.clean[uid]
}

// SetClean records in uid's lock file whether nothing of it is left: a
// holder sets false before it gives the uid anything (a home, a process)
// and true once it removed all of it, just before Release. Only a holder
// may call it.
func (p *Pool) SetClean(uid int, clean bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, ok := p.held[uid]
	if !ok {
		return fmt.Errorf("mark uid %d: not held", uid)
	}
	mark := []byte{dirtyMark}
	if clean {
		mark[0] = cleanMark
	}
	if _, err := f.WriteAt(mark, 0); err != nil {
		return fmt.Errorf("mark uid %d: %w", uid, err)
	}
	p.clean[uid] = clean
	return nil
}

// Retire keeps uid held after its episode ended with processes of the
// uid still alive (KillUntilNone gave up): no episode gets the uid while
// they may still run, and a later Claim releases it once none is alive.
func (p *Pool) Retire(uid int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.held[uid]; ok {
		p.retired[uid] = true
	}
}

// releaseRetiredLocked releases each retired uid that has no live process
// left (the probe sends SIGKILL again on the way).
func (p *Pool) releaseRetiredLocked() {
	alive := p.alive
	if alive == nil {
		alive = LiveProcesses
	}
	for uid := range p.retired {
		if left, err := alive(uid); err != nil || len(left) > 0 {
			continue
		}
		delete(p.retired, uid)
		delete(p.clean, uid)
		if f, ok := p.held[uid]; ok {
			delete(p.held, uid)
			f.Close()
		}
	}
}

// Retired reports whether uid is held by p only until its processes are
// gone (Retire).
func (p *Pool) Retired(uid int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.retired[uid]
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

// RecordRange writes CurrentRange (Range.String) to dir/RangeFileName,
// making dir as EnsurePrivateDir does; the write is atomic (a temporary
// file renamed over it).
func RecordRange(dir string) error {
	if err := EnsurePrivateDir(dir); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".range-*")
	if err != nil {
		return fmt.Errorf("record uid range: %w", err)
	}
	_, werr := f.WriteString(CurrentRange().String() + "\n")
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
