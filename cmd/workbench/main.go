// Command workbench is the agentpen workbench: an OpenEnv-compatible episode
// server (`workbench serve`), the task server that keeps answer keys out of
// the agents' containers (`workbench grader`), a one-request HTTP probe the
// adapter runs in containers by docker exec (`workbench probe`), and the
// task catalogue (`workbench tasks`).
//
// main only parses the command line and calls run; every subcommand lives in
// its own file.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		fmt.Fprintln(os.Stderr, "workbench:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "workbench:", err)
		os.Exit(1)
	}
}
