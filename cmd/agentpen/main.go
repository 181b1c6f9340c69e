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
//	agentpen results [--json] CAMPAIGN_ID    its episode results
//	agentpen orphans [--json] [--remove ID]  labelled resources no journal accounts for
//	agentpen version [--json]                versions, and the daemon's when it answers
//	agentpen serve [flags]                   the launcher API and the episode proxy
//	agentpen reconcile [--json] [--dry-run]  roll back, finish or expire what the journals say
//	agentpen tasks [--json] [ID]             the task catalogue, or what an agent sees of a task
//	agentpen images [--json]                 the daemon's images a spec can name
//	agentpen help [CMD]                      this usage, or CMD's help
//
// Every command takes --help. Exit status: 0 success, 1 failure (a
// cleanup not verified), 2 bad input, 3 daemon unreachable, 4 conflict,
// 130/143 interrupted by SIGINT/SIGTERM (a second signal, a second or more
// after the first, exits at once;
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
	"time"

	"github.com/agentpen/agentpen/internal/cli"
	"golang.org/x/sys/unix"
)

func main() {
	os.Exit(runMain(os.Args[1:], os.Getenv))
}

// sameInterrupt is how soon after the first a signal is the same
// interruption delivered twice (timeout(1) signals both the process and
// its process group; a terminal's ^C reaches every process of the
// foreground group), not a person asking again.
const sameInterrupt = time.Second

// runMain is main's body: run, with SIGINT and SIGTERM cancelling it, the
// message printed once, and the exit status returned. A second signal, at
// least sameInterrupt after the first, exits at once. SIGPIPE is ignored:
// a reader of stdout or stderr that went away makes writes fail (up then
// removes a campaign whose ids it could not write) instead of killing the
// process in the middle of a bring-up or a removal.
func runMain(args []string, getenv func(string) string) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	signal.Ignore(syscall.SIGPIPE)
	var caught atomic.Int32
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := (<-sigs).(syscall.Signal)
		caught.Store(int32(s))
		cancel()
		first := time.Now()
		for sig := range sigs {
			if time.Since(first) < sameInterrupt {
				continue
			}
			s = sig.(syscall.Signal)
			fmt.Fprintf(os.Stderr, "agentpen: %v again: exiting now; the journal names what exists (agentpen down removes it)\n", s)
			os.Exit(128 + int(s))
		}
	}()
	defer signal.Stop(sigs)
	err := run(ctx, args, os.Stdout, os.Stderr, getenv)
	if msg := cli.Message("agentpen", err); msg != "" {
		fmt.Fprintln(os.Stderr, msg)
	}
	sig := syscall.Signal(caught.Load())
	code := exitStatus(err, sig)
	if sig != 0 && code == 128+int(sig) {
		// The errors above say "context canceled"; this says why.
		fmt.Fprintf(os.Stderr, "agentpen: interrupted by %s (exit %d)\n", unix.SignalName(sig), code)
	}
	return code
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
