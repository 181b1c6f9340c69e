package main

import (
	"context"
	"fmt"
	"io"

	"github.com/agentpen/agentpen/internal/cli"
)

const usage = `agentpen runs AI-agent benchmark campaigns in a rootless Docker daemon.

Usage:
  agentpen <command> [flags] [arguments]

Commands:
  doctor          check DOCKER_HOST, the daemon (must be rootless), resource-limit
                  enforcement and the local agentpen images
  up              bring a campaign up from a JSON spec and print its ids as JSON
  spec            the campaign spec's JSON Schema (spec schema), and its check
                  without a daemon (spec check SPEC.json); docs/spec.md
  down            remove a campaign by the ids its journal recorded, verify, and
                  write the cleanup report
  serve           the launcher API over HTTP, with an episode proxy per workspace
                  (base_urls an unmodified OpenEnv client uses)
  attest          prove what a campaign is (daemon, network, containers, hardening,
                  probes from inside) and write its attestation report
  cleanup verify  verify, read-only, that nothing of a campaign remains
  ls              the campaigns in the state root, their generation and state
  orphans         agentpen-labelled resources no journal accounts for (--remove ID)
  version         agentpen's version, commit, Go and Docker SDK versions, the daemon's
  help            show this text

Exit status: 0 success; 1 failure (a cleanup not verified, a bring-up rolled back);
2 bad input; 3 daemon unreachable; 4 conflict (the campaign exists, is locked, or
another state root's campaign holds its id); 130/143 interrupted (a second signal
exits at once; agentpen down removes what the journal names).

DOCKER_HOST must name the rootless daemon's unix socket explicitly, for example
  eval "$(scripts/rootless-docker.sh)"
Run "agentpen <command> --help" for a command's flags.
`

// run is the whole program: it parses args and dispatches; main only wires
// the process to it. It reads the environment only through getenv.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return cli.Usagef("no command given")
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	case "doctor":
		return doctor(ctx, args[1:], stdout, stderr, getenv)
	case "up":
		return up(ctx, args[1:], stdout, stderr, getenv)
	case "spec":
		return spec(ctx, args[1:], stdout, stderr)
	case "down":
		return down(ctx, args[1:], stdout, stderr, getenv)
	case "cleanup":
		return cleanupCmd(ctx, args[1:], stdout, stderr, getenv)
	case "ls":
		return ls(ctx, args[1:], stdout, stderr, getenv)
	case "orphans":
		return orphans(ctx, args[1:], stdout, stderr, getenv)
	case "version", "--version":
		return version(ctx, args[1:], stdout, stderr, getenv)
	case "attest":
		return attestCmd(ctx, args[1:], stdout, stderr, getenv)
	case "serve":
		return serve(ctx, args[1:], stdout, stderr, getenv)
	}
	return &cli.UsageError{Msg: fmt.Sprintf("unknown command %q", args[0]), Hint: "agentpen help"}
}
