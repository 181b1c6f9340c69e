package sandbox

import (
	"os/exec"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// onOwnThread runs fn on an OS thread locked to it that is not the
// process's main thread, for fn to switch that thread's ids (AsUID,
// RemoveIPC, KillAllOfUID). fn sets *restored once the thread's ids are
// back as they were; a thread that could not be restored dies with its
// goroutine instead of returning to the scheduler.
//
// Never the main thread: its credentials are the process's as everyone
// else sees them. /proc/<pid>/status shows them (a scan for a sandbox
// uid's processes would find the server itself), and the kernel checks
// them when another process sends this one a signal (a kill(-1) sent as
// its range's killer uid by another workbench process would end this one while its
// main thread had that real uid).
func onOwnThread(fn func(restored *bool) error) error {
	done := make(chan error, 1)
	go runOffMain(fn, done)
	return <-done
}

// OnThrowawayThread runs fn on an OS thread locked to it that is not the
// process's main thread, and ends that thread when fn returns: for code
// outside this package that switches the thread's ids and never switches
// them back (the isolation probe's connect as a sandbox uid). A goroutine
// that locks its thread and exits ends that thread, except the main
// thread, which the Go runtime keeps, parked, with whatever ids it had:
// a probe's dial that happened to run there left the whole process
// looking like the sandbox uid's for the rest of its life.
func OnThrowawayThread(fn func() error) error {
	return onOwnThread(func(*bool) error { return fn() })
}

// runOffMain locks its goroutine to a thread; when that is the main
// thread it keeps it locked, so another goroutine cannot be given it, and
// runs fn on a goroutine of its own.
func runOffMain(fn func(restored *bool) error, done chan<- error) {
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		inner := make(chan error, 1)
		go runOffMain(fn, inner)
		err := <-inner
		runtime.UnlockOSThread()
		done <- err
		return
	}
	restored := false
	defer func() {
		if restored {
			runtime.UnlockOSThread()
		}
	}()
	done <- fn(&restored)
}

// startFiltered starts cmd from the spawner: one OS thread of its own
// (never the main thread) that set no_new_privs and installed the syscall
// filter on itself once (installFilter). A forked child inherits both from
// the thread that forked it (os/exec forks from the calling thread), keeps
// them across exec, and passes them to everything it starts. Neither can
// be removed from a thread, so the spawner's goroutine keeps its thread
// locked for the life of the process and does nothing but start
// processes; the Go runtime starts no thread from a locked one (it hands
// that to its template thread), so no other thread of the server
// inherits them. Starts are served one at a time (each takes the fork and
// the launcher's exec, a fraction of a millisecond).
func startFiltered(cmd *exec.Cmd) error {
	spawner.once.Do(func() {
		spawner.reqs = make(chan spawnRequest)
		ready := make(chan error, 1)
		go spawnLoop(ready)
		spawner.err = <-ready
	})
	if spawner.err != nil {
		return spawner.err
	}
	done := make(chan error, 1)
	spawner.reqs <- spawnRequest{cmd, done}
	return <-done
}

// spawner is the process's spawner thread, started on first use.
var spawner struct {
	once sync.Once
	err  error // the filter could not be installed
	reqs chan spawnRequest
	tid  int // the spawner thread, for tests
}

type spawnRequest struct {
	cmd  *exec.Cmd
	done chan<- error
}

// spawnLoop locks its goroutine to a thread other than the main thread
// for good, installs the filter there and serves start requests.
func spawnLoop(ready chan<- error) {
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		// On the main thread: move to a goroutine of its own (which cannot
		// get the main thread while this one holds it), then give the main
		// thread back unchanged.
		started := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			close(started)
			spawnLoop(ready)
		}()
		<-started
		runtime.UnlockOSThread()
		return
	}
	// Locked for good from here.
	if err := installFilter(); err != nil {
		ready <- err
		return
	}
	spawner.tid = unix.Gettid()
	ready <- nil
	for r := range spawner.reqs {
		r.done <- r.cmd.Start()
	}
}
