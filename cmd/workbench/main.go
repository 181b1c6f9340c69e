// Command workbench is the agentpen workbench. Its subcommands:
//
//	workbench serve [flags]          the OpenEnv-compatible episode server (HTTP and WebSocket)
//	workbench grader [flags]         the task server that keeps answer keys out of the agents' containers
//	workbench client [flags] TARGET  play episodes by hand (reset, step TOOL {json}) on a server
//	workbench probe [flags] URL      one HTTP request, a JSON result (the adapter's readiness check, by docker exec)
//	workbench probe --batch JSON     a batch of http, tcp, socket and process probes at once (the attestation's)
//	workbench probe --batches        batches from stdin, one a line, each answered as it comes (the attestation's phases)
//	workbench tasks [--json]         the task catalogue
//	workbench tasks show [--json] ID what an agent sees of one task
//	workbench version [--json]       version, commit and Go version
//	workbench help                   the list of commands
//
// Every subcommand takes --help (printed on stdout, exit 0); a bad command
// line exits 2. main only wires the process (signals, the environment, the
// exit status) to run, which holds the whole program; every subcommand lives
// in its own file.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentpen/agentpen/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	if msg := cli.Message("workbench", err); msg != "" {
		fmt.Fprintln(os.Stderr, msg)
	}
	os.Exit(cli.ExitCode(err))
}
