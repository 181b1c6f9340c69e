package gate

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// Netlink sock_diag (linux/sock_diag.h, linux/inet_diag.h).
const (
	sockDiagByFamily = 20 // SOCK_DIAG_BY_FAMILY
	tcpListen        = 10 // TCP_LISTEN
	nlmsgHdrLen      = 16
	diagReqLen       = 56 // struct inet_diag_req_v2
	diagMsgLen       = 72 // struct inet_diag_msg
)

// diagLookup asks the kernel for the one TCP socket whose local end is
// client and remote end is server (an exact lookup, not a dump). An IPv4
// client is looked up in the IPv4 table, which also holds IPv6 sockets
// connected to IPv4-mapped addresses.
func diagLookup(client, server netip.AddrPort, ifindex uint32) (Socket, bool, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return Socket{}, false, fmt.Errorf("sock_diag: %w", err)
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval(int64(2e9))
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	family := uint8(unix.AF_INET6)
	if client.Addr().Is4() && server.Addr().Is4() {
		family = unix.AF_INET
	}
	return diagQuery(fd, 1, family, client, server, ifindex)
}

func mapped(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom16(ap.Addr().As16()), ap.Port())
}

// diagQuery sends one exact lookup and reads its reply.
func diagQuery(fd int, seq uint32, family uint8, client, server netip.AddrPort, ifindex uint32) (Socket, bool, error) {
	req := diagRequest(seq, family, client, server, ifindex)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return Socket{}, false, fmt.Errorf("sock_diag: send: %w", err)
	}
	buf := make([]byte, 8192)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return Socket{}, false, fmt.Errorf("sock_diag: receive: %w", err)
		}
		sk, found, done, err := parseDiagReply(buf[:n], seq, client, server)
		if err != nil || done {
			return sk, found, err
		}
	}
}

// diagRequest builds an nlmsghdr and an inet_diag_req_v2 that names one
// socket by its four-tuple: id.src/sport are its local end (the client),
// id.dst/dport its remote end (the server); the kernel looks it up the way
// a packet from the server to the client would be, arriving on ifindex
// (0: any, but a socket bound to an interface is then not found).
func diagRequest(seq uint32, family uint8, client, server netip.AddrPort, ifindex uint32) []byte {
	b := make([]byte, nlmsgHdrLen+diagReqLen)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(len(b)))
	ne.PutUint16(b[4:], sockDiagByFamily)
	ne.PutUint16(b[6:], unix.NLM_F_REQUEST)
	ne.PutUint32(b[8:], seq)
	r := b[nlmsgHdrLen:]
	r[0] = family
	r[1] = unix.IPPROTO_TCP
	ne.PutUint32(r[4:], ^uint32(0)) // every state
	id := r[8:]
	binary.BigEndian.PutUint16(id[0:], client.Port())
	binary.BigEndian.PutUint16(id[2:], server.Port())
	putAddr(id[4:20], client.Addr())
	putAddr(id[20:36], server.Addr())
	ne.PutUint32(id[36:], ifindex)
	ne.PutUint32(id[40:], ^uint32(0)) // INET_DIAG_NOCOOKIE
	ne.PutUint32(id[44:], ^uint32(0))
	return b
}

func putAddr(dst []byte, a netip.Addr) {
	if a.Is4() {
		v := a.As4()
		copy(dst, v[:])
		return
	}
	v := a.As16()
	copy(dst, v[:])
}

// errDiagReply marks a reply that is not what was asked.
var errDiagReply = errors.New("sock_diag: malformed reply")

// parseDiagReply reads one datagram of the reply to request seq. done is
// set once the answer is known: the socket (found), or that there is none
// (ENOENT). A listening socket is not the client's end: a lookup that
// finds no connection falls back to listeners, so one is "not found".
func parseDiagReply(b []byte, seq uint32, client, server netip.AddrPort) (sk Socket, found, done bool, err error) {
	ne := binary.NativeEndian
	for len(b) >= nlmsgHdrLen {
		l := int(ne.Uint32(b[0:]))
		typ := ne.Uint16(b[4:])
		gotSeq := ne.Uint32(b[8:])
		if l < nlmsgHdrLen || l > len(b) {
			return Socket{}, false, true, errDiagReply
		}
		msg := b[nlmsgHdrLen:l]
		next := b[min((l+3)&^3, len(b)):]
		b = next
		if gotSeq != seq {
			continue // a stale reply to an earlier query
		}
		switch typ {
		case unix.NLMSG_ERROR:
			if len(msg) < 4 {
				return Socket{}, false, true, errDiagReply
			}
			errno := -int32(ne.Uint32(msg))
			if errno == 0 {
				continue // an acknowledgement
			}
			if unix.Errno(errno) == unix.ENOENT {
				return Socket{}, false, true, nil
			}
			return Socket{}, false, true, fmt.Errorf("sock_diag: %w", unix.Errno(errno))
		case unix.NLMSG_DONE:
			return Socket{}, false, true, nil
		case sockDiagByFamily:
			if len(msg) < diagMsgLen {
				return Socket{}, false, true, errDiagReply
			}
			if msg[1] == tcpListen {
				// No connection matched; the kernel fell back to a
				// listener bound where the client is.
				return Socket{}, false, true, nil
			}
			if !sameEnds(msg[0], msg[4:52], client, server) {
				return Socket{}, false, true, fmt.Errorf("%w: another socket", errDiagReply)
			}
			return Socket{UID: ne.Uint32(msg[64:]), Inode: uint64(ne.Uint32(msg[68:]))}, true, true, nil
		}
	}
	return Socket{}, false, false, nil
}

// sameEnds checks that a reply's inet_diag_sockid (of a socket of
// family) is the one asked for: an IPv6 socket connected to an
// IPv4-mapped address reports the mapped addresses.
func sameEnds(family uint8, id []byte, client, server netip.AddrPort) bool {
	if binary.BigEndian.Uint16(id[0:]) != client.Port() || binary.BigEndian.Uint16(id[2:]) != server.Port() {
		return false
	}
	n := 16
	switch {
	case family == unix.AF_INET && client.Addr().Is4():
		n = 4
	case family == unix.AF_INET6 && client.Addr().Is4():
		client, server = mapped(client), mapped(server)
	case family != unix.AF_INET6:
		return false
	}
	want := make([]byte, 32)
	putAddr(want[0:16], client.Addr())
	putAddr(want[16:32], server.Addr())
	for i := range n {
		if id[4+i] != want[i] || id[20+i] != want[16+i] {
			return false
		}
	}
	return true
}
