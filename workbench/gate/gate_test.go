package gate

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentpen/agentpen/internal/testkit/leakcheck"
	"github.com/agentpen/agentpen/internal/testkit/sandboxtest"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/internal/testkit/testlog"
)

// TestMain fails the run if a goroutine of this package outlives the
// tests.
func TestMain(m *testing.M) {
	os.Exit(leakcheck.Main(m, "workbench/gate."))
}

// served is a gated listener whose accepted connections a goroutine hands
// to the test.
type served struct {
	g        *Gate
	addr     string
	accepted chan net.Conn
}

// serveGate listens on network ("tcp" on loopback, or "unix"), puts g in
// front and accepts until the test ends.
func serveGate(t *testing.T, g *Gate, network string) *served {
	t.Helper()
	addr := "127.0.0.1:0"
	if network == "unix" {
		addr = filepath.Join(t.TempDir(), "gate.sock")
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	if network == "unix" {
		os.Chmod(addr, 0o666)
		os.Chmod(filepath.Dir(addr), 0o755)
		os.Chmod(filepath.Dir(filepath.Dir(addr)), 0o755)
	}
	s := &served{g: g, addr: ln.Addr().String(), accepted: make(chan net.Conn, 64)}
	gl := g.Listener(ln)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := gl.Accept()
			if err != nil {
				close(s.accepted)
				return
			}
			s.accepted <- c
		}
	})
	t.Cleanup(func() {
		gl.Close()
		wg.Wait()
		for c := range s.accepted {
			c.Close()
		}
	})
	return s
}

// dial connects and reports whether the gate took the connection: the
// server side shows up on accepted, or the client's read ends (reset or
// EOF) without one.
func (s *served) dial(t *testing.T, network string) (client, server net.Conn) {
	t.Helper()
	c, err := net.Dial(network, s.addr)
	if errors.Is(err, syscall.ECONNRESET) {
		return nil, nil // reset before connect returned
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// The probe read ends when the gate closes the connection (reset or
	// EOF), or when this test ends it once the gate took it; no deadline
	// of its own, which a slow accept would overrun and pass for a close.
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		c.Read(make([]byte, 1))
	}()
	select {
	case sc := <-s.accepted:
		t.Cleanup(func() { sc.Close() })
		c.SetReadDeadline(time.Now()) // end the probe read
		<-closed
		c.SetReadDeadline(time.Time{})
		return c, sc
	case <-closed:
		return c, nil
	case <-testenv.Context(t).Done():
		t.Fatal("the gate neither took nor closed the connection")
	}
	return nil, nil
}

// fakeClock is a settable clock for the log limiter.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// TestGateCaps: per peer and in all, a connection over a cap is closed at
// once and one closing frees its place; the cap lines are rate-limited
// and count what they did not log.
func TestGateCaps(t *testing.T) {
	t.Parallel()
	logs := &testlog.Buffer{}
	g, err := New(Config{MaxPerPeer: 2, MaxConns: 3, LogEvery: time.Hour, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	g.now = clock.Now
	var mu sync.Mutex
	peer := Peer{}
	g.identify = func(net.Conn) (Peer, error) { mu.Lock(); defer mu.Unlock(); return peer, nil }
	as := func(p Peer) { mu.Lock(); peer = p; mu.Unlock() }
	a := Peer{Addr: netip.MustParseAddr("10.0.0.1")}
	b := Peer{Local: true, UID: 1000}
	s := serveGate(t, g, "tcp")

	as(a)
	_, a1 := s.dial(t, "tcp")
	_, a2 := s.dial(t, "tcp")
	if a1 == nil || a2 == nil {
		t.Fatal("the first two connections of a peer were refused")
	}
	for range 3 {
		if _, c := s.dial(t, "tcp"); c != nil {
			t.Fatal("a third connection of a peer went through (cap 2)")
		}
	}
	as(b)
	if _, c := s.dial(t, "tcp"); c == nil {
		t.Fatal("another peer was refused under the overall cap")
	}
	if _, c := s.dial(t, "tcp"); c != nil {
		t.Fatal("a fourth connection went through (overall cap 3)")
	}
	if got := g.Open(); got != 3 {
		t.Fatalf("Open() = %d, want 3", got)
	}
	a1.Close()
	a1.Close() // a second Close frees nothing more
	if got := g.Open(); got != 2 {
		t.Fatalf("Open() after a close = %d, want 2", got)
	}
	if _, c := s.dial(t, "tcp"); c == nil {
		t.Fatal("refused after a connection closed and freed a place")
	}
	as(a)
	if _, c := s.dial(t, "tcp"); c != nil {
		t.Fatal("over the overall cap again, yet taken")
	}
	if n := strings.Count(logs.String(), "per-peer connection cap reached"); n != 1 {
		t.Errorf("%d per-peer cap lines within LogEvery, want 1:\n%s", n, logs)
	}
	if n := strings.Count(logs.String(), "msg=\"connection cap reached"); n != 1 {
		t.Errorf("%d overall cap lines within LogEvery, want 1:\n%s", n, logs)
	}
	clock.Add(time.Hour)
	if _, c := s.dial(t, "tcp"); c != nil {
		t.Fatal("over the overall cap, yet taken")
	}
	if !strings.Contains(logs.String(), "more_since_last_line=1") {
		t.Errorf("the line after LogEvery does not count the one not logged:\n%s", logs)
	}
}

// TestRefusal: who is refused when the sandbox is on, and nobody when it
// is off.
func TestRefusal(t *testing.T) {
	t.Parallel()
	unknown := fmt.Errorf("%w: test", ErrUnknownPeer)
	tests := []struct {
		name    string
		sandbox bool
		peer    Peer
		err     error
		refused bool
	}{
		{name: "local_root", sandbox: true, peer: Peer{Local: true, UID: 0}},
		{name: "local_episode_uid", sandbox: true, peer: Peer{Local: true, UID: 20000}, refused: true},
		{name: "last_episode_uid", sandbox: true, peer: Peer{Local: true, UID: 21023}, refused: true},
		{name: "past_the_range", sandbox: true, peer: Peer{Local: true, UID: 21024}},
		{name: "orphan", sandbox: true, peer: Peer{Local: true, UID: 0, Orphan: true}, refused: true},
		{name: "remote", sandbox: true, peer: Peer{Addr: netip.MustParseAddr("10.1.2.3")}},
		{name: "unknown", sandbox: true, err: unknown, refused: true},
		{name: "no_sandbox_episode_uid", peer: Peer{Local: true, UID: 20000}},
		{name: "no_sandbox_unknown", err: unknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{}
			if tt.sandbox {
				cfg.EpisodeUID = sandboxtest.InDefaultRange
			}
			g, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if why := g.refusal(tt.peer, tt.err); (why != "") != tt.refused {
				t.Fatalf("refusal = %q, want refused %v", why, tt.refused)
			}
		})
	}
}

// TestGateLive: with the real peer lookup, this process (declared an
// episode uid) is refused over TCP and a unix socket, and served when it
// is not one.
func TestGateLive(t *testing.T) {
	t.Parallel()
	own := uint32(os.Getuid())
	for _, network := range []string{"tcp", "unix"} {
		for _, refuse := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s_refuse_%v", network, refuse), func(t *testing.T) {
				g, err := New(Config{EpisodeUID: func(uid uint32) bool { return refuse && uid == own }})
				if err != nil {
					t.Fatal(err)
				}
				s := serveGate(t, g, network)
				if _, c := s.dial(t, network); (c == nil) != refuse {
					t.Fatalf("taken %v, want refused %v", c != nil, refuse)
				}
			})
		}
	}
}

