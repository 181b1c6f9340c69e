package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/internal/cli"
)

// TestHelpEverySubcommand: --help prints the command's usage on stdout,
// nothing on stderr, and exits 0.
func TestHelpEverySubcommand(t *testing.T) {
	for _, cmd := range []string{"serve", "grader", "probe", "tasks", "client", "version"} {
		t.Run(cmd, func(t *testing.T) {
			var out, errb bytes.Buffer
			err := run(t.Context(), []string{cmd, "--help"}, &out, &errb, os.Getenv)
			if cli.ExitCode(err) != 0 || cli.Message(prog, err) != "" {
				t.Fatalf("--help: %v", err)
			}
			if !strings.HasPrefix(out.String(), "Usage: workbench "+cmd) || errb.Len() != 0 {
				t.Fatalf("stdout %q stderr %q", out.String(), errb.String())
			}
		})
	}
}

// TestFlagsAfterPositionals: flags are accepted after arguments.
func TestFlagsAfterPositionals(t *testing.T) {
	var out, errb bytes.Buffer
	if err := run(t.Context(), []string{"tasks", "show", "data/csv_region_total@3", "--json"}, &out, &errb, os.Getenv); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(strings.TrimSpace(out.String()), "{") {
		t.Fatalf("--json after the id was not applied: %q", out.String())
	}
}

// TestHelpDefaultsOnce: no flag's default is printed twice in any
// --help, and grader's --key-env explains its default.
func TestHelpDefaultsOnce(t *testing.T) {
	for _, cmd := range []string{"serve", "grader", "probe", "tasks", "client", "version"} {
		var out, errb bytes.Buffer
		run(t.Context(), []string{cmd, "--help"}, &out, &errb, os.Getenv)
		for _, line := range strings.Split(out.String(), "\n") {
			l := strings.ToLower(line)
			if n := strings.Count(l, "(default") + strings.Count(l, "default:"); n > 1 {
				t.Errorf("%s --help: a default printed %d times: %q", cmd, n, line)
			}
		}
		if cmd == "grader" && !strings.Contains(out.String(), "$AGENTPEN_API_KEY_ENV") {
			t.Fatalf("--key-env's default is not explained:\n%s", out.String())
		}
	}
}

// TestUsageErrors: a bad command line prints exactly this: the command,
// what is wrong (once), how to get help; exit 2, nothing on stdout.
func TestUsageErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown_command", []string{"frob"}, `workbench: unknown command "frob" (run "workbench help" for usage)`},
		{"serve_bogus_flag", []string{"serve", "--bogus"}, `workbench serve: flag provided but not defined: -bogus (run "workbench serve --help" for usage)`},
		{"serve_extra", []string{"serve", "x"}, `workbench serve: unexpected argument "x" (run "workbench serve --help" for usage)`},
		{"serve_max_sessions", []string{"serve", "--max-sessions", "0"}, `workbench serve: --max-sessions 0: must be at least 1 (run "workbench serve --help" for usage)`},
		{"serve_sandbox", []string{"serve", "--sandbox", "none"}, `workbench serve: --sandbox "none": want namespaces or uid-only (run "workbench serve --help" for usage)`},
		{"grader_debug_listen", []string{"grader", "--debug-listen", "0.0.0.0:6060"}, `workbench grader: --debug-listen "0.0.0.0:6060": profiling is served on loopback only (127.0.0.1 or [::1]) (run "workbench grader --help" for usage)`},
		{"probe_missing", []string{"probe"}, `workbench probe: missing URL (or --batch JSON) (run "workbench probe --help" for usage)`},
		{"probe_bad_status", []string{"probe", "--expect-status", "x", "http://a"}, `workbench probe: invalid value "x" for flag -expect-status: want statuses 100..599, comma-separated (run "workbench probe --help" for usage)`},
		{"tasks_show_missing", []string{"tasks", "show"}, `workbench tasks: show takes exactly one task id (run "workbench tasks --help" for usage)`},
		{"tasks_unknown_verb", []string{"tasks", "list"}, `workbench tasks: unknown subcommand "list" (want show) (run "workbench tasks --help" for usage)`},
		{"version_extra", []string{"version", "x"}, `workbench version: unexpected argument "x" (run "workbench version --help" for usage)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			err := run(t.Context(), tt.args, &out, &errb, func(string) string { return "" })
			if got := errb.String() + cli.Message(prog, err); got != tt.want || cli.ExitCode(err) != 2 || out.Len() != 0 {
				t.Fatalf("exit %d, stdout %q, stderr\n%s\nwant\n%s", cli.ExitCode(err), out.String(), got, tt.want)
			}
		})
	}
	// Not a usage error: an unknown task is named once.
	err := run(t.Context(), []string{"tasks", "show", "nope/x"}, io.Discard, io.Discard, os.Getenv)
	if got, want := cli.Message(prog, err), `workbench tasks: task id "nope/x": unknown task (workbench tasks lists the catalogue)`; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
