package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/api"
	"github.com/agentpen/agentpen/internal/cli"
	"github.com/agentpen/agentpen/internal/testkit/dockerfake"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/internal/testkit/testlog"
)

// testAPIKey is a grader key the policy accepts.
const testAPIKey = "serve-test-api-key-0123456789abcdef"

// TestServeUsage: serve's command line is checked before any daemon is
// asked: help on stdout, a non-loopback address without TLS refused, the
// token never taken from argv, a token file others can read refused, the
// grader's key (what every create needs) unset, a placeholder or short
// refused naming its variable and how to make one.
func TestServeUsage(t *testing.T) {
	dir := t.TempDir()
	loose := filepath.Join(dir, "loose")
	os.WriteFile(loose, []byte("serve-test-token-5d0c8e1a47b93f26a1"), 0o644)
	// A token file another user owns (root can make one): not this
	// service's secret, though its mode is 0600; it was accepted.
	foreign := filepath.Join(dir, "foreign")
	os.WriteFile(foreign, []byte("serve-test-token-5d0c8e1a47b93f26a1"), 0o600)
	if os.Geteuid() == 0 {
		os.Chown(foreign, 65534, 65534)
	}
	// Token files refused naming the line and the name, never a token.
	const tokA, tokB = "serve-test-token-a-5d0c8e1a47b93f26a1", "serve-test-token-b-8f6e2d4c0a1b3e5f79"
	tokenFile := func(name, text string) string {
		f := filepath.Join(dir, name)
		os.WriteFile(f, []byte(text), 0o600)
		return f
	}
	badName := tokenFile("bad-name", "# launchers\noperator:"+tokA+"\nTeam B:"+tokB+"\n")
	dupToken := tokenFile("dup-token", "team-a:"+tokA+"\nteam-b:"+tokA+"\n")
	dupName := tokenFile("dup-name", "team-a:"+tokA+"\n\nteam-a:"+tokB+"\n")
	bareAmong := tokenFile("bare-among", "team-a:"+tokA+"\n"+tokB+"\n")
	env := map[string]string{"HOME": dir, "DOCKER_HOST": ""}
	getenv := func(k string) string { return env[k] }
	var out, errb bytes.Buffer
	if err := run(t.Context(), []string{"serve", "--help"}, &out, &errb, getenv); cli.ExitCode(err) != 0 || !strings.HasPrefix(out.String(), "Usage: agentpen serve") {
		t.Fatalf("--help: %v %q", err, out.String())
	}
	for _, tt := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"non_loopback", []string{"--listen", "0.0.0.0:0"}, nil, "not a loopback address"},
		{"non_loopback_name", []string{"--listen", "example.com:8700"}, nil, "not a loopback address"},
		{"tls_half", []string{"--tls-cert", "c.pem"}, nil, "go together"},
		{"token_in_argv", []string{"--token", "0123456789abcdef0123"}, nil, "flag provided but not defined: -token"},
		{"no_token", nil, nil, "no usable bearer token: $AGENTPEN_SERVE_TOKEN is unset"},
		{"short_token", nil, map[string]string{"AGENTPEN_SERVE_TOKEN": "short"}, "$AGENTPEN_SERVE_TOKEN holds a key shorter than 32 characters"},
		// Weak: a repeated character, or too few bits (32 digits).
		{"repeated_token", nil, map[string]string{"AGENTPEN_SERVE_TOKEN": strings.Repeat("a", 40)}, "holds a weak key: fewer than 10 distinct characters"},
		{"digits_token", nil, map[string]string{"AGENTPEN_SERVE_TOKEN": "01234567890123456789012345678901"}, "or fewer than 128 bits"},
		{"foreign_token_file", []string{"--token-file", foreign}, nil, "not by this user"},
		{"loose_token_file", []string{"--token-file", loose}, nil, "lets others read it"},
		{"token_file_bad_name", []string{"--token-file", badName}, nil, "--token-file " + badName + " line 3: the text before \":\" is not a launcher's name"},
		{"token_file_dup_token", []string{"--token-file", dupToken}, nil, "--token-file " + dupToken + " line 2 (\"team-b\"): its token is line 1's too"},
		{"token_file_dup_name", []string{"--token-file", dupName}, nil, "--token-file " + dupName + " line 3 (\"team-a\"): the name is on line 1 too"},
		{"token_file_bare_among_named", []string{"--token-file", bareAmong}, nil, "--token-file " + bareAmong + " line 2: a token without a name"},
		{"token_env_short", nil, map[string]string{"AGENTPEN_SERVE_TOKEN": "operator:" + tokA + "\nteam-b:short"},
			"$AGENTPEN_SERVE_TOKEN line 2 (\"team-b\"): its token is a key shorter than 32 characters"},
		{"positional", []string{"extra"}, nil, "unexpected argument"},
		{"debug_not_loopback", []string{"--debug-listen", "0.0.0.0:6060"}, nil, "profiling is served on loopback only"},
		{"unix_empty", []string{"--listen", "unix://"}, nil, "--listen unix://: the socket path must be absolute"},
		{"unix_relative", []string{"--listen", "unix://api.sock"}, nil, "--listen unix://api.sock: the socket path must be absolute"},
		{"missing_token_file", []string{"--token-file", filepath.Join(dir, "nope")}, nil, "--token-file " + filepath.Join(dir, "nope") + ": no such file"},
		{"bad_port", []string{"--listen", "127.0.0.1:99999"}, nil, "--listen \"127.0.0.1:99999\": want host:port"},
		{"tls_files_missing", []string{"--tls-cert", filepath.Join(dir, "c.pem"), "--tls-key", filepath.Join(dir, "k.pem")},
			map[string]string{"AGENTPEN_SERVE_TOKEN": "serve-test-token-5d0c8e1a47b93f26a1"}, "--tls-cert " + filepath.Join(dir, "c.pem") + ", --tls-key " + filepath.Join(dir, "k.pem") + ": open"},
		{"socket_dir_missing", []string{"--listen", "unix://" + filepath.Join(dir, "nodir", "api.sock")},
			map[string]string{"AGENTPEN_SERVE_TOKEN": "serve-test-token-5d0c8e1a47b93f26a1", "AGENTPEN_API_KEY": testAPIKey}, "--listen unix://" + filepath.Join(dir, "nodir", "api.sock") + ": no directory " + filepath.Join(dir, "nodir")},
		// What every create needs is checked at start: the grader's key.
		{"no_api_key", nil, map[string]string{"AGENTPEN_SERVE_TOKEN": "serve-test-token-5d0c8e1a47b93f26a1"},
			"the grader's API key: AGENTPEN_API_KEY is unset or empty; make one: export AGENTPEN_API_KEY=$(openssl rand -hex 32)"},
		{"placeholder_api_key", nil, map[string]string{"AGENTPEN_SERVE_TOKEN": "serve-test-token-5d0c8e1a47b93f26a1", "AGENTPEN_API_KEY": "changeme"},
			"AGENTPEN_API_KEY holds a placeholder"},
		{"short_api_key", nil, map[string]string{"AGENTPEN_SERVE_TOKEN": "serve-test-token-5d0c8e1a47b93f26a1", "AGENTPEN_API_KEY": "0123456789"},
			"AGENTPEN_API_KEY holds a key shorter than"},
		{"other_api_key_env_unset", []string{"--api-key-env", "GRADER_KEY"}, map[string]string{"AGENTPEN_SERVE_TOKEN": "serve-test-token-5d0c8e1a47b93f26a1", "AGENTPEN_API_KEY": testAPIKey},
			"the grader's API key: GRADER_KEY is unset or empty"},
		{"api_key_env_bad_name", []string{"--api-key-env", "1X"}, map[string]string{"AGENTPEN_SERVE_TOKEN": "serve-test-token-5d0c8e1a47b93f26a1"},
			"--api-key-env \"1X\": not an environment variable name"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "foreign_token_file" {
				testenv.RequireRoot(t) // giving a file away
			}
			e := map[string]string{"HOME": dir, "DOCKER_HOST": ""}
			for k, v := range tt.env {
				e[k] = v
			}
			var out, errb bytes.Buffer
			err := run(t.Context(), append([]string{"serve", "--listen", "127.0.0.1:0"}, tt.args...), &out, &errb, func(k string) string { return e[k] })
			if exitCode(err) != 2 || !strings.Contains(cli.Message("agentpen", err), tt.want) {
				t.Fatalf("exit %d, message %q, want 2 and %q", exitCode(err), cli.Message("agentpen", err), tt.want)
			}
			if msg := cli.Message("agentpen", err); strings.Contains(msg, tokA) || strings.Contains(msg, tokB) {
				t.Fatalf("the message holds a token: %q", msg)
			}
		})
	}
}