// clientAsUID is run as a sandbox uid: it connects to argv[1] host:port,
// first binding its socket to the loopback interface when argv[2] is
// "bind" (which any uid may do), and prints "closed" when the server ends
// the connection, "open" when it is still open after 3 s.
const clientAsUID = `
import socket, sys
host, port = sys.argv[1].rsplit(":", 1)
s = socket.socket()
if sys.argv[2] == "bind":
    s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, b"lo")
s.connect((host, int(port)))
s.settimeout(3)
try:
    print("closed" if s.recv(1) == b"" else "data")
except socket.timeout:
    print("open")
except OSError as e:
    print("closed", e.errno)
`

// TestGateSandboxUID (root): a process of a sandbox uid is refused, also
// when it bound its socket to the loopback interface (the kernel then
// finds that socket only from that interface).
func TestGateSandboxUID(t *testing.T) {
	testenv.RequireRoot(t)
	t.Parallel()
	g, err := New(Config{EpisodeUID: sandboxtest.InDefaultRange})
	if err != nil {
		t.Fatal(err)
	}
	s := serveGate(t, g, "tcp")
	uid := sandboxtest.ClaimUID(t)
	for _, mode := range []string{"plain", "bind"} {
		t.Run(mode, func(t *testing.T) {
			cmd := exec.Command("/usr/bin/python3", "-I", "-c", clientAsUID, s.addr, mode)
			cmd.Dir = "/"
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid, Groups: []uint32{}}}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("client: %v\n%s", err, out)
			}
			if !bytes.HasPrefix(out, []byte("closed")) {
				t.Errorf("a sandbox uid's connection (%s): %q, want it closed", mode, out)
			}
		})
	}
	select {
	case c := <-s.accepted:
		c.Close()
		t.Error("a sandbox uid's connection was accepted")
	default:
	}
}

// TestNewRejectsNegative: negative caps are refused, zero ones defaulted
// (the overall one to at most half the open-file limit).
func TestNewRejectsNegative(t *testing.T) {
	t.Parallel()
	if _, err := New(Config{MaxConns: -1}); err == nil {
		t.Error("MaxConns -1 accepted")
	}
	g, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if g.MaxPerPeer() != DefaultMaxPerPeer || g.MaxConns() < 1 || g.MaxConns() > DefaultMaxConns {
		t.Errorf("defaults: per peer %d, all %d", g.MaxPerPeer(), g.MaxConns())
	}
	if _, err := Identify(fakeConn{}); !errors.Is(err, ErrUnknownPeer) {
		t.Errorf("Identify of an unknown conn type: %v, want ErrUnknownPeer", err)
	}
}

type fakeConn struct{ net.Conn }
