package server

import (
	"context"
	"encoding/binary"
	"errors"
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
	"time"

	"github.com/agentpen/agentpen/internal/testenv"
	"github.com/coder/websocket"
)

func requireLittleEndian(t *testing.T) {
	t.Helper()
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		const why = "the /proc/net fixtures are written for a little-endian host"
		if testenv.Required() {
			t.Fatal(why + "; CI must run them")
		}
		t.Skip(why)
	}
}

func TestParseProcEndpoint(t *testing.T) {
	t.Parallel()
	requireLittleEndian(t)
	tests := []struct {
		name, field, want string
		bad               bool
	}{
		{name: "ipv4_loopback", field: "0100007F:1F40", want: "127.0.0.1:8000"},
		{name: "ipv4_any", field: "00000000:0000", want: "0.0.0.0:0"},
		{name: "ipv4_private", field: "0201A8C0:D431", want: "192.168.1.2:54321"},
		{name: "ipv6_loopback", field: "00000000000000000000000001000000:1F40", want: "[::1]:8000"},
		{name: "ipv4_mapped_reads_as_ipv4", field: "0000000000000000FFFF00000100007F:D432", want: "127.0.0.1:54322"},
		{name: "short_address", field: "0100007:1F40", bad: true},
		{name: "no_port", field: "0100007F", bad: true},
		{name: "not_hex", field: "0100007G:1F40", bad: true},
		{name: "port_too_big", field: "0100007F:1FFFF", bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseProcEndpoint(tt.field)
			if tt.bad {
				if err == nil {
					t.Fatalf("got %v, want an error", got)
				}
				return
			}
			if err != nil || got.String() != tt.want {
				t.Fatalf("got %v %v, want %s", got, err, tt.want)
			}
		})
	}
}

const tcpHeader = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"

func procRow(local, remote string, uid int, inode int) string {
	return fmt.Sprintf("   0: %s %s 01 00000000:00000000 00:00000000 00000000 %5d        0 %d 1 0000000000000000 20 4 30 10 -1\n", local, remote, uid, inode)
}