// TestServeStateRootLocked: a second agentpen serve on a state root
// another one serves exits 4 before it listens or asks any daemon, and
// names the lock and the process holding it.
func TestServeStateRootLocked(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "agentpen")
	lockPath := filepath.Join(root, "api", "serve.lock")
	if err := os.MkdirAll(filepath.Dir(lockPath), 0o700); err != nil {
		t.Fatal(err)
	}
	// The lock as another serve holds it: flock'd (the holder is named
	// from /proc/locks: nothing is written into the file, which a pid
	// inside could forge).
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	f.WriteString("4242\n") // a forged holder, never believed
	env := map[string]string{"XDG_STATE_HOME": dir, "DOCKER_HOST": "", "AGENTPEN_SERVE_TOKEN": "serve-test-token-5d0c8e1a47b93f26a1", "AGENTPEN_API_KEY": testAPIKey}
	var out, errb bytes.Buffer
	err = run(t.Context(), []string{"serve", "--listen", "127.0.0.1:0"}, &out, &errb, func(k string) string { return env[k] })
	msg := cli.Message("agentpen", err)
	holder := fmt.Sprintf("pid %d,", os.Getpid())
	if exitCode(err) != exitConflict || !strings.Contains(msg, lockPath) || !strings.Contains(msg, holder) || strings.Contains(msg, "4242") {
		t.Fatalf("exit %d, message %q; want %d naming %s and %s", exitCode(err), msg, exitConflict, lockPath, holder)
	}
	// Released, the state root is served (here: up to the daemon, which
	// DOCKER_HOST does not name).
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	err = run(t.Context(), []string{"serve", "--listen", "127.0.0.1:0"}, &out, &errb, func(k string) string { return env[k] })
	if msg := cli.Message("agentpen", err); exitCode(err) != exitBadInput || !strings.Contains(msg, "DOCKER_HOST") {
		t.Fatalf("after the release: exit %d, message %q", exitCode(err), msg)
	}
}

