package gate

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// procNetTables are the kernel's TCP socket tables of this network
// namespace.
var procNetTables = []string{"/proc/net/tcp", "/proc/net/tcp6"}

// procLookup is LookupTCP over the socket tables at paths: the row whose
// local end is client and remote end is server, one held by a process if
// there is one (a connection in TIME_WAIT with the same ends is held by
// none). It fails only when no table can be read.
func procLookup(paths []string, client, server netip.AddrPort) (Socket, bool, error) {
	var found []tcpSocket
	read := 0
	var errs []error
	for _, path := range paths {
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
		return Socket{}, false, fmt.Errorf("cannot read the TCP socket tables: %w", errors.Join(append(errs, os.ErrNotExist)...))
	}
	if len(found) == 0 {
		return Socket{}, false, nil
	}
	pick := found[0]
	for _, sk := range found {
		if sk.inode != 0 {
			pick = sk
			break
		}
	}
	return Socket{UID: pick.uid, Inode: pick.inode}, true, nil
}

// tcpSocket is one row of /proc/net/tcp{,6}.
type tcpSocket struct {
	local, remote netip.AddrPort
	uid           uint32
	inode         uint64
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
