package sandbox

import (
	"os/exec"
	"runtime"

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
// KillerRealUID by another workbench process would end this one while its
// main thread had that real uid).
func onOwnThread(fn func(restored *bool) error) error {
	done := make(chan error, 1)
	go runOffMain(fn, done)
	return <-done
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

// startFiltered starts cmd from an OS thread of its own that has
// no_new_privs and the syscall filter (installFilter): a forked child
// inherits both from the thread that forked it (os/exec forks from the
// calling thread), keeps them across exec, and passes them to everything
// it starts. Neither can be removed from a thread, so that thread is never
// handed back to the scheduler: it exits with its goroutine. The Go
// runtime starts no thread from a locked one (it hands that to its
// template thread), so no other thread of the server inherits them.
func startFiltered(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	go startOffMain(cmd, done)
	return <-done
}

// startOffMain is runOffMain's counterpart for startFiltered: the thread
// it changes is never the main thread and never unlocked.
func startOffMain(cmd *exec.Cmd, done chan<- error) {
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		inner := make(chan error, 1)
		go startOffMain(cmd, inner)
		err := <-inner
		runtime.UnlockOSThread() // the main thread was not changed
		done <- err
		return
	}
	// Locked for good from here: the thread dies with this goroutine.
	if err := installFilter(); err != nil {
		done <- err
		return
	}
	done <- cmd.Start()
}
