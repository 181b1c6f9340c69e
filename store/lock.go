package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/beneath"
	"golang.org/x/sys/unix"
)

// ErrLocked is returned (wrapped) when another agentpen process holds a
// lock past the wait.
var ErrLocked = errors.New("locked by another agentpen process")

// DefaultLockWait bounds waiting for a campaign's lock.
const DefaultLockWait = 2 * time.Minute

// Locks is a directory of lock files agentpen's processes share: the
// daemon-wide locks (one per campaign, the allocations) and the claims of
// uid blocks. Only this user (root) can write it, whoever runs the daemon:
// a lock file is opened without following links and never written or
// truncated (who holds a lock is read from /proc/locks), so the daemon's
// user can neither plant a link root would write through nor forge a
// holder.
//
// Within one process the waiters for a lock take it in the order they
// came (a queue per lock file, ahead of the flock): a goroutine that
// releases a lock and takes it again at once (back-to-back claims of a
// pool) cannot starve another that waits for it (the pool's refill).
// Between processes the flock is polled, with no order.
type Locks struct {
	dir *beneath.Dir

	mu    sync.Mutex
	queue map[string]*lockQueue
}

// lockQueue orders a process's takers of one lock file: a taker sends
// into turn (a channel's blocked senders go first come, first served) and
// receives from it when it releases the lock.
type lockQueue struct {
	turn chan struct{}
	// waiting counts the takers blocked on turn (for tests).
	waiting atomic.Int32
}

// await waits for q's turn until ctx is done or wait passes (ErrLocked).
// A free turn is taken at once, even with no wait.
func (l *Locks) await(ctx context.Context, q *lockQueue, wait time.Duration) error {
	select {
	case q.turn <- struct{}{}:
		return nil
	default:
	}
	q.waiting.Add(1)
	defer q.waiting.Add(-1)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case q.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return ErrLocked
	}
}

// queueOf returns name's queue.
func (l *Locks) queueOf(name string) *lockQueue {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.queue == nil {
		l.queue = map[string]*lockQueue{}
	}
	q := l.queue[name]
	if q == nil {
		q = &lockQueue{turn: make(chan struct{}, 1)}
		l.queue[name] = q
	}
	return q
}

// DefaultLockBase is where Locks live by default: /run/agentpen for root,
// $XDG_RUNTIME_DIR/agentpen for another user (one who runs agentpen
// against a rootless daemon of their own).
func DefaultLockBase(getenv func(string) string) (string, error) {
	if os.Geteuid() == 0 {
		return "/run/agentpen", nil
	}
	if d := getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "agentpen"), nil
	}
	return "", errors.New("no directory for agentpen's locks: XDG_RUNTIME_DIR is not set (agentpen keeps its locks there when not run as root)")
}

// OpenLocks opens (making it 0700 when missing) the lock directory
// base/locks/<key>, where key names the daemon (every spelling of one
// daemon's socket gets the same key). base and every directory made
// under it must be this user's and writable by nobody else.
func OpenLocks(base, key string) (*Locks, error) {
	if err := os.MkdirAll(base, 0o700); err != nil {
		return nil, fmt.Errorf("lock directory: %w", err)
	}
	b, err := beneath.Open(base, trusted("lock directory", base))
	if err != nil {
		return nil, fmt.Errorf("lock directory: %w", err)
	}
	defer b.Close()
	d, err := b.MkdirAll("locks/"+key, 0o700)
	if err != nil {
		return nil, fmt.Errorf("lock directory: %w", err)
	}
	for _, name := range []string{"locks", "locks/" + key} {
		fi, err := b.Lstat(name)
		if err == nil {
			err = campaign.CheckPrivate("lock directory", b.Join(name), fi, true)
		}
		if err != nil {
			d.Close()
			return nil, fmt.Errorf("lock directory: %w", err)
		}
	}
	return &Locks{dir: d}, nil
}

// Path is the lock directory's path.
func (l *Locks) Path() string { return l.dir.Path() }

// Close closes the directory (held locks stay held).
func (l *Locks) Close() error { return l.dir.Close() }

// Lock is a held lock. The kernel drops it when its holder dies.
type Lock struct {
	f *os.File
	// q is the process's queue for it (nil for TryClaim's): its turn is
	// passed on at Unlock.
	q *lockQueue
}

// Unlock releases the lock. The file stays: removing it would let a
// process that opened it before the removal lock an unlinked file. A
// second call does nothing.
func (l *Lock) Unlock() {
	if l != nil && l.f != nil {
		l.f.Close()
		l.f = nil
		if l.q != nil {
			<-l.q.turn
		}
	}
}

