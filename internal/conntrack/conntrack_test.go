package conntrack

import (
	"bufio"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

// TestCutReads: a client stalled in its body is counted active and its
// read is cut; a hijacked connection is forgotten.
func TestCutReads(t *testing.T) {
	var tr Tracker
	readErr := make(chan error, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 10)
		_, err := r.Body.Read(buf) // the client sends nothing
		readErr <- err
	}))
	srv.Config.ConnState = tr.ConnState
	srv.Start()
	defer srv.Close()

	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n"))
	testenv.WaitFor(t, "the connection active", func() bool { return tr.Active() == 1 })
	tr.CutReads()
	select {
	case err := <-readErr:
		if err == nil {
			t.Fatal("the stalled read was not cut")
		}
	case <-testenv.Context(t).Done():
		t.Fatal("the stalled read is still pending after CutReads")
	}
	bufio.NewReader(c).ReadString('\n') // the reply, if any

	tr.ConnState(c, http.StateHijacked)
	tr.ConnState(c, http.StateHijacked) // unknown conns are fine
	var zero Tracker
	if zero.Active() != 0 {
		t.Fatal("zero Tracker not empty")
	}
	zero.CutReads()
}
