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
	for _, cmd := range []string{"doctor", "up", "down", "attest", "serve", "spec check", "spec schema"} {
		t.Run(cmd, func(t *testing.T) {
			var out, errb bytes.Buffer
			err := run(t.Context(), append(strings.Fields(cmd), "--help"), &out, &errb, os.Getenv)
			if cli.ExitCode(err) != 0 || cli.Message("agentpen", err) != "" {
				t.Fatalf("--help: %v", err)
			}
			if !strings.HasPrefix(out.String(), "Usage: agentpen "+cmd) || errb.Len() != 0 {
				t.Fatalf("stdout %q stderr %q", out.String(), errb.String())
			}
		})
	}
}

// TestUsageErrorOnce: a bad flag is named once, with the way to get help,
// and exits 2.
func TestUsageErrorOnce(t *testing.T) {
	var out, errb bytes.Buffer
	err := run(t.Context(), []string{"down", "some-id", "--bogus"}, &out, &errb, os.Getenv)
	msg := cli.Message("agentpen", err) + errb.String()
	if cli.ExitCode(err) != 2 || strings.Count(msg, "bogus") != 1 || !strings.Contains(msg, "agentpen down --help") {
		t.Fatalf("exit %d, message %q", cli.ExitCode(err), msg)
	}
}

func TestVersion(t *testing.T) {
	var out, errb bytes.Buffer
	env := map[string]string{"DOCKER_HOST": ""}
	if err := run(t.Context(), []string{"version", "--json"}, &out, &errb, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"go_version": "go1.`, `"docker_sdk": "v28.`, `"daemon_error": "DOCKER_HOST must be explicitly set`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("version lacks %s:\n%s", want, out.String())
		}
	}
}

// TestAttestUsage: attest needs one campaign id and a sane probe timeout;
// a bad command line exits 2 before any daemon is asked.
func TestAttestUsage(t *testing.T) {
	env := map[string]string{"DOCKER_HOST": "unix:///run/user/1/docker.sock", "HOME": t.TempDir()}
	getenv := func(k string) string { return env[k] }
	for _, args := range [][]string{
		{"attest"},
		{"attest", "a", "b"},
		{"attest", "c", "--probe-timeout-ms", "5"},
		{"attest", "c", "--bogus"},
		{"up", "spec.json", "--probe-timeout-ms", "99999"},
	} {
		var out, errb bytes.Buffer
		if err := run(t.Context(), args, &out, &errb, getenv); cli.ExitCode(err) != 2 || out.Len() != 0 {
			t.Errorf("%q: exit %d (%v), stdout %q", args, cli.ExitCode(err), err, out.String())
		}
	}
}
