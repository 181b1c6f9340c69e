package api

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// LockFile is the state root lock's name under the state root's api
// directory.
const LockFile = "serve.lock"

// ErrStateRootLocked is returned (wrapped) by LockStateRoot when another
// process holds the state root's lock: one service per state root, or
// each would answer from its own memory for campaigns the other changes.
var ErrStateRootLocked = errors.New("served by another agentpen serve")

// StateLock is a service's exclusive hold on its state root (an flock on
// <state root>/api/serve.lock). The kernel drops it when the process
// ends, however it ends.
type StateLock struct{ f *os.File }

// LockStateRoot takes the state root's lock without waiting, creating its
// directory (0700) and file (0600) when missing, and writes this
// process's id into the file for the next one's message. It fails with
// ErrStateRootLocked, naming the lock and the holder's pid, when another
// process holds it.
func LockStateRoot(stateRoot string) (*StateLock, error) {
	path := filepath.Join(stateRoot, "api", LockFile)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("state root lock: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state root lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("state root lock %s: %w", path, err)
		}
		holder := "pid unknown"
		if b, err := os.ReadFile(path); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				holder = "pid " + strconv.Itoa(pid)
			}
		}
		return nil, fmt.Errorf("state root %s is %w (%s, lock %s): stop it first, or give this one another --state-root",
			stateRoot, ErrStateRootLocked, holder, path)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &StateLock{f: f}, nil
}

// Unlock releases the lock. The file stays (removing it would let a
// process that opened it before the removal lock an unlinked file). A
// second call does nothing.
func (l *StateLock) Unlock() {
	if l == nil || l.f == nil {
		return
	}
	l.f.Truncate(0)
	l.f.Close()
	l.f = nil
}
