package sandbox

import (
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// fromMain records onOwnThread called from the main thread, which only
// TestMain can do: whether it was there, and the thread fn ran on.
var fromMain struct {
	onMain bool
	ranOn  int
	err    error
}

func TestMain(m *testing.M) {
	runHelperIfRequested()
	runtime.LockOSThread()
	fromMain.onMain = unix.Gettid() == unix.Getpid()
	fromMain.err = onOwnThread(func(restored *bool) error {
		fromMain.ranOn = unix.Gettid()
		*restored = true
		return nil
	})
	runtime.UnlockOSThread()
	os.Exit(m.Run())
}

// TestOwnThreadNeverMain: called from the main thread, onOwnThread runs fn
// on another one (a switched main thread would be the process's
// credentials for everyone else).
func TestOwnThreadNeverMain(t *testing.T) {
	if !fromMain.onMain {
		t.Fatal("TestMain did not run on the main thread, so the main-thread case was not exercised")
	}
	if fromMain.err != nil || fromMain.ranOn == 0 || fromMain.ranOn == unix.Getpid() {
		t.Fatalf("fn ran on thread %d (the main thread is %d): %v", fromMain.ranOn, unix.Getpid(), fromMain.err)
	}
	// And from anywhere else, never the main thread either.
	for range 50 {
		var tid int
		if err := onOwnThread(func(restored *bool) error { tid = unix.Gettid(); *restored = true; return nil }); err != nil {
			t.Fatal(err)
		}
		if tid == unix.Getpid() {
			t.Fatal("fn ran on the main thread")
		}
	}
}
