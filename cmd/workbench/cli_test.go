package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/internal/cli"
)

// TestHelpEverySubcommand: --help prints the command's usage on stdout,
// nothing on stderr, and exits 0.
func TestHelpEverySubcommand(t *testing.T) {
	for _, cmd := range []string{"serve", "grader", "probe", "tasks"} {
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

// TestGraderHelpDefaultOnce: each flag's default is printed once.
func TestGraderHelpDefaultOnce(t *testing.T) {
	var out, errb bytes.Buffer
	run(t.Context(), []string{"grader", "--help"}, &out, &errb, os.Getenv)
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Count(line, "(default") > 1 {
			t.Errorf("a default printed twice: %q", line)
		}
	}
	if !strings.Contains(out.String(), "$AGENTPEN_API_KEY_ENV") {
		t.Fatalf("--key-env's default is not explained:\n%s", out.String())
	}
}
