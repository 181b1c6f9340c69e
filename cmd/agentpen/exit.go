package main

import (
	"errors"
	"syscall"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/adapter/docker"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/custody"
	"github.com/agentpen/agentpen/internal/cli"
	"github.com/agentpen/agentpen/store"
)

// Exit statuses (documented in the usage text, the package doc and the
// README).
const (
	exitFailure     = 1 // the command failed: a cleanup not verified, a bring-up rolled back
	exitBadInput    = 2 // a bad command line, spec, campaign id, state root, DOCKER_HOST or server key; a campaign that is not there or not up
	exitUnreachable = 3 // the daemon did not answer
	exitConflict    = 4 // the campaign exists, is locked, a twin holds its id; another serve holds the state root or the address
)

// exitCode maps an error to the exit status its class has.
func exitCode(err error) int {
	var he *docker.HostError
	switch {
	case err == nil, errors.Is(err, cli.ErrHelp):
		return 0
	case cli.ExitCode(err) != 1:
		return cli.ExitCode(err)
	case errors.Is(err, campaign.ErrInvalid), errors.As(err, &he), errors.Is(err, store.ErrNoCampaign), errors.Is(err, store.ErrSecret),
		errors.Is(err, adapter.ErrNotUp), errors.Is(err, adapter.ErrNoPool), errors.Is(err, store.ErrStateRoot), errors.Is(err, campaign.ErrUntrusted),
		errors.Is(err, custody.ErrKey), errors.Is(err, store.ErrNoSigningKey), errors.Is(err, adapter.ErrUnattestable):
		return exitBadInput
	case errors.Is(err, adapter.ErrDaemonUnreachable):
		return exitUnreachable
	case errors.Is(err, adapter.ErrConflict), errors.Is(err, store.ErrLocked), errors.Is(err, store.ErrServed), errors.Is(err, store.ErrEmptyCampaign),
		errors.Is(err, syscall.EADDRINUSE):
		return exitConflict
	}
	return exitFailure
}
