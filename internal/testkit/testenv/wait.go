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
// same run or drives an injected clock (internal/testkit/fakeclock).

// Deadline is when a wait in t gives up: t's deadline (go test
// -timeout) less a grace of a tenth of the time left, at most 30 s. ok
// is false when the run has no -timeout: then a wait never gives up.
func Deadline(t interface{ Deadline() (time.Time, bool) }) (time.Time, bool) {
	d, ok := t.Deadline()
	if !ok {
		return time.Time{}, false
	}
	return giveUp(time.Now(), d), true
}

// giveUp is when a wait that began at now gives up before the run's
// deadline d: a tenth of the time left earlier, at most 30 s.
func giveUp(now, d time.Time) time.Time { return d.Add(-min(d.Sub(now)/10, 30*time.Second)) }

// deadlineOf is Deadline for any test: a benchmark (which has no
// deadline of its own) or a fuzz target has none.
func deadlineOf(t testing.TB) (time.Time, bool) {
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		return Deadline(d)
	}
	return time.Time{}, false
}

// Context is t.Context() ending at Deadline(t): for the calls of a test
// that must not outlive it (a dial, a read, a child process).
func Context(t testing.TB) context.Context {
	d, ok := deadlineOf(t)
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
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !Until(t, cond) {
		t.Fatalf("waited until the test's deadline for %s", what)
	}
}

// Until polls cond until it holds or Deadline(t) passes, and returns
// cond's last answer: for a test that reports the failure itself.
func Until(t testing.TB, cond func() bool) bool {
	t.Helper()
	d, bounded := deadlineOf(t)
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
	return giveUp(time.Now(), start.Add(timeout)), true
}

// CleanupContext is for a t.Cleanup function, which runs once
// t.Context() is done: a context that ends at Deadline(t). Call cancel
// when done.
func CleanupContext(t testing.TB) (context.Context, context.CancelFunc) {
	if d, ok := deadlineOf(t); ok {
		return context.WithDeadline(context.Background(), d)
	}
	return context.WithCancel(context.Background())
}
