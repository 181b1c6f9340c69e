package gate

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Defaults of Config's zero values.
const (
	// DefaultMaxPerPeer is the default cap of connections open at once
	// from one peer.
	DefaultMaxPerPeer = 64
	// DefaultMaxConns is the default cap of connections open at once in
	// all (lowered to half the process's RLIMIT_NOFILE when that is less).
	DefaultMaxConns = 1024
	// DefaultLogEvery is the default least time between two log lines
	// of one kind.
	DefaultLogEvery = 10 * time.Second
)

// Config configures a Gate. Fields may not change after New.
type Config struct {
	// EpisodeUID reports whether a uid belongs to episode code. When it
	// is set, connections from such a uid, and from peers that cannot be
	// told, are refused; when it is nil, none is refused for who it is.
	EpisodeUID func(uid uint32) bool
	// MaxPerPeer caps the connections open at once from one peer (its uid
	// when local, its IP address when remote); 0 means DefaultMaxPerPeer.
	MaxPerPeer int
	// MaxConns caps the connections open at once over every listener of
	// the gate; 0 means DefaultMaxConns, or half the process's soft
	// RLIMIT_NOFILE when that is less, so connections never take every
	// descriptor the server needs for its own work.
	MaxConns int
	// LogEvery is the least time between two log lines of one kind; 0
	// means DefaultLogEvery.
	LogEvery time.Duration
	// Logger receives the refusal and cap lines. Nil discards.
	Logger *slog.Logger
}

// Gate guards the listeners of one server: the caps count over all of
// them.
type Gate struct {
	cfg Config
	log *slog.Logger
	// identify tells who is at the other end of a connection; tests
	// replace it.
	identify func(net.Conn) (Peer, error)
	now      func() time.Time

	mu      sync.Mutex
	open    int
	perPeer map[string]int

	refusedLog, peerCapLog, totalCapLog limiter
}

// New returns a Gate for cfg.
func New(cfg Config) (*Gate, error) {
	if cfg.MaxPerPeer < 0 || cfg.MaxConns < 0 || cfg.LogEvery < 0 {
		return nil, fmt.Errorf("gate: MaxPerPeer %d, MaxConns %d, LogEvery %v: must not be negative", cfg.MaxPerPeer, cfg.MaxConns, cfg.LogEvery)
	}
	if cfg.MaxPerPeer == 0 {
		cfg.MaxPerPeer = DefaultMaxPerPeer
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = DefaultMaxConns
		var lim unix.Rlimit
		if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) == nil && lim.Cur/2 < uint64(cfg.MaxConns) {
			cfg.MaxConns = max(int(lim.Cur/2), 1)
		}
	}
	if cfg.LogEvery == 0 {
		cfg.LogEvery = DefaultLogEvery
	}
	g := &Gate{cfg: cfg, log: cfg.Logger, identify: Identify, now: time.Now, perPeer: map[string]int{}}
	if g.log == nil {
		g.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return g, nil
}

// MaxConns reports the cap of connections open at once, its default
// resolved.
func (g *Gate) MaxConns() int { return g.cfg.MaxConns }

// MaxPerPeer reports the cap of connections from one peer.
func (g *Gate) MaxPerPeer() int { return g.cfg.MaxPerPeer }

// Open reports the connections the gate let through that are still open.
func (g *Gate) Open() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open
}

// Listener returns ln behind the gate: its Accept returns only the
// connections the gate takes, and refuses and closes the others itself.
// Closing it closes ln.
func (g *Gate) Listener(ln net.Listener) net.Listener { return &listener{Listener: ln, g: g} }

type listener struct {
	net.Listener
	g *Gate
}

func (l *listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if gc, ok := l.g.admit(c); ok {
			return gc, nil
		}
	}
}

// admit decides on c: it returns c wrapped so that closing it frees its
// place, or refuses and closes it. A refusal is noted (logged, or counted
// for the next line) before the close, so a client that sees the close
// finds it in the log.
func (g *Gate) admit(c net.Conn) (net.Conn, bool) {
	g.mu.Lock()
	full := g.open >= g.cfg.MaxConns
	open := g.open
	g.mu.Unlock()
	if full {
		g.totalCapLog.note(g, "connection cap reached: refusing connections", "max_conns", g.cfg.MaxConns, "open", open)
		refuse(c)
		return nil, false
	}
	peer, err := g.identify(c)
	if why := g.refusal(peer, err); why != "" {
		g.refusedLog.note(g, "refused connections from episode code", "peer", peer.String(), "why", why)
		refuse(c)
		return nil, false
	}
	key := peer.key()
	g.mu.Lock()
	switch {
	case g.open >= g.cfg.MaxConns:
		open = g.open
		g.mu.Unlock()
		g.totalCapLog.note(g, "connection cap reached: refusing connections", "max_conns", g.cfg.MaxConns, "open", open)
		refuse(c)
		return nil, false
	case g.perPeer[key] >= g.cfg.MaxPerPeer:
		n := g.perPeer[key]
		g.mu.Unlock()
		g.peerCapLog.note(g, "per-peer connection cap reached: refusing connections", "peer", peer.String(), "max_per_peer", g.cfg.MaxPerPeer, "open_from_peer", n)
		refuse(c)
		return nil, false
	}
	g.open++
	g.perPeer[key]++
	g.mu.Unlock()
	return &conn{Conn: c, release: func() { g.release(key) }}, true
}

func (g *Gate) release(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open--
	if g.perPeer[key]--; g.perPeer[key] <= 0 {
		delete(g.perPeer, key)
	}
}

// refusal returns why a connection from peer (or one that could not be
// identified, err) is refused, or "".
func (g *Gate) refusal(peer Peer, err error) string {
	if g.cfg.EpisodeUID == nil {
		return ""
	}
	switch {
	case err != nil:
		return err.Error()
	case peer.Local && g.cfg.EpisodeUID(peer.UID):
		return fmt.Sprintf("uid %d is an episode uid", peer.UID)
	case peer.Local && peer.Orphan:
		return "the client's socket is held by no process"
	}
	return ""
}

// refuse closes c at once. A TCP connection is reset (SO_LINGER 0), so
// the server keeps no TIME_WAIT entry for it either. Nothing is written:
// a reply sent before the client's request is not one HTTP clients read
// (Go's calls it unsolicited), and closing with the request unread resets
// the connection anyway.
func refuse(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// conn is an admitted connection; closing it frees its place in the caps,
// once.
type conn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// limiter logs one kind of line at most once per LogEvery, counting the
// events in between.
type limiter struct {
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func (l *limiter) note(g *Gate, msg string, attrs ...any) {
	l.mu.Lock()
	now := g.now()
	if !l.last.IsZero() && now.Sub(l.last) < g.cfg.LogEvery {
		l.suppressed++
		l.mu.Unlock()
		return
	}
	n := l.suppressed
	l.last, l.suppressed = now, 0
	l.mu.Unlock()
	g.log.Warn(msg, append(attrs, "more_since_last_line", n)...)
}

// ErrUnknownPeer is returned (wrapped) by Identify when it cannot tell who
// a peer is.
var ErrUnknownPeer = errors.New("gate: cannot tell the peer")
