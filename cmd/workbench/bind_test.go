package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/internal/testkit/workbenchtest"
	"github.com/agentpen/agentpen/workbench/bind"
	"github.com/agentpen/agentpen/workbench/client"
)

// unixClient is an HTTP client whose every request goes to the socket.
func unixClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
}

// checkBoundSocket asks the server on its unix socket (as a launcher on
// the host does) for resets: one naming other is refused over HTTP and
// WebSocket, saying the workspace is bound; a bare one plays bound.
func checkBoundSocket(t *testing.T, sock, bound, other string) {
	t.Helper()
	hc := unixClient(sock)
	defer hc.CloseIdleConnections()
	post := func(body string) (int, string) {
		resp, err := hc.Post("http://wb/reset", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, b := post(`{"task_id":"` + other + `"}`); code != http.StatusUnprocessableEntity || !strings.Contains(b, "bound to its task") {
		t.Errorf("HTTP /reset naming %s on the socket: %d %s", other, code, b)
	}
	if code, b := post(``); code != http.StatusOK || !strings.Contains(b, `"task_id":"`+bound+`"`) {
		t.Errorf("bare HTTP /reset on the socket: %d %.300s", code, b)
	}
	ctx := testenv.Context(t)
	w := workbenchtest.Dial(t, ctx, "unix://"+sock)
	if _, err := w.Reset(ctx, client.ResetOptions{TaskID: other}); err == nil || !strings.Contains(err.Error(), "bound to its task") {
		t.Errorf("WS reset naming %s on the socket: %v", other, err)
	}
	if r, err := w.Reset(ctx, client.ResetOptions{}); err != nil || r.Metadata["task_id"] != bound {
		t.Errorf("bare WS reset on the socket: %v %v", err, r.Metadata)
	}
}

// TestServeBound: `workbench serve --task-file` refuses every reset until
// the bind file is there, then serves only its task on the unix socket;
// `--task` binds at start.
func TestServeBound(t *testing.T) {
	testenv.RequireRoot(t)
	const bound, other = "logs/error_count@1", "sql/top_customer"
	ls := startServe(t, "--task-file", "{{RUNDIR}}/"+bind.FileName)
	resp, err := unixClient(ls.Socket).Post("http://wb/reset", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "not bound") {
		t.Errorf("a reset before the bind file: %d %s", resp.StatusCode, b)
	}
	// Unbound (a pool's workspace), it has already done what its first
	// reset would otherwise do on its path: the fork servers' program is
	// compiled.
	testenv.WaitFor(t, "the unbound server to compile the fork servers' program ahead", func() bool {
		return strings.Contains(ls.Logs.String(), "compiled ahead of the first reset")
	})
	if err := bind.Write(filepath.Dir(ls.Socket), bound, os.Getuid(), os.Getgid()); err != nil {
		t.Fatal(err)
	}
	checkBoundSocket(t, ls.Socket, bound, other)
	if !strings.Contains(ls.Logs.String(), "bound to the task of the bind file") || strings.Contains(ls.Logs.String(), bound) {
		t.Errorf("the log does not say the server is bound, or names the task:\n%s", ls.Logs.String())
	}

	fixed := startServe(t, "--task", bound)
	checkBoundSocket(t, fixed.Socket, bound, other)
}

// TestServeBindFlags: the binding flags' refusals are usage errors (exit
// 2) that say what is wrong, before anything is served.
func TestServeBindFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--task", "logs/error_count", "--task-file", "/run/workbench/task"}, "not both"},
		{[]string{"--task", "nope/nope"}, "workbench tasks lists the catalogue"},
		{[]string{"--task-file", "relative/task"}, "absolute"},
	} {
		cmd := exec.CommandContext(testenv.Context(t), binary(t), append([]string{"serve", "--listen", "127.0.0.1:0"}, tt.args...)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(out.String(), tt.want) {
			t.Errorf("serve %v: exit %d (%v), want 2 saying %q:\n%s", tt.args, code, err, tt.want, out.String())
		}
	}
}

// playBoundTask: agent code in an episode of a bound server reads the
// bind file, lists the run directory and asks the server, on its socket
// and its TCP port, for a reset of another task; nothing works, first
// with the run directory as the server makes it (0700), then opened up
// (0711, the socket 0666) so the file's mode and the gate at accept each
// hold on their own. The agent never sees its task id. In namespaces
// the socket is not even in the episode's view (its /tmp is its own);
// with the uid-only sandbox the opened-up socket is reached and the gate
// closes the connection at accept.
func playBoundTask(t *testing.T, code string) {
	for _, mode := range []string{"namespaces", "uid-only"} {
		t.Run(mode, func(t *testing.T) { boundTask(t, code, mode) })
	}
}

func boundTask(t *testing.T, code, mode string) {
	const bound, other = "logs/error_count@1", "sql/top_customer"
	ls := startServe(t, "--sandbox", mode, "--task-file", "{{RUNDIR}}/"+bind.FileName)
	runDir := filepath.Dir(ls.Socket)
	if err := bind.Write(runDir, bound, os.Getuid(), os.Getgid()); err != nil {
		t.Fatal(err)
	}
	r := strings.NewReplacer("{{SOCKET}}", ls.Socket, "{{BIND_FILE}}", filepath.Join(runDir, bind.FileName),
		"{{OTHER_TASK}}", other, "{{TCP}}", strings.TrimPrefix(ls.URL, "http://"))
	code = r.Replace(code)
	ctx := testenv.Context(t)
	w := workbenchtest.Dial(t, ctx, ls.URL)
	if res, err := w.Reset(ctx, client.ResetOptions{}); err != nil || res.Metadata["task_id"] != bound {
		t.Fatalf("reset: %v %v", err, res.Metadata)
	}
	for _, open := range []bool{false, true} {
		if open {
			// Traversable by every uid down to the socket and the file
			// (the test's temporary directories included), not listable.
			for d := runDir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
				os.Chmod(d, 0o711)
			}
			os.Chmod(ls.Socket, 0o666)
		}
		res, err := w.Step(ctx, "run_python", workbenchtest.Args(map[string]any{"code": code}))
		if err != nil {
			t.Fatal(err)
		}
		out := res.Observation.Output
		t.Logf("run directory open=%v, agent code printed:\n%s", open, out)
		for _, line := range []string{"bind file: denied", "unix http:", "unix ws:", "tcp http:", "tcp ws:"} {
			if !strings.Contains(out, line) {
				t.Errorf("open=%v: the agent did not report %q: it did not try", open, line)
			}
		}
		for _, bad := range []string{"BIND READ", "LISTED", "SERVED", bound, "answered"} {
			if strings.Contains(out, bad) {
				t.Errorf("open=%v: agent code got through (%q)", open, bad)
			}
		}
		switch {
		case mode == "namespaces" && (!strings.Contains(out, "unix http: connect denied") || !strings.Contains(out, "unix ws: connect denied")):
			t.Errorf("open=%v: in namespaces the agent reached the server's socket", open)
		case mode == "uid-only" && open && (!strings.Contains(out, "unix http: closed") || !strings.Contains(out, "unix ws: closed")):
			t.Errorf("open=%v: with the socket open to it, the agent's connection was not closed by the gate", open)
		}
	}
}