// TestFromEpisodeTables: the decision on fixture socket tables.
func TestFromEpisodeTables(t *testing.T) {
	t.Parallel()
	requireLittleEndian(t)
	const (
		server    = "0100007F:1F40"                         // 127.0.0.1:8000
		client    = "0100007F:D431"                         // 127.0.0.1:54321
		client6   = "0000000000000000FFFF00000100007F:D431" // the same, IPv4-mapped
		linkLocal = "000080FE00000000FF00FC00010000FE"      // fe80::fc:ff:fe00:1
	)
	listener := procRow(server, "00000000:0000", 0, 999)
	serverEnd := procRow(server, client, 0, 1000)
	tests := []struct {
		name      string
		tcp, tcp6 string
		remote    string // r.RemoteAddr
		local     string
		refused   bool
	}{
		{name: "root_client_allowed", tcp: listener + serverEnd + procRow(client, server, 0, 1001), remote: "127.0.0.1:54321", local: "127.0.0.1:8000"},
		{name: "episode_uid_refused", tcp: listener + serverEnd + procRow(client, server, 20000, 1001), remote: "127.0.0.1:54321", local: "127.0.0.1:8000", refused: true},
		{name: "last_episode_uid_refused", tcp: procRow(client, server, 21023, 1001), remote: "127.0.0.1:54321", local: "127.0.0.1:8000", refused: true},
		{name: "uid_past_range_allowed", tcp: procRow(client, server, 21024, 1001), remote: "127.0.0.1:54321", local: "127.0.0.1:8000"},
		{name: "held_by_no_process_refused", tcp: procRow(client, server, 0, 0), remote: "127.0.0.1:54321", local: "127.0.0.1:8000", refused: true},
		{name: "one_holder_is_enough", tcp: procRow(client, server, 0, 0) + procRow(client, server, 1000, 5), remote: "127.0.0.1:54321", local: "127.0.0.1:8000"},
		{name: "remote_client_allowed", tcp: listener + serverEnd, remote: "10.0.0.9:40000", local: "127.0.0.1:8000"},
		{name: "mapped_peer_matches_ipv4_row", tcp: procRow(client, server, 20001, 7), remote: "[::ffff:127.0.0.1]:54321", local: "[::ffff:127.0.0.1]:8000", refused: true},
		{name: "episode_socket_in_tcp6", tcp: listener, tcp6: procRow(client6, "0000000000000000FFFF00000100007F:1F40", 20002, 8), remote: "127.0.0.1:54321", local: "127.0.0.1:8000", refused: true},
		{name: "unparsable_peer_refused", tcp: listener, remote: "@", local: "127.0.0.1:8000", refused: true},
		{name: "episode_uid_other_port_allowed", tcp: procRow("0100007F:D432", server, 20000, 9), remote: "127.0.0.1:54321", local: "127.0.0.1:8000"},
		// Go reports a link-local peer with its zone ("%eth0"); the tables
		// have none.
		{name: "link_local_zone_refused", tcp: listener, tcp6: procRow(linkLocal+":D431", linkLocal+":1F40", 20000, 10), remote: "[fe80::fc:ff:fe00:1%eth0]:54321", local: "[fe80::fc:ff:fe00:1%eth0]:8000", refused: true},
		{name: "link_local_zone_root_allowed", tcp: listener, tcp6: procRow(linkLocal+":D431", linkLocal+":1F40", 0, 10), remote: "[fe80::fc:ff:fe00:1%eth0]:54321", local: "[fe80::fc:ff:fe00:1%eth0]:8000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tcp := filepath.Join(dir, "tcp")
			os.WriteFile(tcp, []byte(tcpHeader+tt.tcp), 0o644)
			tables := []string{tcp, filepath.Join(dir, "tcp6-missing")}
			if tt.tcp6 != "" {
				tables[1] = filepath.Join(dir, "tcp6")
				os.WriteFile(tables[1], []byte(tcpHeader+tt.tcp6), 0o644)
			}
			rf := &refuser{episodeUID: sandboxRange, tables: tables}
			r := httptest.NewRequest("GET", "/health", nil)
			r.RemoteAddr = tt.remote
			r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, addrString(tt.local)))
			why := rf.fromEpisode(r)
			if (why != "") != tt.refused {
				t.Fatalf("refused=%v (%q), want %v", why != "", why, tt.refused)
			}
		})
	}
	t.Run("no_tables_refused", func(t *testing.T) {
		rf := &refuser{episodeUID: sandboxRange, tables: []string{filepath.Join(t.TempDir(), "none")}}
		r := httptest.NewRequest("GET", "/health", nil)
		r.RemoteAddr = "127.0.0.1:1"
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, addrString("127.0.0.1:8000")))
		if rf.fromEpisode(r) == "" {
			t.Fatal("a server that cannot read the socket tables let a client through")
		}
	})
	t.Run("unix_peer", func(t *testing.T) {
		rf := &refuser{episodeUID: sandboxRange}
		for _, p := range []struct {
			cred    peerCred
			refused bool
		}{
			{peerCred{unix: true, uid: 0}, false},
			{peerCred{unix: true, uid: 20000}, true},
			{peerCred{unix: true, err: errors.New("no creds")}, true},
		} {
			r := httptest.NewRequest("GET", "/health", nil)
			r = r.WithContext(context.WithValue(r.Context(), peerKey{}, p.cred))
			if got := rf.fromEpisode(r) != ""; got != p.refused {
				t.Errorf("peer %+v: refused=%v, want %v", p.cred, got, p.refused)
			}
		}
	})
}

// sandboxRange is the uid sandbox's range (sandbox.UIDBase, UIDSlots).
func sandboxRange(uid uint32) bool { return uid >= 20000 && uid < 20000+1024 }

type addrString string

