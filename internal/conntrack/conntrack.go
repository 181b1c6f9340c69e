// Package conntrack keeps the open connections of an http.Server, so that
// a graceful shutdown can cut the reads that would otherwise hold it up (a
// client stalled in its request body, a body drained after the reply).
// The episode server and the grader share it.
package conntrack

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// Tracker records connections through http.Server.ConnState. The zero
// Tracker is ready to use; it must not be copied after first use.
type Tracker struct {
	mu    sync.Mutex
	conns map[net.Conn]http.ConnState
}

// ConnState is the http.Server.ConnState hook: it keeps each open,
// not hijacked connection and its state.
func (t *Tracker) ConnState(c net.Conn, st http.ConnState) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch st {
	case http.StateHijacked, http.StateClosed:
		delete(t.conns, c)
	default:
		if t.conns == nil {
			t.conns = map[net.Conn]http.ConnState{}
		}
		t.conns[c] = st
	}
}

// Active counts the connections with a request being read or answered.
func (t *Tracker) Active() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, st := range t.conns {
		if st == http.StateActive {
			n++
		}
	}
	return n
}

// CutReads makes every pending read on an open connection fail now.
func (t *Tracker) CutReads() {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	for c := range t.conns {
		c.SetReadDeadline(now)
	}
}
