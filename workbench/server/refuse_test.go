package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/sandboxtest"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/workbench/client"
	"github.com/coder/websocket"
)

// TestRefuseLiveTCP: against the real socket tables, a client whose socket
// is owned by an "episode" uid (here: this test's own uid, declared one) is
// refused over HTTP and WebSocket; the same client is let through when its
// uid is not an episode uid.
func TestRefuseLiveTCP(t *testing.T) {
	t.Parallel()
	own := uint32(os.Getuid())
	for _, refuse := range []bool{true, false} {
		t.Run(fmt.Sprintf("refuse_%v", refuse), func(t *testing.T) {
			w := newFakeWorld()
			_, ts := startServer(t, w, func(c *Config) {
				c.EpisodeUID = func(uid uint32) bool { return refuse && uid == own }
			})
			checkRefusal(t, ts.URL, refuse)
			if refuse && w.built() != 0 {
				t.Errorf("a refused client got %d environments built", w.built())
			}
		})
	}
}

// TestRefuseLiveLinkLocal: a client that reaches a wildcard listener over
// an IPv6 link-local address (whose peer address Go reports with a zone,
// "[fe80::1%eth0]:port", while the socket tables print none) is told
// apart like any other: refused when its uid is an episode uid.
func TestRefuseLiveLinkLocal(t *testing.T) {
	t.Parallel()
	ll, ok := linkLocalAddr()
	if !ok {
		testenv.Unavailable(t, "no interface with an IPv6 link-local address")
	}
	own := uint32(os.Getuid())
	w := newFakeWorld()
	s, err := New(Config{Factory: w.factory, EpisodeUID: func(uid uint32) bool { return uid == own }})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "[::]:0")
	if err != nil {
		testenv.Unavailable(t, "no IPv6 wildcard listener: "+err.Error())
	}
	ts := httptest.NewUnstartedServer(s.Handler())
	ts.Listener.Close()
	ts.Listener = s.Gate().Listener(ln)
	ts.Start()
	t.Cleanup(func() {
		ctx, cancel := testenv.CleanupContext(t)
		defer cancel()
		s.Shutdown(ctx)
		ts.Close()
		w.checkAllClosed(t)
	})
	port := ln.Addr().(*net.TCPAddr).Port
	base := "http://" + net.JoinHostPort(ll, fmt.Sprint(port))
	base = strings.Replace(base, "%", "%25", 1)
	checkRefusal(t, base, true)
	if w.built() != 0 {
		t.Errorf("a refused link-local client got %d environments built", w.built())
	}
}

// linkLocalAddr returns "fe80::…%iface" of an up, non-loopback interface.
func linkLocalAddr() (string, bool) {
	ifs, err := net.Interfaces()
	if err != nil {
		return "", false
	}
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() == nil && n.IP.IsLinkLocalUnicast() {
				return n.IP.String() + "%" + ifc.Name, true
			}
		}
	}
	return "", false
}

// checkRefusal makes one HTTP call and one WebSocket session to target (a
// URL, or a unix socket's path) and checks both were refused at accept
// (the connection closed before any reply) or served.
func checkRefusal(t *testing.T, target string, refuse bool) {
	t.Helper()
	base, hc := target, http.DefaultClient
	if strings.HasPrefix(target, "/") {
		base, hc = "http://workbench", unixClient(target)
	}
	resp, err := hc.Post(base+"/reset", "application/json", strings.NewReader(`{}`))
	if refuse {
		if err == nil {
			resp.Body.Close()
			t.Errorf("HTTP: %d, want the connection closed before a reply", resp.StatusCode)
		}
	} else if err != nil {
		t.Fatal(err)
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("HTTP: %d %q, want 200", resp.StatusCode, body)
		}
	}
	ctx := testenv.Context(t)
	if refuse {
		// The handshake alone, to tell no reply at all from a refusal
		// with a status.
		tg, err := client.ParseTarget(target)
		if err != nil {
			t.Fatal(err)
		}
		c, wsResp, err := websocket.Dial(ctx, tg.URL, &websocket.DialOptions{HTTPClient: hc})
		if err == nil {
			c.CloseNow()
			t.Fatal("WS: the upgrade was accepted, want the connection closed")
		}
		if wsResp != nil {
			t.Errorf("WS: got a %d reply, want the connection closed before one", wsResp.StatusCode)
		}
		return
	}
	s, err := client.Dial(ctx, target)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer s.Conn().CloseNow()
	if _, err := s.Reset(ctx, client.ResetOptions{}); err != nil {
		t.Errorf("WS: %v", err)
	} else if err := s.Close(); err != nil {
		t.Errorf("WS close: %v", err)
	}
}

// unixClient is an HTTP client that dials path whatever the URL says.
func unixClient(path string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
	}}
}

