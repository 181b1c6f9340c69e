package testenv

import (
	"flag"
	"testing"
	"time"
)

type fixedDeadline struct {
	d  time.Time
	ok bool
}

func (f fixedDeadline) Deadline() (time.Time, bool) { return f.d, f.ok }

func TestDeadline(t *testing.T) {
	if _, ok := Deadline(fixedDeadline{}); ok {
		t.Error("a run without -timeout has a deadline")
	}
	if _, ok := Deadline(fixedDeadline{time.Now().Add(time.Hour), true}); !ok {
		t.Error("a run with -timeout has no deadline")
	}
	// The grace is a tenth of the time left, at most 30 s.
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range []struct{ left, grace time.Duration }{
		{10 * time.Second, time.Second},
		{15 * time.Minute, 30 * time.Second},
	} {
		end := now.Add(tt.left)
		if got := end.Sub(giveUp(now, end)); got != tt.grace {
			t.Errorf("%v left: gives up %v before the end, want %v", tt.left, got, tt.grace)
		}
	}
}

func TestWaitFor(t *testing.T) {
	n := 0
	WaitFor(t, "the fifth call", func() bool { n++; return n == 5 })
	if n != 5 {
		t.Fatalf("cond called %d times", n)
	}
}

// TestMainDeadline: the run's -timeout from start, less a grace of at
// most 30 s.
func TestMainDeadline(t *testing.T) {
	start := time.Now()
	d, ok := MainDeadline(start)
	timeout, _ := flag.Lookup("test.timeout").Value.(flag.Getter).Get().(time.Duration)
	if timeout <= 0 {
		if ok {
			t.Fatalf("a run without -timeout has a deadline: %v", d)
		}
		return
	}
	end := start.Add(timeout)
	if !ok || d.After(end) || end.Sub(d) > 30*time.Second {
		t.Fatalf("MainDeadline %v %v; the run ends at %v", d, ok, end)
	}
}
