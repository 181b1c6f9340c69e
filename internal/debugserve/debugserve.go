// Package debugserve serves net/http/pprof on a loopback address for the
// --debug-listen flag of `workbench serve` and `agentpen serve`. It does
// not authenticate: loopback only, and, on a workbench, behind a gate that
// closes connections from episode code. Off unless the flag is given.
package debugserve

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"time"

	"github.com/agentpen/agentpen/internal/httpserve"

	"github.com/agentpen/agentpen/internal/cli"
	"github.com/agentpen/agentpen/workbench/gate"
)

// CheckAddr accepts a --debug-listen address only on loopback: an IP
// literal (127.0.0.0/8, ::1) or "localhost", with a port. Anything else is
// a usage error.
func CheckAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return cli.Usagef("--debug-listen %q: want host:port on loopback (127.0.0.1:6060): %v", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.IsLoopback() {
		return cli.Usagef("--debug-listen %q: profiling is served on loopback only (127.0.0.1 or [::1])", addr)
	}
	return nil
}

// Serve serves net/http/pprof on addr (loopback, checked by CheckAddr)
// until ctx is done, behind a gate that closes connections from episode
// code (episodeUID, when set) and allows a few connections at once: a
// profile costs the server CPU. The returned wait returns once it has
// stopped.
func Serve(ctx context.Context, addr string, episodeUID func(uint32) bool, log *slog.Logger) (wait func(), err error) {
	if err := CheckAddr(addr); err != nil {
		return nil, err
	}
	if host, port, _ := net.SplitHostPort(addr); host == "localhost" {
		addr = net.JoinHostPort("127.0.0.1", port) // not whatever localhost resolves to
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--debug-listen: %w", err)
	}
	g, err := gate.New(gate.Config{EpisodeUID: episodeUID, MaxConns: 8, MaxPerPeer: 4, Logger: log})
	if err != nil {
		ln.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Warn("serving profiles (net/http/pprof) on loopback", "addr", "http://"+ln.Addr().String()+"/debug/pprof/")
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := httpserve.Serve(ctx, hs, []net.Listener{ln}, httpserve.Options{Name: "debug listener", Wrap: g.Listener, ShutdownTimeout: time.Second}); err != nil {
			log.Error("debug listener", "err", err)
		}
	}()
	return func() { <-done }, nil
}