// TestExitStatusAfterSignal: after SIGINT/SIGTERM an interrupted command
// exits 128+signal; what serve does after the signal that is its normal
// stop (a --cleanup-on-exit not verified) keeps its own status.
func TestExitStatusAfterSignal(t *testing.T) {
	notVerified := fmt.Errorf("campaign %q: %w", "c1", adapter.ErrNotVerified)
	for _, tt := range []struct {
		name string
		err  error
		sig  syscall.Signal
		want int
	}{
		{"clean_stop", nil, syscall.SIGTERM, 0},
		{"interrupted", context.Canceled, syscall.SIGINT, 130},
		{"interrupted_term", notVerified, syscall.SIGTERM, 143},
		{"cleanup_on_exit_not_verified", &stoppedError{fmt.Errorf("--cleanup-on-exit: %w", notVerified)}, syscall.SIGTERM, exitFailure},
		{"no_signal", notVerified, 0, exitFailure},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := exitStatus(tt.err, tt.sig); got != tt.want {
				t.Errorf("exitStatus(%v, %v) = %d, want %d", tt.err, tt.sig, got, tt.want)
			}
		})
	}
}

// TestServeLoopback: the addresses serve accepts without TLS.
func TestServeLoopback(t *testing.T) {
	for host, want := range map[string]bool{"127.0.0.1": true, "127.3.4.5": true, "::1": true, "localhost": true,
		"0.0.0.0": false, "::": false, "": false, "10.0.0.1": false, "example.com": false, "::ffff:127.0.0.1": true} {
		if got := loopback(host); got != want {
			t.Errorf("loopback(%q) = %v, want %v", host, got, want)
		}
	}
}

