package main

import (
	"context"
	"log/slog"
	"net"

	"github.com/agentpen/agentpen/internal/debugserve"
)

// checkDebugAddr is debugserve.CheckAddr.
func checkDebugAddr(addr string) error { return debugserve.CheckAddr(addr) }

// serveWithDebug runs serve on lns until ctx is done, with the profiling
// listener (serveDebug) beside it when debugAddr is set.
func serveWithDebug(ctx context.Context, debugAddr string, episodeUID func(uint32) bool, log *slog.Logger,
	lns []net.Listener, serve func(context.Context, ...net.Listener) error) error {
	if debugAddr == "" {
		return serve(ctx, lns...)
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	wait, err := debugserve.Serve(ctx, debugAddr, episodeUID, log)
	if err != nil {
		for _, l := range lns {
			l.Close()
		}
		return err
	}
	err = serve(ctx, lns...)
	stop()
	wait()
	return err
}
