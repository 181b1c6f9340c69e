// Package fakeclock is a clock for tests: time stands still until the
// test advances it, and the functions scheduled on it run then, in the
// order of their times. A package whose behaviour depends on a timer
// (an idle session reaped, a call given up) takes a small clock
// interface of its own that both the wall clock and *Clock satisfy:
//
//	type clock interface {
//		Now() time.Time
//		AfterFunc(d time.Duration, f func()) (stop func() bool)
//	}
//
// so its tests say exactly when a timer fires instead of sleeping past it
// and hoping the machine kept up. It does not fake time.Sleep, contexts'
// deadlines or the timers of other packages (net/http's, the kernel's):
// code that must be tested this way takes its timers from its clock.
package fakeclock

import (
	"slices"
	"sync"
	"time"
)

// Epoch is where a new Clock's time starts.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Clock is a fake clock. The zero value is not usable; call New.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	seq    int
	timers []*timer
}

type timer struct {
	when time.Time
	seq  int // ties run in the order they were scheduled
	f    func()
}

// New returns a clock at Epoch.
func New() *Clock { return &Clock{now: Epoch} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc schedules f for d from now (at once on the next Advance when
// d <= 0) and returns stop, which unschedules it and reports whether it
// had not run yet, as (*time.Timer).Stop does.
func (c *Clock) AfterFunc(d time.Duration, f func()) (stop func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	tm := &timer{when: c.now.Add(d), seq: c.seq, f: f}
	c.timers = append(c.timers, tm)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		i := slices.Index(c.timers, tm)
		if i < 0 {
			return false
		}
		c.timers = slices.Delete(c.timers, i, i+1)
		return true
	}
}

// Advance moves the clock d forward and runs, one after the other in
// this goroutine, every function whose time has come, earliest first;
// each sees Now at its own time. It returns how many ran. The functions
// must not block (they close a channel or cancel a context); one that
// schedules another within the span has it run too.
func (c *Clock) Advance(d time.Duration) int {
	c.mu.Lock()
	end := c.now.Add(d)
	c.mu.Unlock()
	ran := 0
	for {
		c.mu.Lock()
		i := -1
		for j, tm := range c.timers {
			if !tm.when.After(end) && (i < 0 || tm.when.Before(c.timers[i].when) || tm.when.Equal(c.timers[i].when) && tm.seq < c.timers[i].seq) {
				i = j
			}
		}
		if i < 0 {
			c.now = end
			c.mu.Unlock()
			return ran
		}
		tm := c.timers[i]
		c.timers = slices.Delete(c.timers, i, i+1)
		if tm.when.After(c.now) {
			c.now = tm.when
		}
		c.mu.Unlock()
		tm.f()
		ran++
	}
}

// Pending is how many functions are scheduled and have not run.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}