// TestServeRestartAndExit runs agentpen serve on the real daemon: a
// campaign created through it stays up when it stops; a restarted
// service serves it at the same base_urls; with --cleanup-on-exit the
// next stop removes it (verified).
func TestServeRestartAndExit(t *testing.T) {
	testenv.RequireRoot(t)
	e := newCLIEnv(t)
	token := "serve-test-token-5d0c8e1a47b93f26a1"
	e.env["AGENTPEN_SERVE_TOKEN"] = token
	id := fmt.Sprintf("serve-%d", time.Now().UnixNano())
	t.Cleanup(func() { e.run("down", id) })
	sock := filepath.Join(e.dir, "api.sock")

	start := func(extra ...string) (stop func() error) {
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		var errb bytes.Buffer
		go func() {
			done <- run(ctx, append([]string{"serve", "--listen", "unix://" + sock}, extra...), io.Discard, &errb, e.getenv)
		}()
		testenv.WaitFor(t, "serve to listen on "+sock, func() bool {
			if c, err := net.Dial("unix", sock); err == nil {
				c.Close()
				return true
			}
			select {
			case err := <-done:
				t.Fatalf("serve ended: %v\n%s", err, errb.String())
			default:
			}
			return false
		})
		return func() error {
			cancel()
			err := <-done
			if strings.Contains(errb.String(), token) {
				t.Error("the token reached serve's log")
			}
			return err
		}
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	call := func(method, path string, body []byte) (int, []byte) {
		req, _ := http.NewRequest(method, "http://agentpen"+path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		hc.CloseIdleConnections()
		return resp.StatusCode, b
	}
	specPath := e.spec(id, 1)
	spec, _ := os.ReadFile(specPath)

	stop := start()
	code, b := call(http.MethodPost, "/v1/campaigns", spec)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, b)
	}
	var v api.CampaignView
	json.Unmarshal(b, &v)
	if len(v.Workspaces) != 1 || !strings.HasPrefix(v.Workspaces[0].BaseURL, "/episode/") {
		t.Fatalf("a unix listener's base_url is a path: %+v", v.Workspaces)
	}
	if err := stop(); err != nil {
		t.Fatalf("serve: %v", err)
	}
	// Still up after the stop.
	if out, _, code := e.run("cleanup", "verify", id); code != 1 {
		t.Fatalf("after a plain stop, cleanup verify exits %d: %s", code, out)
	}
	stop = start("--cleanup-on-exit")
	code, b = call(http.MethodGet, "/v1/campaigns/"+id+"/workspaces", nil)
	if code != http.StatusOK || !bytes.Contains(b, []byte(v.Workspaces[0].BaseURL)) {
		t.Fatalf("after a restart: %d %s, want base_url %s", code, b, v.Workspaces[0].BaseURL)
	}
	if code, b := call(http.MethodGet, v.Workspaces[0].BaseURL+"/health", nil); code != http.StatusOK || !bytes.Contains(b, []byte("healthy")) {
		t.Fatalf("the workspace through the restarted proxy: %d %s", code, b)
	}
	if err := stop(); err != nil {
		t.Fatalf("serve --cleanup-on-exit: %v", err)
	}
	if out, errOut, code := e.run("cleanup", "verify", id); code != 0 {
		t.Fatalf("after --cleanup-on-exit, cleanup verify exits %d: %s %s", code, out, errOut)
	}
}

// TestUpUnknownTask: up refuses a task the workbench catalogue does not
// have, naming the field, before any daemon is asked (it used to come up).
func TestUpUnknownTask(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "spec.json")
	img := "sha256:" + strings.Repeat("ab", 32)
	os.WriteFile(spec, []byte(`{"campaign_id":"c1","server":{"image":"`+img+`"},"workspaces":[{"task_id":"software/nope","image":"`+img+`"}]}`), 0o600)
	env := map[string]string{"HOME": dir, "DOCKER_HOST": ""}
	var out, errb bytes.Buffer
	err := run(t.Context(), []string{"up", spec}, &out, &errb, func(k string) string { return env[k] })
	msg := cli.Message("agentpen", err)
	if exitCode(err) != 2 || !strings.Contains(msg, `workspaces[0].task_id "software/nope": is not in the workbench catalogue`) {
		t.Fatalf("exit %d, message %q", exitCode(err), msg)
	}
}

// TestServeDebugListen: --debug-listen serves the heap profile on the
// loopback address it logs, beside the API, and stops with the service.
func TestServeDebugListen(t *testing.T) {
	testenv.RequireRoot(t)
	e := newCLIEnv(t)
	e.env["AGENTPEN_SERVE_TOKEN"] = "serve-test-token-5d0c8e1a47b93f26a1"
	sock := filepath.Join(e.dir, "api.sock")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var logs testlog.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--listen", "unix://" + sock, "--debug-listen", "127.0.0.1:0", "--log-format", "json"}, io.Discard, &logs, e.getenv)
	}()
	var addr string
	testenv.WaitFor(t, "the profiling address logged", func() bool {
		for _, line := range strings.Split(logs.String(), "\n") {
			var rec struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &rec) == nil && strings.HasPrefix(rec.Msg, "serving profiles") {
				addr = rec.Addr
			}
		}
		select {
		case err := <-done:
			t.Fatalf("serve ended: %v\n%s", err, logs.String())
		default:
		}
		return addr != ""
	})
	if !strings.HasPrefix(addr, "http://127.0.0.1:") {
		t.Fatalf("profiles served at %s, not on loopback", addr)
	}
	resp, err := http.Get(addr + "heap?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "heap profile") {
		t.Fatalf("heap profile: %d %.200s", resp.StatusCode, b)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	if _, err := http.Get(addr + "heap?debug=1"); err == nil {
		t.Fatal("the profiles are still served after the service stopped")
	}
}

