package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// UIDBase is the first uid the sandbox hands out.
const UIDBase = 20000

// UIDSlots is how many uids the sandbox hands out: UIDBase..UIDBase+UIDSlots-1.
const UIDSlots = 1024

// DefaultLockDir is where uid lock files live unless WORKBENCH_UID_LOCK_DIR
// names another directory.
const DefaultLockDir = "/run/agent-workbench/uids"

// ErrNoFreeUID is returned (wrapped) by Claim when every uid is held.
var ErrNoFreeUID = errors.New("no free sandbox uid: too many live episodes")

// Available reports whether the uid sandbox can be used: the process runs
// as root.
func Available() bool { return os.Geteuid() == 0 }

// IsSandboxUID reports whether uid is one the sandbox hands out, so a
// server can refuse connections from episode code.
func IsSandboxUID(uid int) bool { return uid >= UIDBase && uid < UIDBase+UIDSlots }

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
// when empty).
func PoolFor(dir string) *Pool {
	if dir == "" {
		dir = LockDir()
	}
	dir = filepath.Clean(dir)
	poolsMu.Lock()
	defer poolsMu.Unlock()
	p, ok := pools[dir]
	if !ok {
		p = &Pool{dir: dir, held: map[int]*os.File{}, retired: map[int]bool{}, clean: map[int]bool{}}
		pools[dir] = p
	}
	return p
}

// Dir returns the pool's lock directory.
func (p *Pool) Dir() string { return p.dir }

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
	for step := range UIDSlots {
		slot := (p.next + step) % UIDSlots
		uid := UIDBase + slot
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
		p.next = (slot + 1) % UIDSlots
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