// serveUnix runs Serve on a unix socket at dir/wb.sock until the test ends.
func serveUnix(t *testing.T, w *fakeWorld, dir string, mutate func(*Config)) string {
	t.Helper()
	cfg := Config{Factory: w.factory}
	if mutate != nil {
		mutate(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "wb.sock")
	ln, err := Listen(t.Context(), "unix://"+path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("serve: %v", err)
		}
		w.checkAllClosed(t)
	})
	return path
}

// TestRefuseLiveUnix: SO_PEERCRED decides on the unix socket.
func TestRefuseLiveUnix(t *testing.T) {
	t.Parallel()
	own := uint32(os.Getuid())
	for _, refuse := range []bool{true, false} {
		t.Run(fmt.Sprintf("refuse_%v", refuse), func(t *testing.T) {
			w := newFakeWorld()
			path := serveUnix(t, w, filepath.Join(t.TempDir(), "run"), func(c *Config) {
				c.EpisodeUID = func(uid uint32) bool { return refuse && uid == own }
			})
			checkRefusal(t, path, refuse)
		})
	}
}

// clientScript is run as a sandbox uid: it makes one HTTP request over TCP
// (argv[1] host:port) or a unix socket (argv[1] a path) and prints the
// status and body, or the connect error.
const clientScript = `
import socket, sys
target = sys.argv[1]
try:
    if target.startswith("/"):
        s = socket.socket(socket.AF_UNIX)
        s.connect(target)
    else:
        host, port = target.rsplit(":", 1)
        s = socket.create_connection((host, int(port)))
    s.sendall(b"POST /reset HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    print(head.split(b"\r\n")[0].decode(), "|", body.decode().strip())
except OSError as e:
    print("connect-error", e.errno)
`

// closedAtAccept reports whether clientScript's output says the server
// closed the connection without a reply: reset (ECONNRESET), closed
// before the request was written (EPIPE), or an empty reply.
func closedAtAccept(out string) bool {
	return out == fmt.Sprintf("connect-error %d", syscall.ECONNRESET) ||
		out == fmt.Sprintf("connect-error %d", syscall.EPIPE) || out == "|"
}

// runAsUID runs clientScript as uid (no groups) and returns its output.
func runAsUID(t *testing.T, uid uint32, target string) string {
	t.Helper()
	cmd := exec.CommandContext(testenv.Context(t), "/usr/bin/python3", "-I", "-c", clientScript, target)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("client as uid %d: %v\n%s", uid, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestRefuseSandboxUIDs (root): a real process running as a sandbox uid is
// refused over TCP; over the unix socket it cannot even connect (0700
// directory), and when a socket is deliberately left reachable, SO_PEERCRED
// refuses it. A root client on the same server is served.
func TestRefuseSandboxUIDs(t *testing.T) {
	t.Parallel()
	testenv.RequireRoot(t)
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Fatalf("need /usr/bin/python3 (a python the sandbox uid can run): %v", err)
	}
	w := newFakeWorld()
	_, ts := startServer(t, w, func(c *Config) { c.EpisodeUID = sandboxtest.InDefaultRange })
	hostport := strings.TrimPrefix(ts.URL, "http://")
	uid, other := sandboxtest.ClaimUID(t), sandboxtest.ClaimUID(t)
	if got := runAsUID(t, uid, hostport); !closedAtAccept(got) {
		t.Errorf("sandbox uid over TCP: %q, want the connection closed", got)
	}
	if got := runAsUID(t, other, hostport); !closedAtAccept(got) {
		t.Errorf("another sandbox uid over TCP: %q, want the connection closed", got)
	}
	if got := runAsUID(t, 30000, hostport); !strings.HasPrefix(got, "HTTP/1.1 200") {
		t.Errorf("uid outside the sandbox over TCP: %q, want 200", got)
	}
	checkRefusal(t, ts.URL, false)

	// The server's own unix socket: 0600 in a 0700 directory.
	w2 := newFakeWorld()
	path := serveUnix(t, w2, filepath.Join(t.TempDir(), "run"), func(c *Config) { c.EpisodeUID = sandboxtest.InDefaultRange })
	if got := runAsUID(t, uid, path); got != fmt.Sprintf("connect-error %d", syscall.EACCES) {
		t.Errorf("sandbox uid on the unix socket: %q, want EACCES", got)
	}
	checkRefusal(t, path, false)

	// A socket someone made reachable: SO_PEERCRED still refuses.
	open := t.TempDir()
	os.Chmod(filepath.Dir(open), 0o755)
	os.Chmod(open, 0o755)
	w3 := newFakeWorld()
	sub := filepath.Join(open, "run")
	opath := serveUnix(t, w3, sub, func(c *Config) { c.EpisodeUID = sandboxtest.InDefaultRange })
	os.Chmod(sub, 0o755)
	os.Chmod(opath, 0o666)
	if got := runAsUID(t, uid, opath); !closedAtAccept(got) {
		t.Errorf("sandbox uid on an open unix socket: %q, want the connection closed", got)
	}
	if w3.built() != 0 {
		t.Errorf("refused unix peers built %d environments", w3.built())
	}
}
