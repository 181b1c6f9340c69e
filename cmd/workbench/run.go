package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
)

// errUsage marks a command line that names no known subcommand or carries
// bad flags; main exits 2 for it.
var errUsage = errors.New("usage")

const usage = `workbench: the agentpen workbench, an OpenEnv-compatible episode server.

Usage:
  workbench serve [flags]        serve episodes over HTTP and WebSocket
  workbench grader [flags]       serve the answer keys to episode servers (serve --grader URL)
  workbench probe URL [flags]    make one HTTP request and print a JSON result (exit 0 when expected)
  workbench tasks [--json]       list the task catalogue
  workbench tasks show ID        show a task's instruction and files (never its answer)

Run "workbench COMMAND --help" for a command's flags.
`

// run dispatches a subcommand. Help goes to stdout and returns
// flag.ErrHelp.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("%w: a command is required", errUsage)
	}
	switch args[0] {
	case "serve":
		return runServe(ctx, args[1:], stdout, stderr)
	case "tasks":
		return runTasks(ctx, args[1:], stdout, stderr)
	case "grader":
		return runGrader(ctx, args[1:], stdout, stderr)
	case "probe":
		return runProbe(ctx, args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return flag.ErrHelp
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("%w: unknown command %q", errUsage, args[0])
}

// parseFlags parses a subcommand's flags; --help prints its usage to
// stdout, a bad flag prints it to stderr.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer, synopsis string) error {
	fs.SetOutput(io.Discard)
	printUsage := func(w io.Writer) {
		fmt.Fprint(w, synopsis)
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(stdout)
			return flag.ErrHelp
		}
		fmt.Fprintln(stderr, err)
		printUsage(stderr)
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return nil
}
