package sandbox

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// onOwnThread runs fn on an OS thread locked to it that is not the
// process's main thread, for fn to switch that thread's ids (AsUID,
// KillAllOfUID). fn sets *restored once the thread's ids are
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