func (a addrString) Network() string { return "tcp" }
func (a addrString) String() string  { return string(a) }

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
			checkRefusal(t, ts.URL, http.DefaultClient, refuse)
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
		t.Skip("no interface with an IPv6 link-local address")
	}
	own := uint32(os.Getuid())
	w := newFakeWorld()
	s, err := New(Config{Factory: w.factory, EpisodeUID: func(uid uint32) bool { return uid == own }})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "[::]:0")
	if err != nil {
		t.Skipf("no IPv6 wildcard listener: %v", err)
	}
	ts := httptest.NewUnstartedServer(s.Handler())
	ts.Listener.Close()
	ts.Listener = ln
	ts.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		ts.Close()
		w.checkAllClosed(t)
	})
	port := ln.Addr().(*net.TCPAddr).Port
	base := "http://" + net.JoinHostPort(ll, fmt.Sprint(port))
	base = strings.Replace(base, "%", "%25", 1)
	checkRefusal(t, base, http.DefaultClient, true)
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

// checkRefusal makes one HTTP call and one WebSocket session and checks
// both were refused (403 with the text; close 1008) or served.
func checkRefusal(t *testing.T, base string, hc *http.Client, refuse bool) {
	t.Helper()
	resp, err := hc.Post(base+"/reset", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if refuse {
		if resp.StatusCode != http.StatusForbidden || string(body) != refusedText+"\n" {
			t.Errorf("HTTP: %d %q, want 403 %q", resp.StatusCode, body, refusedText)
		}
	} else if resp.StatusCode != http.StatusOK {
		t.Errorf("HTTP: %d %q, want 200", resp.StatusCode, body)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, wsURL(base), &websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.CloseNow()
	ec := &envClient{c: c}
	_, err = ec.reset(ctx, nil)
	if refuse {
		var ce websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.StatusPolicyViolation || ce.Reason != refusedText {
			t.Errorf("WS: got %v, want close 1008 %q", err, refusedText)
		}
	} else if err != nil {
		t.Errorf("WS: %v", err)
	} else {
		ec.close(ctx)
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
			checkRefusal(t, "http://workbench", unixClient(path), refuse)
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

// runAsUID runs clientScript as uid (no groups) and returns its output.
func runAsUID(t *testing.T, uid uint32, target string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/usr/bin/python3", "-I", "-c", clientScript, target)
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
	_, ts := startServer(t, w, func(c *Config) { c.EpisodeUID = sandboxRange })
	hostport := strings.TrimPrefix(ts.URL, "http://")
	if got := runAsUID(t, 20000, hostport); got != "HTTP/1.1 403 Forbidden | "+refusedText {
		t.Errorf("sandbox uid over TCP: %q, want 403", got)
	}
	if got := runAsUID(t, 20000+1023, hostport); !strings.HasPrefix(got, "HTTP/1.1 403") {
		t.Errorf("last sandbox uid over TCP: %q, want 403", got)
	}
	if got := runAsUID(t, 30000, hostport); !strings.HasPrefix(got, "HTTP/1.1 200") {
		t.Errorf("uid outside the sandbox over TCP: %q, want 200", got)
	}
	checkRefusal(t, ts.URL, http.DefaultClient, false)

	// The server's own unix socket: 0600 in a 0700 directory.
	w2 := newFakeWorld()
	path := serveUnix(t, w2, filepath.Join(t.TempDir(), "run"), func(c *Config) { c.EpisodeUID = sandboxRange })
	if got := runAsUID(t, 20000, path); got != fmt.Sprintf("connect-error %d", syscall.EACCES) {
		t.Errorf("sandbox uid on the unix socket: %q, want EACCES", got)
	}
	checkRefusal(t, "http://workbench", unixClient(path), false)

	// A socket someone made reachable: SO_PEERCRED still refuses.
	open := t.TempDir()
	os.Chmod(filepath.Dir(open), 0o755)
	os.Chmod(open, 0o755)
	w3 := newFakeWorld()
	sub := filepath.Join(open, "run")
	opath := serveUnix(t, w3, sub, func(c *Config) { c.EpisodeUID = sandboxRange })
	os.Chmod(sub, 0o755)
	os.Chmod(opath, 0o666)
	if got := runAsUID(t, 20000, opath); got != "HTTP/1.1 403 Forbidden | "+refusedText {
		t.Errorf("sandbox uid on an open unix socket: %q, want 403", got)
	}
	if w3.built() != 0 {
		t.Errorf("refused unix peers built %d environments", w3.built())
	}
}
