package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/agentpen/agentpen/internal/cli"
	"github.com/agentpen/agentpen/internal/logbuf"
	"github.com/agentpen/agentpen/internal/testenv"
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

// proc is a running workbench subcommand whose JSON log is collected.
type proc struct {
	cmd    *exec.Cmd
	addr   string // from its "listening" log line
	logs   *logbuf.Buffer
	exited chan error
}

// startProc runs bin with args and env added to this process's
// environment, and waits for its "listening" log line (tcp).
func startProc(t *testing.T, bin string, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	p := &proc{cmd: cmd, logs: &logbuf.Buffer{}, exited: make(chan error, 1)}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- cmd.Wait(); pw.Close() }()
	addr := make(chan string, 1)
	var copying sync.WaitGroup
	copying.Go(func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			p.logs.Write([]byte(sc.Text() + "\n"))
			var rec struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "listening" && strings.HasPrefix(rec.Addr, "tcp://") {
				select {
				case addr <- strings.TrimPrefix(rec.Addr, "tcp://"):
				default:
				}
			}
		}
		io.Copy(io.Discard, pr)
	})
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Signal(os.Interrupt)
		}
		wait, cancel := testenv.CleanupContext(t)
		defer cancel()
		select {
		case err := <-p.exited:
			if err != nil {
				t.Errorf("%s exited: %v", args[0], err)
			}
		case <-wait.Done():
			cmd.Process.Kill()
			t.Errorf("%s did not exit after SIGINT", args[0])
		}
		copying.Wait()
		if t.Failed() {
			t.Logf("%s log:\n%s", args[0], p.logs.String())
		}
	})
	select {
	case a := <-addr:
		p.addr = a
	case err := <-p.exited:
		p.exited <- err
		t.Fatalf("%s exited at start: %v\n%s", args[0], err, p.logs.String())
	case <-testenv.Context(t).Done():
		t.Fatalf("%s did not report its address\n%s", args[0], p.logs.String())
	}
	return p
}

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

	g := startProc(t, bin, []string{"WB_E2E_KEY=" + key}, "grader", "--listen", "127.0.0.1:0", "--key-env", "WB_E2E_KEY", "--log-format", "json")
	s := startProc(t, bin, []string{"WB_E2E_KEY=" + key}, "serve", "--listen", "127.0.0.1:0", "--log-format", "json",
		"--home-dir", home, "--grader", "http://"+g.addr, "--grader-key-env", "WB_E2E_KEY")

	ctx := testenv.Context(t)
	for _, task := range []struct{ id, kind string }{{"software/median", "code"}, {"logs/error_count", "number"}} {
		w := dial(t, ctx, "http://"+s.addr)
		final, err := playOracle(ctx, w, task.id, task.kind, strings.ReplaceAll(task.id, "/", "_"))
		if err != nil {
			t.Fatalf("%s: %v", task.id, err)
		}
		if !final.Done || final.Reward != 1.0 {
			t.Errorf("%s: final %+v, want done with reward 1.0", task.id, final)
		}
	}
	// What the agent's code can reach of the binary and the server.
	w := dial(t, ctx, "http://"+s.addr)
	if _, err := w.reset(ctx, map[string]any{"task_id": "software/median"}); err != nil {
		t.Fatal(err)
	}
	code := "import os\nfor p in [" + strconv.Quote(bin) + ", '/proc/" + strconv.Itoa(s.cmd.Process.Pid) + "/environ']:\n" +
		"    try:\n        open(p, 'rb').read(16)\n        print('READ', p)\n    except OSError as e:\n        print('DENIED', type(e).__name__)\n"
	r, err := w.step(ctx, "run_python", map[string]any{"code": code})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(r.Observation.Output, "DENIED PermissionError") != 2 || strings.Contains(r.Observation.Output, "READ") {
		t.Errorf("agent code reached the binary or the server's environment:\n%s", r.Observation.Output)
	}

	var stdout, stderr bytes.Buffer
	t.Setenv("WB_E2E_PROBE_KEY", key)
	err = run(ctx, []string{"probe", "--method", "POST", "--header-env", grader.KeyHeader + "=WB_E2E_PROBE_KEY",
		"--expect-status", "400", "http://" + g.addr + grader.RouteCases}, &stdout, &stderr, os.Getenv)
	// With the key, the empty body gets past the key check and is refused
	// as not JSON (400); without it, it would be 401.
	if err != nil || !strings.Contains(stdout.String(), `"status":400`) {
		t.Errorf("probe of the protected route with the key: %v %s %s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(g.logs.String(), `"route":"/v1/judge","status":200`) || !strings.Contains(g.logs.String(), `"route":"/v1/score","status":200`) {
		t.Errorf("the grader graded nothing:\n%s", g.logs.String())
	}
	for name, logs := range map[string]string{"grader": g.logs.String(), "serve": s.logs.String()} {
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
