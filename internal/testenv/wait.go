package testenv

import (
	"context"
	"flag"
	"testing"
	"time"
)

// A test's waits have no wall-clock bound of their own: a bound that a
// quiet machine meets and a loaded one breaks fails the suite by chance.
// They end at the test's deadline (go test -timeout), less a grace that
// leaves the test time to say what it waited for and to clean up; a test
// that must show something happens quickly measures a control in the
// same run or drives an injected clock (internal/fakeclock).

// Deadline is when a wait in t gives up: t's deadline (go test
// -timeout) less a grace of a tenth of the time left, at most 30 s. ok
// is false when the run has no -timeout: then a wait never gives up.
func Deadline(t interface{ Deadline() (time.Time, bool) }) (time.Time, bool) {
	d, ok := t.Deadline()
	if !ok {
		return time.Time{}, false
	}
	return d.Add(-grace(time.Until(d))), true
}

func grace(left time.Duration) time.Duration { return min(left/10, 30*time.Second) }

// Context is t.Context() ending at Deadline(t): for the calls of a test
// that must not outlive it (a dial, a read, a child process).
func Context(t *testing.T) context.Context {
	d, ok := Deadline(t)
	if !ok {
		return t.Context()
	}
	ctx, cancel := context.WithDeadline(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// WaitFor polls cond until it holds, and fails t naming what it waited
// for at Deadline(t). cond may fail t itself (t.Fatal), for instance when
// a process it waits on has exited.
func WaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !Until(t, cond) {
		t.Fatalf("waited until the test's deadline for %s", what)
	}
}

// Until polls cond until it holds or Deadline(t) passes, and returns
// cond's last answer: for a test that reports the failure itself.
func Until(t *testing.T, cond func() bool) bool {
	t.Helper()
	d, bounded := Deadline(t)
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		if cond() {
			return true
		}
		if bounded && time.Now().After(d) {
			return false
		}
		time.Sleep(delay)
	}
}

// MainDeadline is Deadline for TestMain, which has no t: the -timeout
// of the run that began at start, less the same grace.
func MainDeadline(start time.Time) (time.Time, bool) {
	f := flag.Lookup("test.timeout")
	if f == nil {
		return time.Time{}, false
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return time.Time{}, false
	}
	timeout, _ := g.Get().(time.Duration)
	if timeout <= 0 {
		return time.Time{}, false
	}
	d := start.Add(timeout)
	return d.Add(-grace(time.Until(d))), true
}

// LeftGoroutines waits, until MainDeadline(start), for leaked() to come
// back empty (goroutines that outlived a package's tests end a moment
// after them), and returns what it last reported. For TestMain:
//
//	if code == 0 && testenv.LeftGoroutines(start, leaked) != "" { ... code = 1 }
func LeftGoroutines(start time.Time, leaked func() string) string {
	d, bounded := MainDeadline(start)
	for {
		l := leaked()
		if l == "" || bounded && time.Now().After(d) {
			return l
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// CleanupContext is for a t.Cleanup function, which runs once
// t.Context() is done: a context that ends at Deadline(t). Call cancel
// when done.
func CleanupContext(t interface{ Deadline() (time.Time, bool) }) (context.Context, context.CancelFunc) {
	if d, ok := Deadline(t); ok {
		return context.WithDeadline(context.Background(), d)
	}
	return context.WithCancel(context.Background())
}
