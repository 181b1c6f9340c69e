package server

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/internal/testkit/workbenchtest"
	"github.com/agentpen/agentpen/workbench/client"
	"github.com/coder/websocket"
)

func TestListen(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		setup   func(t *testing.T, dir string) string // returns the address
		wantErr string
	}{
		{name: "unix_new_dir", setup: func(t *testing.T, dir string) string { return "unix://" + filepath.Join(dir, "run", "wb.sock") }},
		{name: "unix_existing_0700", setup: func(t *testing.T, dir string) string {
			os.Mkdir(filepath.Join(dir, "run"), 0o700)
			return "unix://" + filepath.Join(dir, "run", "wb.sock")
		}},
		{name: "unix_dir_too_open", setup: func(t *testing.T, dir string) string {
			os.Mkdir(filepath.Join(dir, "run"), 0o755)
			os.Chmod(filepath.Join(dir, "run"), 0o755)
			return "unix://" + filepath.Join(dir, "run", "wb.sock")
		}, wantErr: "mode 0755"},
		{name: "unix_dir_symlink", setup: func(t *testing.T, dir string) string {
			os.Mkdir(filepath.Join(dir, "real"), 0o700)
			os.Symlink(filepath.Join(dir, "real"), filepath.Join(dir, "run"))
			return "unix://" + filepath.Join(dir, "run", "wb.sock")
		}, wantErr: "not a directory"},
		{name: "unix_stale_socket_replaced", setup: func(t *testing.T, dir string) string {
			os.Mkdir(filepath.Join(dir, "run"), 0o700)
			p := filepath.Join(dir, "run", "wb.sock")
			ln, err := net.Listen("unix", p)
			if err != nil {
				t.Fatal(err)
			}
			ln.(*net.UnixListener).SetUnlinkOnClose(false)
			ln.Close()
			return "unix://" + p
		}},
		{name: "unix_socket_in_use", setup: func(t *testing.T, dir string) string {
			os.Mkdir(filepath.Join(dir, "run"), 0o700)
			p := filepath.Join(dir, "run", "wb.sock")
			ln, err := net.Listen("unix", p)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() })
			return "unix://" + p
		}, wantErr: "in use"},
		{name: "unix_regular_file", setup: func(t *testing.T, dir string) string {
			os.Mkdir(filepath.Join(dir, "run"), 0o700)
			p := filepath.Join(dir, "run", "wb.sock")
			os.WriteFile(p, []byte("x"), 0o600)
			return "unix://" + p
		}, wantErr: "not a socket"},
		{name: "unix_relative", setup: func(t *testing.T, dir string) string { return "unix://run/wb.sock" }, wantErr: "must be absolute"},
		{name: "tcp_plain", setup: func(t *testing.T, dir string) string { return "127.0.0.1:0" }},
		{name: "tcp_scheme", setup: func(t *testing.T, dir string) string { return "tcp://127.0.0.1:0" }},
		{name: "tcp_no_port", setup: func(t *testing.T, dir string) string { return "127.0.0.1" }, wantErr: "want host:port"},
		{name: "bad_scheme", setup: func(t *testing.T, dir string) string { return "http://127.0.0.1:0" }, wantErr: "scheme"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			addr := tt.setup(t, t.TempDir())
			ln, err := Listen(t.Context(), addr)
			if tt.wantErr != "" {
				if err == nil {
					ln.Close()
					t.Fatalf("Listen(%q) succeeded, want an error with %q", addr, tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Listen(%q): %v, want %q", addr, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Listen(%q): %v", addr, err)
			}
			defer ln.Close()
			if path, ok := strings.CutPrefix(addr, "unix://"); ok {
				fi, err := os.Lstat(path)
				if err != nil || fi.Mode().Perm() != 0o600 || fi.Mode()&os.ModeSocket == 0 {
					t.Errorf("socket %s: %v %v, want a 0600 socket", path, fi.Mode(), err)
				}
				di, _ := os.Lstat(filepath.Dir(path))
				if di.Mode().Perm()&0o077 != 0 {
					t.Errorf("socket directory mode %v", di.Mode())
				}
				ln.Close()
				if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("socket left behind after Close: %v", err)
				}
			}
		})
	}
}

