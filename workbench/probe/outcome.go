package probe

import (
	"context"
	"errors"
	"net"
	"syscall"
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
