package launcher

import "time"

// Clock is the time the service keeps campaigns' lifetimes by: now, and
// a function run after a duration. The wall clock in production; tests
// drive internal/testkit/fakeclock, whose Clock satisfies it (it takes standard
// types only), so a deadline is tested by advancing the clock, never by
// sleeping past it.
type Clock interface {
	Now() time.Time
	// AfterFunc runs f in its own goroutine (or, on a fake clock, when the
	// clock passes d from now) and returns stop, which unschedules it and
	// reports whether it had not run yet.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// wallClock is the Clock of time itself.
type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func (wallClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}