// Campaign takes the lock of the campaign whose key is key, waiting until
// ctx is done or wait passes.
func (l *Locks) Campaign(ctx context.Context, key string, wait time.Duration) (*Lock, error) {
	return l.Take(ctx, key+".lock", wait)
}

// Take takes the lock file name, waiting until ctx is done or wait
// passes; the error wraps ErrLocked, naming the holder's pid, when
// another process holds it all that time.
func (l *Locks) Take(ctx context.Context, name string, wait time.Duration) (*Lock, error) {
	f, err := l.open(name)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	q := l.queueOf(name)
	if err := l.await(ctx, q, wait); err != nil {
		if errors.Is(err, ErrLocked) {
			err = fmt.Errorf("%w (%s, lock %s)", err, Holder(f), f.Name())
		}
		f.Close()
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return &Lock{f: f, q: q}, nil
		}
		fail := func(err error) (*Lock, error) {
			f.Close()
			<-q.turn
			return nil, err
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return fail(fmt.Errorf("lock %s: %w", f.Name(), err))
		}
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("%w (%s, lock %s)", ErrLocked, Holder(f), f.Name()))
		}
		select {
		case <-ctx.Done():
			return fail(ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TryClaim takes the lock file dir/name without waiting; ok is false when
// another process holds it.
func (l *Locks) TryClaim(dir, name string) (lock *Lock, ok bool, err error) {
	d, err := l.dir.MkdirAll(dir, 0o700)
	if err != nil {
		return nil, false, fmt.Errorf("claims: %w", err)
	}
	d.Close()
	f, err := l.open(dir + "/" + name)
	if err != nil {
		return nil, false, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, err
	}
	return &Lock{f: f}, true, nil
}

// open opens (creating) a lock file without following links, and checks
// it is a private regular file.
func (l *Locks) open(name string) (*os.File, error) {
	f, err := l.dir.OpenFile(name, os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	fi, err := f.Stat()
	if err == nil {
		err = campaign.CheckPrivate("lock", f.Name(), fi, false)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Holder names the process that holds an flock on f ("pid N"), from
// /proc/locks; "pid unknown" when it cannot tell.
func Holder(f *os.File) string {
	fi, err := f.Stat()
	if err != nil {
		return "pid unknown"
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "pid unknown"
	}
	locks, err := os.Open("/proc/locks")
	if err != nil {
		return "pid unknown"
	}
	defer locks.Close()
	// "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF": the holder's
	// pid, then the file's device (major:minor, hex) and inode. A waiter's
	// line reads "1: -> FLOCK ...".
	want := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	sc := bufio.NewScanner(locks)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 6 && f[1] == "FLOCK" && f[5] == want {
			if pid, err := strconv.Atoi(f[4]); err == nil {
				return "pid " + strconv.Itoa(pid)
			}
		}
	}
	return "pid unknown"
}

// ErrServed is returned (wrapped) by LockServe when another process serves
// the state root.
var ErrServed = errors.New("served by another agentpen serve")

// serveLock is agentpen serve's lock file under the root.
const serveLock = "api/serve.lock"

// LockServe takes the root's service lock without waiting: one agentpen
// serve per state root, or each would answer from its own memory for
// campaigns the other changes. The error wraps ErrServed, naming the
// holder, when another process holds it.
func (r *Root) LockServe() (*Lock, error) {
	if r.dir == nil {
		return nil, rootError(r.path, errors.New("opened for reading only"))
	}
	d, err := r.dir.MkdirAll("api", 0o700)
	if err != nil {
		return nil, rootError(r.path, err)
	}
	defer d.Close()
	if fi, err := d.Stat(); err == nil {
		if err := campaign.CheckPrivate("state root", d.Path(), fi, true); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrStateRoot, err)
		}
	}
	f, err := r.dir.OpenFile(serveLock, os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state root lock: %w", err)
	}
	fi, err := f.Stat()
	if err == nil {
		err = campaign.CheckPrivate("lock", f.Name(), fi, false)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := Holder(f)
		f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("state root lock %s: %w", r.dir.Join(serveLock), err)
		}
		return nil, fmt.Errorf("state root %s is %w (%s, lock %s): stop it first, or give this one another --state-root",
			r.path, ErrServed, holder, r.dir.Join(serveLock))
	}
	return &Lock{f: f}, nil
}
