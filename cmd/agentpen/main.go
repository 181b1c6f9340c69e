// Command agentpen runs AI-agent benchmark campaigns in a rootless Docker
// daemon and proves what it created and removed.
//
// Usage:
//
//	agentpen doctor [--json]                 check the daemon and the set-up
//	agentpen up [flags] SPEC.json|-          bring a campaign up
//	agentpen down [flags] CAMPAIGN_ID        remove it by exact id and verify (cleanup report)
//	agentpen cleanup verify CAMPAIGN_ID      verify, read-only, that nothing of it remains
//	agentpen ls [--json]                     the campaigns in the state root
//	agentpen orphans [--json] [--remove ID]  labelled resources no journal accounts for
//	agentpen version [--json]                versions, and the daemon's when it answers
//	agentpen serve [flags]                   the launcher API and the episode proxy
//	agentpen help
//
// Every command takes --help. Exit status: 0 success, 1 failure (a
// cleanup not verified), 2 bad input, 3 daemon unreachable, 4 conflict,
// 130/143 interrupted by SIGINT/SIGTERM (a second signal exits at once;
// the journal names everything, and agentpen down removes it). main only
// wires the process (signals, the environment, the exit status) to run,
// which holds the whole program; each command lives in its own file.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	"github.com/agentpen/agentpen/internal/cli"
)

func main() {
	os.Exit(runMain(os.Args[1:], os.Getenv))
}

// runMain is main's body: run, with SIGINT and SIGTERM cancelling it, the
// message printed once, and the exit status returned.
func runMain(args []string, getenv func(string) string) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var caught atomic.Int32
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := (<-sigs).(syscall.Signal)
		caught.Store(int32(s))
		cancel()
		s = (<-sigs).(syscall.Signal)
		fmt.Fprintf(os.Stderr, "agentpen: %v again: exiting now; the journal names what exists (agentpen down removes it)\n", s)
		os.Exit(128 + int(s))
	}()
	defer signal.Stop(sigs)
	err := run(ctx, args, os.Stdout, os.Stderr, getenv)
	if msg := cli.Message("agentpen", err); msg != "" {
		fmt.Fprintln(os.Stderr, msg)
	}
	return exitStatus(err, syscall.Signal(caught.Load()))
}

// exitStatus is the process's exit status for what run returned after
// the signal sig (0 for none) was caught: 128+sig for a command the
// signal interrupted, else the error's own class; an error of what serve
// does after the signal that is its normal stop keeps its own class.
func exitStatus(err error, sig syscall.Signal) int {
	var se *stoppedError
	if sig != 0 && err != nil && !errors.As(err, &se) {
		return 128 + int(sig)
	}
	return exitCode(err)
}
