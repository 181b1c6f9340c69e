package server

import "time"

// clock is the time a session's idle reaping runs on: the wall clock, or
// in tests a fake one they advance (internal/testkit/fakeclock), so that a test
// says when a session has been idle long enough instead of sleeping past
// a short timeout that a loaded machine overruns.
type clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func (wallClock) AfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
