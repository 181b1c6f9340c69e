// Command agentpen runs AI-agent benchmark campaigns in a rootless Docker
// daemon and proves what it created and removed.
//
// Usage:
//
//	agentpen doctor [--json] [--allow-custom-socket]
//	agentpen up [flags] SPEC.json|-
//	agentpen down [flags] CAMPAIGN_ID
//	agentpen help
//
// Every command takes --help. main only wires the process (signals, the
// environment, the exit status) to run, which holds the whole program;
// each command lives in its own file.
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	if msg := cli.Message("agentpen", err); msg != "" {
		fmt.Fprintln(os.Stderr, msg)
	}
	os.Exit(cli.ExitCode(err))
}
