package gate

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/sandboxtest"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"golang.org/x/sys/unix"
)

func requireLittleEndian(t *testing.T) {
	t.Helper()
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		const why = "the /proc/net and netlink fixtures are written for a little-endian host"
		testenv.Unavailable(t, why)
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

// TestProcLookup: the decision on fixture socket tables, as the gate makes
// it when netlink is refused.
func TestProcLookup(t *testing.T) {
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
		name          string
		tcp, tcp6     string
		remote, local string // the peer and server addresses the server saw
		refused       bool
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
		{name: "episode_uid_other_port_allowed", tcp: procRow("0100007F:D432", server, 20000, 9), remote: "127.0.0.1:54321", local: "127.0.0.1:8000"},
		// Go reports a link-local peer with its zone ("%eth0"); the tables
		// have none.
		{name: "link_local_zone_refused", tcp: listener, tcp6: procRow(linkLocal+":D431", linkLocal+":1F40", 20000, 10), remote: "[fe80::fc:ff:fe00:1%eth0]:54321", local: "[fe80::fc:ff:fe00:1%eth0]:8000", refused: true},
		{name: "link_local_zone_root_allowed", tcp: listener, tcp6: procRow(linkLocal+":D431", linkLocal+":1F40", 0, 10), remote: "[fe80::fc:ff:fe00:1%eth0]:54321", local: "[fe80::fc:ff:fe00:1%eth0]:8000"},
	}
	g, err := New(Config{EpisodeUID: sandboxtest.InDefaultRange})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tables := []string{filepath.Join(dir, "tcp"), filepath.Join(dir, "tcp6-missing")}
			os.WriteFile(tables[0], []byte(tcpHeader+tt.tcp), 0o644)
			if tt.tcp6 != "" {
				tables[1] = filepath.Join(dir, "tcp6")
				os.WriteFile(tables[1], []byte(tcpHeader+tt.tcp6), 0o644)
			}
			client, server := unmap(netip.MustParseAddrPort(tt.remote)), unmap(netip.MustParseAddrPort(tt.local))
			sk, found, err := procLookup(tables, client, server)
			peer := Peer{Addr: client.Addr()}
			if found {
				peer = Peer{Local: true, UID: sk.UID, Orphan: sk.Inode == 0}
			}
			if why := g.refusal(peer, err); (why != "") != tt.refused {
				t.Fatalf("refused=%v (%q, peer %+v), want %v", why != "", why, peer, tt.refused)
			}
		})
	}
	t.Run("no_tables_is_an_error", func(t *testing.T) {
		_, _, err := procLookup([]string{filepath.Join(t.TempDir(), "none")}, netip.MustParseAddrPort("127.0.0.1:1"), netip.MustParseAddrPort("127.0.0.1:8000"))
		if err == nil {
			t.Fatal("no table read, yet no error: nothing would vouch for the peer")
		}
	})
}

// TestLookupTCPLive: the kernel lookup finds this process's own end of a
// loopback connection (its uid, a live inode), agrees with the socket
// tables, finds a socket bound to the loopback interface too, and finds
// nothing for an address that is not here.
func TestLookupTCPLive(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, network, addr string
		bindLo              bool
	}{
		{name: "ipv4", network: "tcp4", addr: "127.0.0.1:0"},
		{name: "ipv6", network: "tcp6", addr: "[::1]:0"},
		{name: "ipv4_bound_to_lo", network: "tcp4", addr: "127.0.0.1:0", bindLo: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ln, err := net.Listen(tt.network, tt.addr)
			if err != nil {
				testenv.Unavailable(t, fmt.Sprintf("no %s loopback: %v", tt.network, err))
			}
			defer ln.Close()
			d := net.Dialer{}
			if tt.bindLo {
				d.Control = func(_, _ string, c syscall.RawConn) error {
					var serr error
					c.Control(func(fd uintptr) { serr = unix.BindToDevice(int(fd), "lo") })
					return serr
				}
			}
			c, err := d.Dial(tt.network, ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			sc, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer sc.Close()
			client := netip.MustParseAddrPort(sc.RemoteAddr().String())
			server := netip.MustParseAddrPort(sc.LocalAddr().String())
			sk, found, err := LookupTCP(client, server)
			if err != nil || !found || sk.UID != uint32(os.Getuid()) || sk.Inode == 0 {
				t.Fatalf("LookupTCP = %+v, %v, %v; want this process's uid %d and a live inode", sk, found, err, os.Getuid())
			}
			if !tt.bindLo {
				direct, found, err := diagLookup(unmap(client), unmap(server), 0)
				if err != nil || !found || direct != sk {
					t.Errorf("sock_diag alone = %+v, %v, %v", direct, found, err)
				}
			}
			psk, pfound, err := procLookup(procNetTables, unmap(client), unmap(server))
			if err != nil || !pfound || psk != sk {
				t.Errorf("the socket tables say %+v, %v, %v; sock_diag %+v", psk, pfound, err, sk)
			}
			far := netip.AddrPortFrom(netip.MustParseAddr("192.0.2.7"), 40000)
			if tt.network == "tcp6" {
				far = netip.AddrPortFrom(netip.MustParseAddr("2001:db8::7"), 40000)
			}
			if sk, found, err := LookupTCP(far, server); err != nil || found {
				t.Errorf("a remote client: %+v, %v, %v; want not found", sk, found, err)
			}
		})
	}
}

