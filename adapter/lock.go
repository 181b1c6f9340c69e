package adapter

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrLocked is returned (wrapped) when another agentpen process holds a
// campaign's lock past the wait.
var ErrLocked = errors.New("campaign is locked by another agentpen process")

// DefaultLockWait bounds waiting for a campaign's lock.
const DefaultLockWait = 2 * time.Minute

// campaignLock serialises every operation on one campaign id on one daemon,
// whatever the state root and however DOCKER_HOST spells the socket: the
// lock file lives in the daemon's lock directory (lockDir: its socket's
// real directory and its identity), so two agentpen processes with
// different state roots (a twin campaign) wait for each other instead of
// racing. The kernel drops the lock when its holder dies.
type campaignLock struct{ f *os.File }

// lockCampaign takes the campaign's lock, waiting until ctx is done or
// wait passes. The file records the holder's pid for the error message.
func (a *Adapter) lockCampaign(ctx context.Context, key string, wait time.Duration) (*campaignLock, error) {
	return a.lockPath(ctx, filepath.Join(a.lockDir(), key+".lock"), wait)
}

// lockPath takes an exclusive flock on the file at path (in the daemon's
// lock directory), waiting until ctx is done or wait passes.
func (a *Adapter) lockPath(ctx context.Context, path string, wait time.Duration) (*campaignLock, error) {
	if err := a.ensureLockDir(); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("campaign lock: %w", err)
	}
	deadline := time.Now().Add(wait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("campaign lock %s: %w", path, err)
		}
		if time.Now().After(deadline) {
			holder, _ := os.ReadFile(path)
			f.Close()
			return nil, fmt.Errorf("%w (pid %s, lock %s)", ErrLocked, strings.TrimSpace(string(holder)), path)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &campaignLock{f: f}, nil
}

// unlock releases the lock. The file stays: removing it would let a
// process that opened it before the removal lock an unlinked file.
func (l *campaignLock) unlock() {
	if l != nil && l.f != nil {
		l.f.Truncate(0)
		l.f.Close()
		l.f = nil
	}
}
