package probe

import (
	"context"
	"errors"
	"net"
	"syscall"
)

// Outcomes of a probe. A connection or request either got through
// (OutcomeConnected for TCP, OutcomeReply for HTTP) or was stopped in one
// of the ways below, which the attestation tells apart: a refusal is an
// answer from something, a timeout is silence.
const (
	// OutcomeConnected: the TCP connection was established.
	OutcomeConnected = "connected"
	// OutcomeReply: an HTTP reply came back (any status).
	OutcomeReply = "reply"
	// OutcomeRefused: the peer answered with a reset (ECONNREFUSED).
	OutcomeRefused = "refused"
	// OutcomeTimeout: nothing answered before the probe's timeout.
	OutcomeTimeout = "timeout"
	// OutcomeUnreachable: the kernel had no route (ENETUNREACH,
	// EHOSTUNREACH, EADDRNOTAVAIL).
	OutcomeUnreachable = "unreachable"
	// OutcomeDNS: the name did not resolve.
	OutcomeDNS = "dns"
	// OutcomeDenied: the kernel refused the caller (EACCES, EPERM), as on
	// a unix socket in a directory the uid cannot search.
	OutcomeDenied = "denied"
	// OutcomeError: anything else (the error says what).
	OutcomeError = "error"
	// OutcomeVisible and OutcomeNone: a socket probe found a Docker socket,
	// or none.
	OutcomeVisible = "visible"
	OutcomeNone    = "none"
	// OutcomeFound and OutcomeNotFound: a process probe found the process
	// serving the socket or port, or none.
	OutcomeFound    = "found"
	OutcomeNotFound = "not_found"
	// OutcomeReadable: a file probe's uid could open the file for reading.
	OutcomeReadable = "readable"
)

// Classify names what stopped a dial or a request: ctx is the probe's
// own deadline-bound context.
func Classify(ctx context.Context, err error) string {
	var dnsErr *net.DNSError
	switch {
	case err == nil:
		return OutcomeConnected
	case errors.As(err, &dnsErr) && !dnsErr.IsTimeout:
		return OutcomeDNS
	case errors.Is(err, syscall.ECONNREFUSED):
		return OutcomeRefused
	case errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.EADDRNOTAVAIL):
		return OutcomeUnreachable
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return OutcomeDenied
	case ctx.Err() != nil, errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		return OutcomeTimeout
	}
	return OutcomeError
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
