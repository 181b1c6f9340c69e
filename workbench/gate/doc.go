// Package gate decides, as each connection is accepted and before an HTTP
// server sees it, whether a server takes it: the episode server (package
// server) and the grader (package grader) serve through it.
//
// # Who the peer is
//
// A unix-socket peer is its SO_PEERCRED uid. A TCP peer whose end of the
// connection is in this network namespace is the owner of that socket,
// found by an exact sock_diag lookup of the client's end (netlink, one
// socket, whatever the table size), or, where netlink is refused, in
// /proc/net/tcp and tcp6 (IPv4-mapped addresses read as IPv4, link-local
// zones dropped). A TCP peer with no end here is remote: its IP address.
//
// # What is refused
//
// When Config.EpisodeUID is set (the uid sandbox is on), a connection is
// refused when its peer is an episode uid, when a local peer's end is held
// by no process any longer (nothing vouches for it), or when the peer
// cannot be told at all (unreadable credentials or socket tables, an
// address that does not parse). A refused connection is closed at once
// (a TCP one reset, so not even a TIME_WAIT entry stays): it never holds a
// descriptor longer than the accept, never reaches the HTTP server, costs
// no goroutine, and gets no reply (the client sees a reset or an EOF).
//
// Every connection counts against two caps: Config.MaxPerPeer open at once
// from one peer (its uid when local, its address when remote), and
// Config.MaxConns open at once in all. A connection over a cap is closed
// the same way. Refusals and caps are logged
// at most once per Config.LogEvery per kind, each line counting what was
// refused since the last, so a flood cannot flood the log.
//
// The gate does not read anything the client sends, does not speak TLS
// and does not rate-limit connections over time: a peer may connect and be
// refused as fast as it likes, each refusal costing one accept, one lookup,
// one write and one close. It does not trust proxy headers (it never sees
// them).
package gate
