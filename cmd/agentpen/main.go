// Command agentpen runs AI-agent benchmark campaigns in a rootless Docker
// daemon and proves what it created and removed.
//
// Usage:
//
//	agentpen doctor [--json] [--allow-custom-socket]
//
// Run "agentpen help" for the list of commands.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	if err != nil {
		if err != errSilent {
			fmt.Fprintf(os.Stderr, "agentpen: %v\n", err)
		}
		os.Exit(exitCode(err))
	}
}