// FuzzParseDiagReply: any datagram is parsed without a panic, and a socket
// is reported only from a reply that names the asked ends.
func FuzzParseDiagReply(f *testing.F) {
	client := netip.MustParseAddrPort("127.0.0.1:54321")
	server := netip.MustParseAddrPort("127.0.0.1:8000")
	req := diagRequest(7, unix.AF_INET, client, server, 0)
	reply := func(typ uint16, body []byte) []byte {
		b := make([]byte, nlmsgHdrLen, nlmsgHdrLen+len(body))
		binary.NativeEndian.PutUint32(b[0:], uint32(nlmsgHdrLen+len(body)))
		binary.NativeEndian.PutUint16(b[4:], typ)
		binary.NativeEndian.PutUint32(b[8:], 7)
		return append(b, body...)
	}
	msg := make([]byte, diagMsgLen)
	msg[0], msg[1] = unix.AF_INET, 1
	copy(msg[4:52], req[nlmsgHdrLen+8:nlmsgHdrLen+8+48])
	binary.NativeEndian.PutUint32(msg[64:], 20000)
	binary.NativeEndian.PutUint32(msg[68:], 42)
	f.Add(reply(sockDiagByFamily, msg))
	f.Add(reply(unix.NLMSG_ERROR, []byte{0xfe, 0xff, 0xff, 0xff})) // -ENOENT
	f.Add(reply(unix.NLMSG_DONE, nil))
	f.Add(req)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		sk, found, _, err := parseDiagReply(b, 7, client, server)
		if found && err != nil {
			t.Fatalf("found %+v with an error %v", sk, err)
		}
	})
}

// TestParseDiagReply: the fuzz seeds, decided.
func TestParseDiagReply(t *testing.T) {
	t.Parallel()
	requireLittleEndian(t)
	client := netip.MustParseAddrPort("127.0.0.1:54321")
	server := netip.MustParseAddrPort("127.0.0.1:8000")
	req := diagRequest(7, unix.AF_INET, client, server, 0)
	reply := func(seq uint32, typ uint16, body []byte) []byte {
		b := make([]byte, nlmsgHdrLen, nlmsgHdrLen+len(body))
		binary.NativeEndian.PutUint32(b[0:], uint32(nlmsgHdrLen+len(body)))
		binary.NativeEndian.PutUint16(b[4:], typ)
		binary.NativeEndian.PutUint32(b[8:], seq)
		return append(b, body...)
	}
	sock := func(state byte, sport uint16) []byte {
		m := make([]byte, diagMsgLen)
		m[0], m[1] = unix.AF_INET, state
		copy(m[4:52], req[nlmsgHdrLen+8:nlmsgHdrLen+8+48])
		binary.BigEndian.PutUint16(m[4:], sport)
		binary.NativeEndian.PutUint32(m[64:], 20000)
		binary.NativeEndian.PutUint32(m[68:], 42)
		return m
	}
	tests := []struct {
		name         string
		b            []byte
		found, isErr bool
	}{
		{name: "established", b: reply(7, sockDiagByFamily, sock(1, 54321)), found: true},
		{name: "listener_is_not_the_client", b: reply(7, sockDiagByFamily, sock(tcpListen, 54321))},
		{name: "another_socket", b: reply(7, sockDiagByFamily, sock(1, 1)), isErr: true},
		{name: "enoent", b: reply(7, unix.NLMSG_ERROR, []byte{0xfe, 0xff, 0xff, 0xff})},
		{name: "eperm", b: reply(7, unix.NLMSG_ERROR, []byte{0xff, 0xff, 0xff, 0xff}), isErr: true},
		{name: "short", b: reply(7, sockDiagByFamily, make([]byte, 10)), isErr: true},
		{name: "bad_length", b: []byte{0xff, 0, 0, 0, 20, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0}, isErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sk, found, done, err := parseDiagReply(tt.b, 7, client, server)
			if !done || found != tt.found || (err != nil) != tt.isErr {
				t.Fatalf("got %+v found %v done %v err %v; want found %v, error %v", sk, found, done, err, tt.found, tt.isErr)
			}
			if found && (sk.UID != 20000 || sk.Inode != 42) {
				t.Fatalf("socket %+v, want uid 20000 inode 42", sk)
			}
		})
	}
	// A reply to an earlier query is skipped, not taken.
	if _, found, done, err := parseDiagReply(reply(6, sockDiagByFamily, sock(1, 54321)), 7, client, server); found || done || err != nil {
		t.Errorf("a stale reply: found %v done %v err %v", found, done, err)
	}
}
