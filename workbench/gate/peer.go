package gate

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"golang.org/x/sys/unix"
)

// Peer is who is at the other end of a connection.
type Peer struct {
	// Local is set when the peer's end is here: a unix socket, or a TCP
	// socket of this network namespace. UID is then its owner (as this
	// process's user namespace sees it).
	Local bool
	UID   uint32
	// Orphan is set for a local TCP end that no process holds any longer
	// (the socket's inode is 0): its owner no longer vouches for it.
	Orphan bool
	// Addr is a remote peer's address; the zero Addr for a local one.
	Addr netip.Addr
}

// key names the peer for the per-peer cap: its uid when local, its
// address when remote.
func (p Peer) key() string {
	if p.Local {
		return "uid:" + strconv.FormatUint(uint64(p.UID), 10)
	}
	return "addr:" + p.Addr.String()
}

func (p Peer) String() string {
	switch {
	case p.Local:
		return "uid " + strconv.FormatUint(uint64(p.UID), 10)
	case p.Addr.IsValid():
		return p.Addr.String()
	}
	return "unknown"
}

// Identify tells who is at the other end of c: the SO_PEERCRED uid of a
// unix-socket peer; the owner of a TCP peer's socket when it is in this
// network namespace (LookupTCP), else its address. An error (wrapping
// ErrUnknownPeer) when it cannot tell.
func Identify(c net.Conn) (Peer, error) {
	switch c := c.(type) {
	case *net.UnixConn:
		uid, err := peerUID(c)
		if err != nil {
			return Peer{}, fmt.Errorf("%w: read SO_PEERCRED: %v", ErrUnknownPeer, err)
		}
		return Peer{Local: true, UID: uid}, nil
	case *net.TCPConn:
		client, err1 := netip.ParseAddrPort(c.RemoteAddr().String())
		server, err2 := netip.ParseAddrPort(c.LocalAddr().String())
		if err1 != nil || err2 != nil {
			return Peer{}, fmt.Errorf("%w: cannot parse %q or %q", ErrUnknownPeer, c.RemoteAddr(), c.LocalAddr())
		}
		sk, found, err := LookupTCP(client, server)
		if err != nil {
			return Peer{}, fmt.Errorf("%w: %v", ErrUnknownPeer, err)
		}
		if !found {
			return Peer{Addr: unmap(client).Addr()}, nil
		}
		return Peer{Local: true, UID: sk.UID, Orphan: sk.Inode == 0}, nil
	}
	return Peer{}, fmt.Errorf("%w: a %T connection", ErrUnknownPeer, c)
}

func peerUID(c *net.UnixConn) (uint32, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if credErr != nil {
		return 0, credErr
	}
	return cred.Uid, nil
}

// unmap returns ap as the kernel's socket tables hold it: an IPv4-mapped
// address as IPv4, and without a zone (Go reports a link-local peer as
// "[fe80::1%eth0]:port"; the tables have no zone, and a zoned address
// would match nothing and pass for a remote client).
func unmap(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap().WithZone(""), ap.Port())
}

// Socket is the client's end of a TCP connection, as the kernel keeps it.
type Socket struct {
	// UID owns the socket; Inode is 0 once no process holds it.
	UID   uint32
	Inode uint64
}

// LookupTCP finds the socket of this network namespace whose local end
// is client and remote end is server: the client's end of a connection,
// when the client is here. found is false for a remote client. It asks the
// kernel for exactly that socket (sock_diag over netlink), as a packet
// from the server would find it: first from no interface in particular,
// then, for a client address of this host, from the interface of the
// client's zone and from loopback (a socket bound to an interface, which
// any uid may do with SO_BINDTODEVICE, is found only from it), and last
// in /proc/net/tcp and tcp6, which list every socket. Where netlink is
// refused or missing it reads the tables alone. A zone on client names its
// interface; addresses are compared without it, IPv4-mapped ones as IPv4.
func LookupTCP(client, server netip.AddrPort) (sk Socket, found bool, err error) {
	zone := client.Addr().Zone()
	client, server = unmap(client), unmap(server)
	sk, found, err = diagLookup(client, server, 0)
	if err != nil {
		sk, found, perr := procLookup(procNetTables, client, server)
		if perr != nil {
			return Socket{}, false, errors.Join(err, perr)
		}
		return sk, found, nil
	}
	if found || !isOwnAddr(client.Addr()) {
		return sk, found, nil
	}
	for _, ifindex := range []int{zoneIndex(zone), loopbackIndex()} {
		if ifindex <= 0 {
			continue
		}
		if sk, found, err = diagLookup(client, server, uint32(ifindex)); err == nil && found {
			return sk, true, nil
		}
	}
	return procLookup(procNetTables, client, server)
}

// isOwnAddr reports whether a is loopback or an address of one of this
// network namespace's interfaces: a client there has its end here.
func isOwnAddr(a netip.Addr) bool {
	if a.IsLoopback() {
		return true
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return true // cannot tell: look further
	}
	for _, ia := range addrs {
		if n, ok := ia.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap() == a {
				return true
			}
		}
	}
	return false
}

func zoneIndex(zone string) int {
	if zone == "" {
		return 0
	}
	if n, err := strconv.Atoi(zone); err == nil {
		return n
	}
	if ifc, err := net.InterfaceByName(zone); err == nil {
		return ifc.Index
	}
	return 0
}

func loopbackIndex() int {
	ifs, err := net.Interfaces()
	if err != nil {
		return 0
	}
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagLoopback != 0 {
			return ifc.Index
		}
	}
	return 0
}
