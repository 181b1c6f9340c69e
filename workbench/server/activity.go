package server

import (
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// activityEvery is the most often SocketActivity touches its sockets.
const activityEvery = time.Second

// SocketActivity returns a Config.Activity that records episode traffic
// where agentpen reads it: it sets the modification (and access) time of
// each unix socket path in paths to now, at most once every second, never
// following a symbolic link (utimensat with AT_SYMLINK_NOFOLLOW). In a
// campaign workspace the socket is the run directory's wb.sock, which the
// host sees too: agentpen removes a campaign whose sockets stayed
// untouched for its idle timeout. Failures are ignored (a socket removed
// meanwhile tells nothing). now is the clock (time.Now in production).
func SocketActivity(paths []string, now func() time.Time) func() {
	var mu sync.Mutex
	var last time.Time
	return func() {
		t := now()
		mu.Lock()
		if !last.IsZero() && t.Sub(last) < activityEvery && !t.Before(last) {
			mu.Unlock()
			return
		}
		last = t
		mu.Unlock()
		ts := unix.NsecToTimespec(t.UnixNano())
		for _, p := range paths {
			_ = unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
		}
	}
}

// activity reports a reset or a step served (Config.Activity).
func (s *Server) activity() {
	if s.cfg.Activity != nil {
		s.cfg.Activity()
	}
}
