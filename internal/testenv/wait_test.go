package testenv

import (
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
	// The grace is a tenth of the time left, at most 30 s.
	for _, tt := range []struct{ left, grace time.Duration }{
		{10 * time.Second, time.Second},
		{15 * time.Minute, 30 * time.Second},
	} {
		end := time.Now().Add(tt.left)
		d, ok := Deadline(fixedDeadline{end, true})
		if got := end.Sub(d); !ok || got < tt.grace-50*time.Millisecond || got > tt.grace {
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

func TestMainDeadline(t *testing.T) {
	start := time.Now()
	d, ok := MainDeadline(start)
	td, tok := t.Deadline()
	if ok != tok || ok && (d.After(td) || td.Sub(d) > 30*time.Second+time.Second) {
		t.Fatalf("MainDeadline %v %v, the test's deadline %v %v", d, ok, td, tok)
	}
}