// TestServeShutdown: cancelling Serve's context (what SIGTERM does in
// `workbench serve`) closes every session with 1001, cancels a running
// step, closes every environment, serves TCP and unix at once, and returns
// nil.
func TestServeShutdown(t *testing.T) {
	t.Parallel()
	w := newFakeWorld()
	s, err := New(Config{Factory: w.factory})
	if err != nil {
		t.Fatal(err)
	}
	tcp, err := Listen(t.Context(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "run", "wb.sock")
	ux, err := Listen(t.Context(), "unix://"+sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ctx, tcp, ux) }()

	cctx := testenv.Context(t)
	base := "http://" + tcp.Addr().String()
	idle := workbenchtest.Dial(t, cctx, base)
	if _, err := idle.Reset(cctx, client.ResetOptions{}); err != nil {
		t.Fatal(err)
	}
	// A session over the unix socket, blocked in a step.
	busy := workbenchtest.Dial(t, cctx, sock)
	// Both clients keep reading, as a real client's library does, so the
	// close handshakes complete at once.
	stepErr := make(chan error, 1)
	busyClose := make(chan error, 1)
	go func() {
		_, err := busy.Step(cctx, "block", nil)
		stepErr <- err
		_, err = busy.Receive(cctx)
		busyClose <- err
	}()
	idleClose := make(chan error, 1)
	go func() {
		_, err := idle.Receive(cctx)
		idleClose <- err
	}()
	<-w.blocked

	// nil: it finished before ShutdownTimeout, so it waited on no client
	// (a session's end, a close handshake) until a timeout cut it short.
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("Serve: %v, want nil", err)
		}
	case <-cctx.Done():
		t.Fatal("Serve did not return after its context was cancelled")
	}
	if err := <-idleClose; websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Errorf("idle session: %v, want close 1001", err)
	}
	// The blocked step was cancelled and answered, then the session closed.
	if err := <-stepErr; codeOf(err) != CodeExecutionError {
		t.Errorf("blocked step: %v, want EXECUTION_ERROR", err)
	}
	if err := <-busyClose; websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Errorf("busy session: %v, want close 1001", err)
	}
	w.checkAllClosed(t)
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("unix socket left after shutdown: %v", err)
	}
	if _, err := net.Dial("tcp", tcp.Addr().String()); err == nil {
		t.Error("TCP listener still accepting after shutdown")
	}
}

// serveTCP runs Serve on a fresh loopback listener; the returned stop
// cancels it and returns Serve's error. before, when given, runs once the
// listener exists and before Serve: what it connects and writes waits in
// the kernel until the server accepts it.
func serveTCP(t *testing.T, s *Server, before ...func(addr string)) (addr string, stop func() error) {
	t.Helper()
	ln, err := Listen(t.Context(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range before {
		f(ln.Addr().String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ctx, ln) }()
	stopped := false
	wait, cancelWait := testenv.CleanupContext(t)
	t.Cleanup(cancelWait)
	stop = func() error {
		stopped = true
		cancel()
		select {
		case err := <-errc:
			return err
		case <-wait.Done():
			t.Fatal("Serve did not return")
			return nil
		}
	}
	t.Cleanup(func() {
		if !stopped {
			stop()
		}
	})
	return ln.Addr().String(), stop
}

// stalledPost sends the headers of a POST /reset and part of its body,
// then nothing more.
func stalledPost(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, "POST /reset HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestServeShutdownStalledBody: a client that stops in the middle of a
// request body neither holds up shutdown nor makes it fail (SIGTERM must
// exit 0, not after ShutdownTimeout with an error).
func TestServeShutdownStalledBody(t *testing.T) {
	t.Parallel()
	w := newFakeWorld()
	s, err := New(Config{Factory: w.factory})
	if err != nil {
		t.Fatal(err)
	}
	addr, stop := serveTCP(t, s)
	c := stalledPost(t, addr)
	testenv.WaitFor(t, "the request in its handler", func() bool { return s.conns.Active() == 1 })
	// nil: it did not wait for the stalled body's read (readTimeout, 2
	// minutes, past ShutdownTimeout, would have made it fail).
	if err := stop(); err != nil {
		t.Errorf("Serve: %v, want nil", err)
	}
	io.ReadAll(c) // the server closed the connection
	w.checkAllClosed(t)
}

// TestServeSlowBodyAndIdle: a body that does not arrive within the body
// timeout is answered and its connection closed, and an idle keep-alive
// connection is closed after the idle timeout: neither holds a goroutine
// and a descriptor for ever.
func TestServeSlowBodyAndIdle(t *testing.T) {
	t.Parallel()
	w := newFakeWorld()
	s, err := New(Config{Factory: w.factory})
	if err != nil {
		t.Fatal(err)
	}
	s.readTimeout, s.idleTimeout = 200*time.Millisecond, 200*time.Millisecond
	// Both requests are written before the server accepts: its read
	// timeout, which starts at the accept, then finds them in the socket
	// however late this goroutine runs (a request arriving after it would
	// end the connection without an answer, as for a silent client).
	var c, k net.Conn
	serveTCP(t, s, func(addr string) {
		c = stalledPost(t, addr)
		var err error
		if k, err = net.Dial("tcp", addr); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { k.Close() })
		io.WriteString(k, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
	})
	deadline, _ := testenv.Deadline(t)

	c.SetReadDeadline(deadline)
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("stalled body: %v, want the server to answer and close", err)
	}
	if !strings.HasPrefix(string(got), "HTTP/1.1 408") {
		t.Errorf("stalled body answered %q, want 408", got)
	}

	k.SetReadDeadline(deadline)
	got, err = io.ReadAll(k)
	if err != nil {
		t.Fatalf("idle keep-alive connection: %v, want the server to close it", err)
	}
	if !strings.HasPrefix(string(got), "HTTP/1.1 200") {
		t.Errorf("health answered %q", got)
	}
	if w.built() != 0 {
		t.Errorf("%d environments built for a body that never came", w.built())
	}
}
