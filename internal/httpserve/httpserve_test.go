package httpserve

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func get(t *testing.T, ln net.Listener) string {
	t.Helper()
	resp, err := http.Get("http://" + ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestServeAndStop: both listeners serve (through Wrap); when the context
// ends, Stop runs first with StopFirst, then Cut (CutAfter 0), Serve
// returns nil and the listeners are closed.
func TestServeAndStop(t *testing.T) {
	var mu sync.Mutex
	var order []string
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hi") })}
	a, b := listen(t), listen(t)
	wrapped := 0
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, hs, []net.Listener{a, b}, Options{Name: "t", ShutdownTimeout: 5 * time.Second, StopFirst: true,
			Wrap: func(ln net.Listener) net.Listener { mu.Lock(); wrapped++; mu.Unlock(); return ln },
			Stop: func(context.Context) error { note("stop"); return nil },
			Cut:  func() { note("cut") }})
	}()
	if get(t, a) != "hi" || get(t, b) != "hi" {
		t.Fatal("not served")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	// Stop, then Cut, both before Serve returns (http.Server.Shutdown's
	// end is the closed listener, checked below).
	if all := strings.Join(order, ","); wrapped != 2 || all != "stop,cut" {
		t.Fatalf("wrapped %d, order %v", wrapped, order)
	}
	if _, err := net.Dial("tcp", a.Addr().String()); err == nil {
		t.Fatal("a listener still accepts after Serve returned")
	}
}

// TestListenerFailure: a listener that fails ends serving on all of
// them, and Serve returns its error (and Stop's).
func TestListenerFailure(t *testing.T) {
	good, bad := listen(t), listen(t)
	bad.Close()
	stopErr := errors.New("stop failed")
	err := Serve(t.Context(), &http.Server{Handler: http.NotFoundHandler()}, []net.Listener{good, bad},
		Options{Name: "t", ShutdownTimeout: 5 * time.Second, Stop: func(context.Context) error { return stopErr }})
	if err == nil || !strings.Contains(err.Error(), "t: serve tcp://") || !errors.Is(err, stopErr) {
		t.Fatalf("Serve: %v", err)
	}
}

// TestShutdownBound: a request that never ends holds Shutdown up to the
// bound, then the server is closed and Serve says so.
func TestShutdownBound(t *testing.T) {
	entered := make(chan struct{})
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-r.Context().Done() // only Close ends it
	})}
	ln := listen(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, hs, []net.Listener{ln}, Options{Name: "t", ShutdownTimeout: 50 * time.Millisecond})
	}()
	go http.Get("http://" + ln.Addr().String())
	<-entered
	cancel()
	if err := <-done; err == nil || !strings.Contains(err.Error(), "http shutdown") {
		t.Fatalf("Serve: %v, want the shutdown's bound", err)
	}
}

func TestNoListener(t *testing.T) {
	if err := Serve(t.Context(), &http.Server{}, nil, Options{Name: "t"}); err == nil {
		t.Fatal("served nothing without an error")
	}
}
