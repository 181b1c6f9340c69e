package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/internal/cli"
	"github.com/agentpen/agentpen/internal/testkit/dockerfake"
)

// TestHelpEverySubcommand: --help prints the command's usage on stdout,
// nothing on stderr, and exits 0.
func TestHelpEverySubcommand(t *testing.T) {
	for _, cmd := range []string{"doctor", "up", "down", "attest", "serve", "spec check", "spec schema", "verify", "key", "diff", "checks", "report schema"} {
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

// TestUsageErrorOnce: a bad command line prints exactly this on stderr:
// the command, what is wrong (once), how to get help; exit 2, nothing on
// stdout.
func TestUsageErrorOnce(t *testing.T) {
	env := map[string]string{"DOCKER_HOST": "unix:///run/user/1/docker.sock", "HOME": t.TempDir()}
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown_command", []string{"frobnicate"}, `agentpen: unknown command "frobnicate" (run "agentpen help" for usage)`},
		{"up_missing", []string{"up"}, `agentpen up: missing SPEC.json|- (run "agentpen up --help" for usage)`},
		{"up_extra", []string{"up", "a", "b"}, `agentpen up: unexpected argument "b" (run "agentpen up --help" for usage)`},
		{"down_bogus_flag", []string{"down", "some-id", "--bogus"}, `agentpen down: flag provided but not defined: -bogus (run "agentpen down --help" for usage)`},
		{"down_bad_id", []string{"down", "Bad ID"}, `agentpen down: campaign_id "Bad ID": holds whitespace or a control character`},
		{"cleanup_no_verb", []string{"cleanup"}, `agentpen cleanup: missing subcommand: verify (run "agentpen cleanup verify --help" for usage)`},
		{"cleanup_verify_missing", []string{"cleanup", "verify"}, `agentpen cleanup verify: missing CAMPAIGN_ID (run "agentpen cleanup verify --help" for usage)`},
		{"orphans_id_without_remove", []string{"orphans", "x"}, `agentpen orphans: unexpected argument "x" (ids are taken only with --remove) (run "agentpen orphans --help" for usage)`},
		{"attest_probe_timeout", []string{"attest", "c", "--probe-timeout-ms", "5"}, `agentpen attest: --probe-timeout-ms 5: want 100..30000 (run "agentpen attest --help" for usage)`},
		{"ls_log_format", []string{"ls", "--log-format", "xml"}, `agentpen ls: --log-format "xml": want text or json (run "agentpen ls --help" for usage)`},
		{"version_extra", []string{"version", "extra"}, `agentpen version: unexpected argument "extra" (run "agentpen version --help" for usage)`},
		{"duration_flag", []string{"up", "s.json", "--ready-timeout", "soon"}, `agentpen up: invalid value "soon" for flag -ready-timeout: parse error (run "agentpen up --help" for usage)`},
		{"up_missing_spec", []string{"up", "/nonexistent.json"}, `agentpen up: spec /nonexistent.json: no such file or directory`},
		{"up_spec_is_a_directory", []string{"up", "/"}, `agentpen up: spec /: is a directory, not a spec file`},
		{"spec_check_directory", []string{"spec", "check", "/"}, `agentpen spec check: spec /: is a directory, not a spec file`},
		{"diff_missing", []string{"diff", "a"}, `agentpen diff: missing A B (run "agentpen diff --help" for usage)`},
		{"diff_not_a_report", []string{"diff", "/nonexistent/x.json", "b"}, `agentpen diff: /nonexistent/x.json: not a report (<kind>-<generation>-<n>.json) or its envelope (.dsse.json)`},
		{"help_unknown_command", []string{"help", "frobnicate"}, `agentpen help: unknown command "frobnicate" (run "agentpen help" for usage)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			err := run(t.Context(), tt.args, &out, &errb, func(k string) string { return env[k] })
			if got := errb.String() + cli.Message("agentpen", err); got != tt.want || exitCode(err) != 2 || out.Len() != 0 {
				t.Fatalf("exit %d, stdout %q, stderr\n%s\nwant\n%s", exitCode(err), out.String(), got, tt.want)
			}
		})
	}
}

// TestHelpDefaultsOnce: no flag's default is printed twice in any --help.
func TestHelpDefaultsOnce(t *testing.T) {
	for _, cmd := range [][]string{{"doctor"}, {"up"}, {"down"}, {"attest"}, {"cleanup", "verify"}, {"ls"}, {"orphans"}, {"version"}, {"verify"}, {"key"}, {"diff"}, {"checks"}, {"results"}} {
		var out, errb bytes.Buffer
		if err := run(t.Context(), append(cmd, "--help"), &out, &errb, os.Getenv); err != nil && cli.ExitCode(err) != 0 {
			t.Fatalf("%v --help: %v", cmd, err)
		}
		checkDefaultsOnce(t, strings.Join(cmd, " "), out.String())
	}
}

// checkDefaultsOnce fails when a flag's usage says its default twice
// ("(default X)" and "default: X", or two "(default ...)").
func checkDefaultsOnce(t *testing.T, cmd, help string) {
	t.Helper()
	for _, line := range strings.Split(help, "\n") {
		l := strings.ToLower(line)
		if n := strings.Count(l, "(default") + strings.Count(l, "default:"); n > 1 {
			t.Errorf("%s --help says a default %d times: %q", cmd, n, line)
		}
	}
}

// TestVersion: the exact text and JSON of agentpen version with a daemon
// that answers and without one (exit 0 both ways).
func TestVersion(t *testing.T) {
	v := cli.ReadVersion()
	if !strings.HasPrefix(v.DockerSDK, "v28.") {
		t.Fatalf("docker sdk %q: the build info does not name github.com/docker/docker", v.DockerSDK)
	}
	head := fmt.Sprintf("agentpen    %s\ncommit      %s\ngo          %s\ndocker sdk  %s\n", v.Version, v.Commit, v.GoVersion, v.DockerSDK)
	fake := serveFakeDaemon(t, []string{"name=seccomp,profile=default", "name=rootless"})
	const fix = `; start or find the rootless daemon: eval "$(scripts/rootless-docker.sh)"`
	for _, tt := range []struct {
		name, host, text string
		json             map[string]string
	}{
		{"daemon", fake, head + "daemon      20.10.24+dfsg1, API " + dockerfake.APIVersion + "\n",
			map[string]string{"daemon_version": "20.10.24+dfsg1", "daemon_api": dockerfake.APIVersion}},
		{"unset", "", head + "daemon      not reached: DOCKER_HOST is not set (agentpen uses no default daemon)" + fix + "\n",
			map[string]string{"daemon_error": "DOCKER_HOST is not set (agentpen uses no default daemon)" + fix}},
		{"down", "unix:///run/user/1/nothing/rootless/docker.sock", head + "daemon      not reached: docker daemon unreachable at unix:///run/user/1/nothing/rootless/docker.sock: no such file or directory" + fix + "\n",
			map[string]string{"daemon_error": "docker daemon unreachable at unix:///run/user/1/nothing/rootless/docker.sock: no such file or directory" + fix}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"DOCKER_HOST": tt.host}
			getenv := func(k string) string { return env[k] }
			var out, errb bytes.Buffer
			if err := run(t.Context(), []string{"version"}, &out, &errb, getenv); err != nil || out.String() != tt.text || errb.Len() != 0 {
				t.Fatalf("version: %v, stderr %q, stdout\n%s\nwant\n%s", err, errb.String(), out.String(), tt.text)
			}
			out.Reset()
			if err := run(t.Context(), []string{"version", "--json"}, &out, &errb, getenv); err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(out.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"version": v.Version, "commit": v.Commit, "go_version": v.GoVersion, "docker_sdk": v.DockerSDK}
			for k, val := range tt.json {
				want[k] = val
			}
			for k, val := range want {
				if got[k] != val {
					t.Errorf("%s = %v, want %q", k, got[k], val)
				}
			}
			if len(got) != len(want) {
				t.Errorf("JSON %v has other keys than %v", got, want)
			}
		})
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

// TestHelpCommand: agentpen help CMD prints CMD's help, as CMD --help does
// (it printed the top-level text).
func TestHelpCommand(t *testing.T) {
	for _, cmd := range [][]string{{"up"}, {"down"}, {"cleanup", "verify"}, {"ls"}, {"orphans"}, {"attest"}, {"spec", "check"}, {"version"}} {
		t.Run(strings.Join(cmd, "_"), func(t *testing.T) {
			var want, got, errb bytes.Buffer
			run(t.Context(), append(slices.Clone(cmd), "--help"), &want, &errb, os.Getenv)
			err := run(t.Context(), append([]string{"help"}, cmd...), &got, &errb, os.Getenv)
			if cli.ExitCode(err) != 0 || got.String() != want.String() || !strings.HasPrefix(got.String(), "Usage: agentpen "+strings.Join(cmd, " ")) || errb.Len() != 0 {
				t.Fatalf("help %v: exit %d, stderr %q, stdout\n%s", cmd, cli.ExitCode(err), errb.String(), got.String())
			}
		})
	}
	var out bytes.Buffer
	if err := run(t.Context(), []string{"help"}, &out, io.Discard, os.Getenv); err != nil || out.String() != usage {
		t.Fatalf("help alone: %v\n%s", err, out.String())
	}
}
