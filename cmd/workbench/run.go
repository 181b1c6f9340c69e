package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"

	"github.com/agentpen/agentpen/internal/cli"
	"github.com/agentpen/agentpen/internal/envname"
	"github.com/agentpen/agentpen/workbench/server"
)

const prog = "workbench"

const usage = `workbench: the agentpen workbench, an OpenEnv-compatible episode server.

Usage:
  workbench serve [flags]           serve episodes over HTTP and WebSocket
  workbench grader [flags]          serve the answer keys to episode servers (serve --grader URL)
  workbench client [flags] TARGET   play episodes by hand on a server (URL or unix socket)
  workbench probe [flags] URL       make one HTTP request and print a JSON result (exit 0 when expected)
  workbench probe --batch JSON      run a batch of http, tcp, socket and process probes at once
  workbench probe --batches         run the batches stdin holds, one a line, each answered as it comes
  workbench tasks [--json]          list the task catalogue
  workbench tasks show [--json] ID  show a task's instruction and files (never its answer)
  workbench version [--json]        show the version, commit and Go version
  workbench help                    show this text

Run "workbench COMMAND --help" for a command's flags.
`

// run is the whole program: it dispatches a subcommand. It reads the
// environment only through getenv.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return cli.Usagef("a command is required")
	}
	var err error
	name := args[0]
	switch name {
	case "serve":
		err = runServe(ctx, args[1:], stdout, stderr, getenv)
	case "tasks":
		err = runTasks(ctx, args[1:], stdout)
	case "grader":
		err = runGrader(ctx, args[1:], stdout, stderr, getenv)
	case "probe":
		err = runProbe(ctx, args[1:], os.Stdin, stdout, getenv)
	case "client":
		err = runClient(ctx, args[1:], os.Stdin, stdout, stderr)
	case "version", "--version":
		name = "version"
		err = runVersion(args[1:], stdout)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		return &cli.UsageError{Msg: fmt.Sprintf("unknown command %q", args[0]), Hint: "workbench help"}
	}
	// Every error is printed after the command's name, once.
	return cli.InCommand(prog+" "+name, err)
}

// listFlag is a repeatable string flag.
// unixPaths are the paths of the unix sockets among the addresses.
func unixPaths(addrs []string) []string {
	var out []string
	for _, a := range addrs {
		if p, ok := strings.CutPrefix(a, "unix://"); ok {
			out = append(out, p)
		}
	}
	return out
}

// isEnvName reports whether s can name an environment variable.
func isEnvName(s string) bool { return envname.Valid(s) }

// newLogger builds the slog logger --log-format and --log-level ask for.
func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, cli.Usagef("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, cli.Usagef("--log-format %q: want text or json", format)
}

// listenAll opens a listener on every address; on error it closes those
// already open.
func listenAll(ctx context.Context, addrs []string) ([]net.Listener, error) {
	var lns []net.Listener
	for _, addr := range addrs {
		ln, err := server.Listen(ctx, addr)
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return nil, err
		}
		lns = append(lns, ln)
	}
	return lns, nil
}
