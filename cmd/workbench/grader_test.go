package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/internal/cli"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/internal/testkit/workbenchtest"
	"github.com/agentpen/agentpen/workbench/client"
	"github.com/agentpen/agentpen/workbench/grader"
)

// TestGraderCommandNeedsKey: without a usable key (unset, a placeholder,
// short) `workbench grader` refuses to start with the exact message the
// user sees, naming the variable and how to make a key; a bad --key-env is
// a usage error.
func TestGraderCommandNeedsKey(t *testing.T) {
	t.Setenv("AGENTPEN_API_KEY_ENV", "")
	t.Setenv("WB_EMPTY_KEY", "")
	t.Setenv("WB_SHORT_KEY", "e2e-grader-key-5f1a7c")
	t.Setenv("WB_PLACEHOLDER_KEY", "changeme")
	const fix = "; make one: export %s=$(openssl rand -hex 32)"
	for _, tt := range []struct {
		name, want string
		args       []string
		usage      bool
	}{
		{name: "default_unset", args: []string{"--listen", "127.0.0.1:0"},
			want: "workbench grader: AGENTPEN_API_KEY is unset or empty" + fmt.Sprintf(fix, "AGENTPEN_API_KEY") + " (or pass --insecure-no-key for local tests)"},
		{name: "named_empty", args: []string{"--listen", "127.0.0.1:0", "--key-env", "WB_EMPTY_KEY"},
			want: "workbench grader: WB_EMPTY_KEY is unset or empty" + fmt.Sprintf(fix, "WB_EMPTY_KEY") + " (or pass --insecure-no-key for local tests)"},
		{name: "short", args: []string{"--listen", "127.0.0.1:0", "--key-env", "WB_SHORT_KEY"},
			want: "workbench grader: WB_SHORT_KEY holds a key shorter than 24 characters" + fmt.Sprintf(fix, "WB_SHORT_KEY")},
		{name: "short_insecure", args: []string{"--listen", "127.0.0.1:0", "--key-env", "WB_SHORT_KEY", "--insecure-no-key"},
			want: "workbench grader: WB_SHORT_KEY holds a key shorter than 24 characters" + fmt.Sprintf(fix, "WB_SHORT_KEY")},
		{name: "placeholder", args: []string{"--listen", "127.0.0.1:0", "--key-env", "WB_PLACEHOLDER_KEY"},
			want: "workbench grader: WB_PLACEHOLDER_KEY holds a placeholder or a publicly documented example key (fingerprint 057ba03d6c441048), not a real key" + fmt.Sprintf(fix, "WB_PLACEHOLDER_KEY")},
		{name: "bad_name", args: []string{"--key-env", "not a name"}, usage: true,
			want: `workbench grader: --key-env "not a name": must name an environment variable (run "workbench grader --help" for usage)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			os.Unsetenv("AGENTPEN_API_KEY")
			var stdout, stderr bytes.Buffer
			err := run(t.Context(), append([]string{"grader"}, tt.args...), &stdout, &stderr, os.Getenv)
			if got := cli.Message(prog, err); got != tt.want || isUsage(err) != tt.usage {
				t.Fatalf("message\n%s\nwant\n%s\n(usage %v, want %v)", got, tt.want, isUsage(err), tt.usage)
			}
		})
	}
}

func isUsage(err error) bool { return cli.ExitCode(err) == 2 }

// TestServeWithRemoteGrader: a live `workbench grader` (key from a named
// variable) and a live `workbench serve --grader` run from a copy of the
// binary installed mode 0700, as the Dockerfile should install it in
// remote mode. Oracle episodes of a code task and a non-code task earn
// 1.0 through the grader; agent code can read neither the binary (so not
// the catalogue generator in it) nor the server's environment (so not
// the key); `workbench probe` with --header-env reaches the grader's
// protected route; neither log holds the key.
func TestServeWithRemoteGrader(t *testing.T) {
	testenv.RequireRoot(t)
	const key = "e2e-grader-key-5f1a7c0d9e3b"
	dir, err := os.MkdirTemp("", "wb-0700")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	src, err := os.ReadFile(binary(t))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "workbench")
	if err := os.WriteFile(bin, src, 0o700); err != nil {
		t.Fatal(err)
	}
	home, err := os.MkdirTemp("", "wb-homes")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(home, 0o755)
	t.Cleanup(func() { os.RemoveAll(home) })

	g := workbenchtest.Start(t, bin, []string{"WB_E2E_KEY=" + key}, "grader", "--listen", "127.0.0.1:0", "--key-env", "WB_E2E_KEY", "--log-format", "json")
	s := workbenchtest.Start(t, bin, []string{"WB_E2E_KEY=" + key}, "serve", "--listen", "127.0.0.1:0", "--log-format", "json",
		"--home-dir", home, "--grader", "http://"+g.Addr, "--grader-key-env", "WB_E2E_KEY")

	ctx := testenv.Context(t)
	for _, id := range []string{"software/median", "logs/error_count"} {
		w := workbenchtest.Dial(t, ctx, "http://"+s.Addr)
		if err := playIsolated(ctx, w, id, strings.ReplaceAll(id, "/", "_")); err != nil {
			t.Fatal(err)
		}
	}
	// What the agent's code can reach of the binary and the server.
	w := workbenchtest.Dial(t, ctx, "http://"+s.Addr)
	if _, err := w.Reset(ctx, client.ResetOptions{TaskID: "software/median"}); err != nil {
		t.Fatal(err)
	}
	code := "import os\nfor p in [" + strconv.Quote(bin) + ", '/proc/" + strconv.Itoa(s.Cmd.Process.Pid) + "/environ']:\n" +
		"    try:\n        open(p, 'rb').read(16)\n        print('READ', p)\n    except OSError as e:\n        print('DENIED', type(e).__name__)\n"
	r, err := w.Step(ctx, "run_python", workbenchtest.Args(map[string]any{"code": code}))
	if err != nil {
		t.Fatal(err)
	}
	// PermissionError, or (in namespaces, for the binary in the server's
	// /tmp) FileNotFoundError: the episode has a /tmp of its own.
	if strings.Count(r.Observation.Output, "DENIED ") != 2 || strings.Contains(r.Observation.Output, "READ") {
		t.Errorf("agent code reached the binary or the server's environment:\n%s", r.Observation.Output)
	}

	var stdout, stderr bytes.Buffer
	t.Setenv("WB_E2E_PROBE_KEY", key)
	err = run(ctx, []string{"probe", "--method", "POST", "--header-env", grader.KeyHeader + "=WB_E2E_PROBE_KEY",
		"--expect-status", "400", "http://" + g.Addr + grader.RouteCases}, &stdout, &stderr, os.Getenv)
	// With the key, the empty body gets past the key check and is refused
	// as not JSON (400); without it, it would be 401.
	if err != nil || !strings.Contains(stdout.String(), `"status":400`) {
		t.Errorf("probe of the protected route with the key: %v %s %s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(g.Logs.String(), `"route":"/v1/judge","status":200`) || !strings.Contains(g.Logs.String(), `"route":"/v1/score","status":200`) {
		t.Errorf("the grader graded nothing:\n%s", g.Logs.String())
	}
	for name, logs := range map[string]string{"grader": g.Logs.String(), "serve": s.Logs.String()} {
		if strings.Contains(logs, key) {
			t.Errorf("the %s log holds the key", name)
		}
	}
}

// TestServeGraderFlags: --grader without its key variable, or with a bad
// URL or timeout, stops serve before it listens.
func TestServeGraderFlags(t *testing.T) {
	t.Setenv("WB_SERVE_KEY", "k")
	os.Unsetenv("WB_SERVE_UNSET")
	for _, tt := range []struct {
		name, want string
		args       []string
	}{
		{name: "key_unset", args: []string{"--grader", "http://127.0.0.1:9", "--grader-key-env", "WB_SERVE_UNSET"}, want: "WB_SERVE_UNSET is unset or empty"},
		{name: "bad_url", args: []string{"--grader", "ftp://x", "--grader-key-env", "WB_SERVE_KEY"}, want: "scheme must be http, https or unix"},
		{name: "bad_key_env", args: []string{"--grader", "http://x", "--grader-key-env", "1x"}, want: "must name an environment variable"},
		{name: "bad_timeout", args: []string{"--grader", "http://x", "--grader-timeout", "0s"}, want: "must be positive"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(t.Context(), append([]string{"serve", "--listen", "127.0.0.1:0"}, tt.args...), &stdout, &stderr, os.Getenv)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

// errUsage marks a want of exit status 2 in the tables (see matchesWant).
var errUsage = errors.New("usage error (exit 2)")

// matchesWant reports whether err is what a table wanted: nil, errUsage
// (any error with exit status 2), or an error errors.Is finds.
func matchesWant(err, want error) bool {
	switch {
	case want == nil:
		return err == nil
	case want == errUsage:
		return cli.ExitCode(err) == 2
	}
	return errors.Is(err, want)
}
