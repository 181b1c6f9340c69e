package fakeclock

import (
	"slices"
	"testing"
	"time"
)

func TestAdvance(t *testing.T) {
	c := New()
	var got []string
	at := func(name string) func() {
		return func() { got = append(got, name+"@"+c.Now().Sub(Epoch).String()) }
	}
	c.AfterFunc(3*time.Second, at("c"))
	c.AfterFunc(time.Second, at("a"))
	stopB := c.AfterFunc(2*time.Second, at("b"))
	c.AfterFunc(time.Second, at("a2")) // same time as a: after it
	if n := c.Advance(999 * time.Millisecond); n != 0 || len(got) != 0 {
		t.Fatalf("before any time came: %d ran, %v", n, got)
	}
	if !stopB() || stopB() {
		t.Fatal("stop of a pending timer: want true once, then false")
	}
	if c.Pending() != 3 {
		t.Fatalf("pending %d, want 3", c.Pending())
	}
	if n := c.Advance(time.Millisecond); n != 2 {
		t.Fatalf("at 1 s: %d ran, want 2", n)
	}
	// A function scheduled by another within the span runs in it.
	c.AfterFunc(time.Second, func() { c.AfterFunc(500*time.Millisecond, at("nested")) })
	if n := c.Advance(5 * time.Second); n != 3 {
		t.Fatalf("to 6 s: %d ran, want 3 (c, the scheduler, nested)", n)
	}
	want := []string{"a@1s", "a2@1s", "c@3s", "nested@2.5s"}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("ran %v, want %v", got, want)
	}
	if c.Now() != Epoch.Add(6*time.Second) || c.Pending() != 0 {
		t.Fatalf("now %v pending %d", c.Now(), c.Pending())
	}
}
