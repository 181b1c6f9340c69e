// Package httpserve is the lifecycle every HTTP server of agentpen shares:
// serve one http.Server on several listeners until the context ends or a
// listener fails, then shut down in order (the server's own work first,
// then http.Server.Shutdown within a bound, then Close if that bound
// passes) and wait for every listener's loop to return.
//
// It does not build handlers, choose timeouts or open listeners: each
// server keeps its http.Server's settings and says, through Options, what
// happens around the shutdown (ending hijacked sessions, cutting requests
// still being read).
package httpserve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Options say how one server serves and stops.
type Options struct {
	// Name prefixes errors ("server", "grader").
	Name string
	// Log receives "listening" per listener and "stopped"; nil discards.
	Log *slog.Logger
	// Wrap, when set, wraps each listener (a gate that refuses peers).
	Wrap func(net.Listener) net.Listener
	// TLS, when set, serves TLS with it on every listener.
	TLS *tls.Config
	// ShutdownTimeout bounds the whole shutdown (Stop and
	// http.Server.Shutdown); past it the server is closed.
	ShutdownTimeout time.Duration
	// Stop, when set, runs once serving ends, before and beside
	// http.Server.Shutdown: the server's own work (sessions that
	// Shutdown neither tracks nor cancels, operations in flight). With
	// StopFirst it runs to its end before Shutdown starts; otherwise the
	// two run together (an operation in flight holds its request open).
	Stop      func(ctx context.Context) error
	StopFirst bool
	// Cut, when set, is called CutAfter into the shutdown (0: at once,
	// after Stop when StopFirst, before http.Server.Shutdown begins; later
	// only if Shutdown is still waiting then): requests still being read
	// would hold Shutdown up until their read timeout.
	CutAfter time.Duration
	Cut      func()
}

// Serve serves hs on every listener until ctx is done or one listener's
// loop fails, then shuts down as opts say and returns both errors (nil
// after a clean stop). It closes the listeners.
func Serve(ctx context.Context, hs *http.Server, listeners []net.Listener, opts Options) error {
	if len(listeners) == 0 {
		return fmt.Errorf("%s: Serve needs at least one listener", opts.Name)
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	hs.TLSConfig = opts.TLS
	errc := make(chan error, len(listeners))
	var serving sync.WaitGroup
	for _, ln := range listeners {
		serving.Go(func() {
			log.Info("listening", "addr", Name(ln))
			if opts.Wrap != nil {
				ln = opts.Wrap(ln)
			}
			var err error
			if opts.TLS != nil {
				err = hs.ServeTLS(ln, "", "")
			} else {
				err = hs.Serve(ln)
			}
			if err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("%s: serve %s: %w", opts.Name, Name(ln), err)
			}
		})
	}
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opts.ShutdownTimeout)
	defer cancel()
	var stopErr error
	stopped := make(chan struct{})
	stop := func() {
		defer close(stopped)
		if opts.Stop != nil {
			stopErr = opts.Stop(sctx)
		}
	}
	if opts.StopFirst {
		stop()
	} else {
		go stop()
	}
	switch {
	case opts.Cut != nil && opts.CutAfter <= 0:
		opts.Cut()
	case opts.Cut != nil:
		cut := time.AfterFunc(opts.CutAfter, opts.Cut)
		defer cut.Stop()
	}
	var shutErr error
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close()
		shutErr = fmt.Errorf("%s: http shutdown: %w", opts.Name, err)
	}
	<-stopped
	serving.Wait()
	log.Info("stopped")
	return errors.Join(serveErr, stopErr, shutErr)
}

// Name names a listener as the logs do: unix:///path, tcp://host:port.
func Name(ln net.Listener) string {
	a := ln.Addr()
	if a.Network() == "unix" {
		return "unix://" + a.String()
	}
	return a.Network() + "://" + a.String()
}
