package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
)

// errSilent is returned when the command already reported the failure.
var errSilent = errors.New("failure already reported")

// usageError is a bad command line; it exits 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func exitCode(err error) int {
	var ue usageError
	if errors.As(err, &ue) || errors.Is(err, flag.ErrHelp) {
		return 2
	}
	return 1
}

const usage = `agentpen runs AI-agent benchmark campaigns in a rootless Docker daemon.

Usage:
  agentpen <command> [flags]

Commands:
  doctor    check DOCKER_HOST, the daemon (must be rootless), resource-limit
            enforcement and the local agentpen images
  up        bring a campaign up from a JSON spec and print its ids as JSON
  down      remove a campaign's resources by the ids its journal recorded
  help      show this text

DOCKER_HOST must name the rootless daemon's unix socket explicitly, for example
  eval "$(scripts/rootless-docker.sh)"
Run "agentpen <command> --help" for a command's flags.
`

// run is the whole program: it parses args and dispatches; main only wires
// the process to it.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usageError{"no command given"}
	}
	switch args[0] {
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	case "doctor":
		return doctor(ctx, args[1:], stdout, stderr, getenv)
	case "up":
		return up(ctx, args[1:], stdout, stderr, getenv)
	case "down":
		return down(ctx, args[1:], stdout, stderr, getenv)
	}
	fmt.Fprint(stderr, usage)
	return usageError{fmt.Sprintf("unknown command %q", args[0])}
}

// newFlagSet returns a FlagSet whose errors and help go to stderr.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: agentpen %s\n\n%s\n\nFlags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args, turning a parse error into a usageError.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	return nil
}