// TestServeStartChecks: serve with a token file holding one bare token
// (and its newline) goes on to the daemon; a daemon that answers but is
// not rootless is refused with exit 2, before anything listens; so is a
// --signing-key others can read (serve used to ignore the flag and sign
// with the state root's key).
func TestServeStartChecks(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("serve-test-token-5d0c8e1a47b93f26a1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"XDG_STATE_HOME": dir, "DOCKER_HOST": "", "AGENTPEN_API_KEY": testAPIKey}
	var out, errb bytes.Buffer
	readable := filepath.Join(t.TempDir(), "op.pem")
	if err := os.WriteFile(readable, []byte("not read: its mode is refused first\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := run(t.Context(), []string{"serve", "--listen", "127.0.0.1:0", "--token-file", tokenFile, "--signing-key", readable}, &out, &errb, func(k string) string { return env[k] })
	if msg := cli.Message("agentpen", err); exitCode(err) != exitBadInput || !strings.Contains(msg, "--signing-key") || !strings.Contains(msg, "want 0600") {
		t.Fatalf("a signing key others can read: exit %d %q, want 2 naming --signing-key", exitCode(err), msg)
	}
	err = run(t.Context(), []string{"serve", "--listen", "127.0.0.1:0", "--token-file", tokenFile}, &out, &errb, func(k string) string { return env[k] })
	if msg := cli.Message("agentpen", err); exitCode(err) != exitBadInput || !strings.Contains(msg, "DOCKER_HOST") {
		t.Fatalf("a bare token file: exit %d %q, want the token accepted and DOCKER_HOST refused", exitCode(err), msg)
	}
	fake := dockerfake.New()
	fake.SetInfo(map[string]any{"SecurityOptions": []string{"name=seccomp,profile=default"}})
	env["DOCKER_HOST"] = fake.ServeUnix(t)
	err = run(t.Context(), []string{"serve", "--listen", "127.0.0.1:0", "--token-file", tokenFile}, &out, &errb, func(k string) string { return env[k] })
	if msg := cli.Message("agentpen", err); exitCode(err) != exitBadInput || !strings.Contains(msg, "not rootless") {
		t.Fatalf("a daemon that is not rootless: exit %d %q, want 2", exitCode(err), msg)
	}
}

// TestServeUntrustedRootUntouched: a state root another user can write,
// with a link planted where serve's lock belongs (pointing at a file of
// root's), is refused (exit 2) before anything in it is opened, made or
// read: serve used to open and truncate <state root>/api/serve.lock
// through the link, then refuse the root.
func TestServeUntrustedRootUntouched(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "agentpen")
	os.MkdirAll(filepath.Join(root, "api"), 0o700)
	victim := filepath.Join(t.TempDir(), "shadow")
	os.WriteFile(victim, []byte("root:secret\n"), 0o600)
	if err := os.Symlink(victim, filepath.Join(root, "api", "serve.lock")); err != nil {
		t.Fatal(err)
	}
	os.Chmod(root, 0o777)
	env := map[string]string{"XDG_STATE_HOME": dir, "DOCKER_HOST": "", "AGENTPEN_SERVE_TOKEN": "serve-test-token-5d0c8e1a47b93f26a1"}
	var out, errb bytes.Buffer
	err := run(t.Context(), []string{"serve", "--listen", "127.0.0.1:0"}, &out, &errb, func(k string) string { return env[k] })
	if exitCode(err) != exitBadInput || !strings.Contains(cli.Message("agentpen", err), "state root "+root+" has mode 0777") {
		t.Fatalf("exit %d, message %q", exitCode(err), cli.Message("agentpen", err))
	}
	if b, _ := os.ReadFile(victim); string(b) != "root:secret\n" {
		t.Fatalf("the link's target now holds %q", b)
	}
	if entries, _ := os.ReadDir(root); len(entries) != 1 {
		t.Fatalf("serve made something in the untrusted root: %v", entries)
	}
	// Trusted again, the planted link is still refused, never followed.
	os.Chmod(root, 0o700)
	err = run(t.Context(), []string{"serve", "--listen", "127.0.0.1:0"}, &out, &errb, func(k string) string { return env[k] })
	if err == nil || !strings.Contains(cli.Message("agentpen", err), "serve.lock") {
		t.Fatalf("a planted lock link: %v", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "root:secret\n" {
		t.Fatalf("the link's target now holds %q", b)
	}
}
