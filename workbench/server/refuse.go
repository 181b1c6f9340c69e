package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"github.com/coder/websocket"
	"golang.org/x/sys/unix"
)

// refusedText is the body of a refused HTTP request and the reason of a
// refused WebSocket's close frame.
const refusedText = "episode code cannot use this server"

// procNetTables are the kernel's TCP socket tables of this network
// namespace.
var procNetTables = []string{"/proc/net/tcp", "/proc/net/tcp6"}

// refuser tells connections opened by episode code (see the package doc).
type refuser struct {
	episodeUID func(uid uint32) bool
	// tables are read for TCP peers; tests point them at fixtures.
	tables []string
}

// peerKey is the context key of a connection's peer credentials.
type peerKey struct{}

// peerCred is what ConnContext learned of a connection's peer.
type peerCred struct {
	unix bool
	uid  uint32
	err  error
}

// withPeerCred is http.Server.ConnContext: it records a unix-socket peer's
// SO_PEERCRED credentials, which the kernel fixed when the peer connected.
func withPeerCred(ctx context.Context, c net.Conn) context.Context {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return ctx
	}
	p := peerCred{unix: true}
	raw, err := uc.SyscallConn()
	if err == nil {
		var cred *unix.Ucred
		var credErr error
		err = raw.Control(func(fd uintptr) {
			cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		})
		if err == nil {
			err = credErr
		}
		if err == nil {
			p.uid = cred.Uid
		}
	}
	if err != nil {
		p.err = fmt.Errorf("read SO_PEERCRED: %w", err)
	}
	return context.WithValue(ctx, peerKey{}, p)
}

// refuseEpisodeClients answers requests from episode code with 403, and
// closes their WebSocket sessions with 1008.
func (s *Server) refuseEpisodeClients(next http.Handler) http.Handler {
	if s.refuse == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		why := s.refuse.fromEpisode(r)
		if why == "" {
			next.ServeHTTP(w, r)
			return
		}
		s.log.Warn("refused a connection from episode code", "remote", r.RemoteAddr, "path", r.URL.Path, "why", why)
		if isWebSocketUpgrade(r) {
			c, err := websocket.Accept(w, r, nil)
			if err != nil {
				return
			}
			c.Close(websocket.StatusPolicyViolation, refusedText)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte(refusedText + "\n"))
	})
}

func isWebSocketUpgrade(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// fromEpisode returns why r comes from episode code, or "" when it does not.
func (rf *refuser) fromEpisode(r *http.Request) string {
	if p, ok := r.Context().Value(peerKey{}).(peerCred); ok && p.unix {
		switch {
		case p.err != nil:
			return p.err.Error()
		case rf.episodeUID(p.uid):
			return fmt.Sprintf("unix peer uid %d is an episode uid", p.uid)
		}
		return ""
	}
	client, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return fmt.Sprintf("cannot parse the peer address %q", r.RemoteAddr)
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return "no local address for the connection"
	}
	server, err := netip.ParseAddrPort(local.String())
	if err != nil {
		return fmt.Sprintf("cannot parse the local address %q", local.String())
	}
	socks, err := rf.clientSockets(unmap(client), unmap(server))
	if err != nil {
		// Nothing vouches for the peer.
		return err.Error()
	}
	for _, sk := range socks {
		if rf.episodeUID(sk.uid) {
			return fmt.Sprintf("client socket %s is owned by episode uid %d", client, sk.uid)
		}
	}
	if len(socks) > 0 {
		for _, sk := range socks {
			if sk.inode != 0 {
				return ""
			}
		}
		return fmt.Sprintf("client socket %s is held by no process", client)
	}
	return ""
}

// unmap returns ap as the socket tables print it: an IPv4-mapped address
// as IPv4, and without a zone (Go reports a link-local peer as
// "[fe80::1%eth0]:port"; the tables have no zone, and a zoned address
// would match no row and pass for a remote client).
func unmap(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap().WithZone(""), ap.Port())
}

// tcpSocket is one row of /proc/net/tcp{,6}.
type tcpSocket struct {
	local, remote netip.AddrPort
	uid           uint32
	inode         uint64
}

// clientSockets returns every socket of this network namespace whose local
// end is client and remote end is server: the client's own end of the
// connection, when the client is here. A remote client has none. It fails
// only when no table can be read.
func (rf *refuser) clientSockets(client, server netip.AddrPort) ([]tcpSocket, error) {
	var found []tcpSocket
	read := 0
	var errs []error
	for _, path := range rf.tables {
		b, err := os.ReadFile(path)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
			continue
		}
		read++
		for _, sk := range parseProcNetTCP(b) {
			if sk.local == client && sk.remote == server {
				found = append(found, sk)
			}
		}
	}
	if read == 0 {
		return nil, fmt.Errorf("cannot read the TCP socket tables: %w", errors.Join(append(errs, os.ErrNotExist)...))
	}
	return found, nil
}

// parseProcNetTCP parses /proc/net/tcp or tcp6: after a header line, rows
// of "sl local rem st queues tr retrnsmt uid timeout inode ...". Rows it
// cannot read are skipped.
func parseProcNetTCP(b []byte) []tcpSocket {
	var out []tcpSocket
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 4096), 1<<20)
	first := true
	for sc.Scan() {
		if first {
			first = false
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 10 {
			continue
		}
		local, err1 := parseProcEndpoint(f[1])
		remote, err2 := parseProcEndpoint(f[2])
		uid, err3 := strconv.ParseUint(f[7], 10, 32)
		inode, err4 := strconv.ParseUint(f[9], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
			continue
		}
		out = append(out, tcpSocket{local: local, remote: remote, uid: uint32(uid), inode: inode})
	}
	return out
}

// parseProcEndpoint parses "ADDR:PORT" of /proc/net/tcp{,6}: the address
// prints each 32-bit word as hex in host byte order, the port as big-endian
// hex. An IPv4-mapped IPv6 address is returned as the IPv4 address.
func parseProcEndpoint(field string) (netip.AddrPort, error) {
	host, port, ok := strings.Cut(field, ":")
	if !ok || (len(host) != 8 && len(host) != 32) {
		return netip.AddrPort{}, fmt.Errorf("endpoint %q: want 8 or 32 hex digits, a colon and a port", field)
	}
	raw, err := hex.DecodeString(host)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("endpoint %q: %w", field, err)
	}
	p, err := strconv.ParseUint(port, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("endpoint %q: port: %w", field, err)
	}
	packed := make([]byte, len(raw))
	for i := 0; i < len(raw); i += 4 {
		// The word as the kernel printed it, back into memory order.
		binary.NativeEndian.PutUint32(packed[i:], binary.BigEndian.Uint32(raw[i:]))
	}
	addr, _ := netip.AddrFromSlice(packed)
	return netip.AddrPortFrom(addr.Unmap(), uint16(p)), nil
}
