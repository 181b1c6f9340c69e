package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

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
  add             bind a task to a workspace of a campaign's pool and print it (refills
                  the pool before returning)
  attest          prove what a campaign is (daemon, network, containers, hardening,
                  probes from inside) and write its attestation report
  cleanup verify  verify, read-only, that nothing of a campaign remains
  verify          check a campaign's signed reports (or one report file): signatures,
                  the journal's chain, the files their statements name
  key             print the public key the reports are signed with (PEM)
  diff A B        compare two campaigns' attestations field by field: images and their
                  digests, workbench, runtime and kernel versions, seccomp, limits
  checks          every check an attestation can hold: what it proves, from what
  report schema   the JSON Schema of a report (attestation, cleanup)
  ls              the campaigns in the state root, their generation and state
  results         a campaign's episode results (reward, steps, how each ended)
  orphans         agentpen-labelled resources no journal accounts for (--remove ID)
  reconcile       roll back, finish or expire every campaign its journal says needs it
                  (what serve does at start), without serving
  tasks [ID]      the workbench's task catalogue, or what an agent sees of one task
  images          the daemon's local images a spec can name (id, tags, workbench version)
  version         agentpen's version, commit, Go and Docker SDK versions, the daemon's
  help [CMD]      show this text, or CMD's help (as agentpen CMD --help)

Exit status: 0 success; 1 failure (a cleanup not verified, a bring-up rolled back);
2 bad input; 3 daemon unreachable; 4 conflict (the campaign exists, is locked, or
another state root's campaign holds its id); 130/143 interrupted (a second signal
exits at once; agentpen down removes what the journal names).

DOCKER_HOST must name the rootless daemon's unix socket explicitly, for example
  eval "$(scripts/rootless-docker.sh)"
Run "agentpen <command> --help" for a command's flags.
`

// commands are the commands agentpen help CMD knows.
var commands = map[string]bool{
	"doctor": true, "up": true, "spec": true, "down": true, "serve": true, "attest": true,
	"cleanup": true, "ls": true, "orphans": true, "version": true, "tasks": true, "images": true, "reconcile": true,
	"verify": true, "key": true, "diff": true, "checks": true, "report": true, "results": true, "add": true,
}

// run is the whole program: it parses args and dispatches; main only wires
// the process to it. It reads the environment only through getenv.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return cli.Usagef("no command given")
	}
	var cmd func(context.Context, []string, io.Writer, io.Writer, func(string) string) error
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		if name == "help" && len(args) > 1 && !strings.HasPrefix(args[1], "-") && args[1] != "help" {
			// agentpen help CMD [SUB]: CMD's own help.
			if !commands[args[1]] {
				return cli.InCommand("agentpen help", &cli.UsageError{Msg: fmt.Sprintf("unknown command %q", args[1]), Hint: "agentpen help"})
			}
			return run(ctx, append(slices.Clone(args[1:]), "--help"), stdout, stderr, getenv)
		}
		fmt.Fprint(stdout, usage)
		return nil
	case "doctor":
		cmd = doctor
	case "up":
		cmd = up
	case "spec":
		name := "agentpen spec"
		if len(args) > 1 && (args[1] == "check" || args[1] == "schema") {
			name += " " + args[1]
		}
		return cli.InCommand(name, spec(ctx, args[1:], stdout, stderr))
	case "down":
		cmd = down
	case "cleanup":
		cmd = cleanupCmd
	case "ls":
		cmd = ls
	case "results":
		cmd = resultsCmd
	case "orphans":
		cmd = orphans
	case "version", "--version":
		cmd, name = version, "version"
	case "add":
		cmd = addCmd
	case "attest":
		cmd = attestCmd
	case "serve":
		cmd = serve
	case "tasks":
		cmd = tasksCmd
	case "images":
		cmd = imagesCmd
	case "reconcile":
		cmd = reconcileCmd
	case "verify":
		cmd = verifyCmd
	case "key":
		cmd = keyCmd
	case "diff":
		cmd = diffCmd
	case "checks":
		cmd = checksCmd
	case "report":
		return cli.InCommand("agentpen report", reportCmd(ctx, args[1:], stdout, stderr, getenv))
	}
	if cmd != nil {
		// Every error is printed after the command's name, once.
		return cli.InCommand("agentpen "+name, cmd(ctx, args[1:], stdout, stderr, getenv))
	}
	return &cli.UsageError{Msg: fmt.Sprintf("unknown command %q", args[0]), Hint: "agentpen help"}
}
