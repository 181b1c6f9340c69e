package grader

import (
	"context"
	"io"
	"net"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

// TestServeShutdownStalledClients: clients that stop in the middle of a
// request body (one on a public route, one refused for its key, one
// authorised) neither hold up shutdown until ShutdownTimeout nor make
// Serve fail: SIGTERM exits 0.
func TestServeShutdownStalledClients(t *testing.T) {
	t.Parallel()
	srv, err := NewServer(ServerConfig{Key: testKey})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ctx, ln) }()

	for _, req := range []string{
		"POST /health HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{",
		"POST /v1/score HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{",
		"POST /v1/score HTTP/1.1\r\nHost: x\r\n" + KeyHeader + ": " + testKey + "\r\nContent-Length: 100\r\n\r\n{",
	} {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
	}
	// Each request is in the server once its connection is active.
	testenv.WaitFor(t, "the 3 stalled requests in the server", func() bool { return srv.conns.Active() == 3 })
	// nil: Serve did not wait for the stalled bodies (their reads time
	// out after 2 minutes, past ShutdownTimeout, which would fail it).
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("Serve: %v, want nil", err)
		}
	case <-testenv.Context(t).Done():
		t.Fatal("Serve did not return")
	}
}
