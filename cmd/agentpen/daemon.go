package main

import (
	"context"
	"errors"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/adapter/docker"
)

// daemonFix is the one command that starts (or finds) the rootless daemon
// and prints the DOCKER_HOST to use; every DOCKER_HOST and daemon error
// ends with it.
const daemonFix = `start or find the rootless daemon: eval "$(scripts/rootless-docker.sh)"`

// fixedError is an error followed by what to do about it.
type fixedError struct {
	err error
	fix string
}

func (e *fixedError) Error() string { return e.err.Error() + "; " + e.fix }
func (e *fixedError) Unwrap() error { return e.err }

// withFix ends a DOCKER_HOST or daemon error with the fix (daemonFix, and
// for a socket path that does not look rootless, --allow-custom-socket
// first); other errors are returned as they are.
func withFix(err error) error {
	var he *docker.HostError
	switch {
	case errors.Is(err, docker.ErrHostNotRootless):
		return &fixedError{err, "if it is one, pass --allow-custom-socket; otherwise " + daemonFix}
	case errors.As(err, &he), errors.Is(err, adapter.ErrDaemonUnreachable), errors.Is(err, docker.ErrNotRootless):
		return &fixedError{err, daemonFix}
	}
	return err
}

// connect resolves DOCKER_HOST and connects to the rootless daemon it
// names; an error says what to do.
func connect(ctx context.Context, getenv func(string) string, allowCustom bool) (*docker.Driver, error) {
	host, err := docker.HostFromEnv(getenv, allowCustom)
	if err != nil {
		return nil, withFix(err)
	}
	d, err := docker.Connect(ctx, host)
	if err != nil {
		return nil, withFix(err)
	}
	return d, nil
}
