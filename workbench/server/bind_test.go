package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/sandboxtest"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/internal/testkit/workbenchtest"
	"github.com/agentpen/agentpen/workbench/bind"
	"github.com/agentpen/agentpen/workbench/client"
	"github.com/agentpen/agentpen/workbench/episode"
)

// boundWorld serves real workbench environments bound by one bind file in
// dir (as a campaign workspace's run directory), over HTTP and WebSocket.
func boundWorld(t *testing.T) (dir, base string) {
	t.Helper()
	testenv.RequireRoot(t) // real episodes: the sandbox
	dir = t.TempDir()
	b, err := bind.File(filepath.Join(dir, bind.FileName))
	if err != nil {
		t.Fatal(err)
	}
	w := newFakeWorld() // only for startServer's bookkeeping: no fake env is built
	_, ts := startServer(t, w, func(c *Config) {
		c.Factory = func() (Env, error) { return episode.New(episode.Config{Sandbox: sandboxtest.Shared(t), Binding: b}) }
	})
	return dir, ts.URL
}

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestBoundWorkspace: a workbench bound by its run directory's bind file
// refuses every reset (HTTP and WebSocket) and every stateless step while
// the file is missing; once the file is there it serves that task to a
// reset naming none or naming it, refuses one naming another on every
// route with an error saying the workspace is bound, and stays bound when
// the file changes or goes.
func TestBoundWorkspace(t *testing.T) {
	dir, base := boundWorld(t)
	ctx := testenv.Context(t)
	const bound, other = "logs/error_count@1", "sql/top_customer"

	// No file yet: every reset refused, the client told it is unbound.
	for _, body := range []string{``, `{"task_id":"` + bound + `"}`} {
		if code, b := post(t, base+"/reset", body); code != http.StatusServiceUnavailable || !strings.Contains(b, "not bound to a task") {
			t.Errorf("unbound HTTP /reset %q: %d %s", body, code, b)
		}
	}
	if code, b := post(t, base+"/step", `{"action":{"tool":"list_files"}}`); code != http.StatusServiceUnavailable || !strings.Contains(b, "not bound") {
		t.Errorf("unbound HTTP /step: %d %s", code, b)
	}
	c := workbenchtest.Dial(t, ctx, base)
	_, err := c.Reset(ctx, client.ResetOptions{})
	var se *client.ServerError
	if !errors.As(err, &se) || se.Code != CodeExecutionError || !strings.Contains(se.Message, "not bound to a task") || strings.Contains(se.Message, dir) {
		t.Errorf("unbound WS reset: %v, want EXECUTION_ERROR saying unbound (and not the file's path)", err)
	}
	if _, err := roundTrip(ctx, c, map[string]any{"type": "step", "data": map[string]any{"tool": "list_files"}}); !errors.As(err, &se) || !strings.Contains(se.Message, "not bound") {
		t.Errorf("unbound WS step: %v", err)
	}

	// Bound (the file written as agentpen writes it, after start).
	if err := bind.Write(dir, bound, os.Getuid(), os.Getgid()); err != nil {
		t.Fatal(err)
	}
	r, err := c.Reset(ctx, client.ResetOptions{Seed: new(int64(3))})
	if err != nil || r.Metadata["task_id"] != bound {
		t.Fatalf("bare WS reset: %v, %v", err, r.Metadata)
	}
	if r, err := c.Reset(ctx, client.ResetOptions{TaskID: bound}); err != nil || r.Metadata["task_id"] != bound {
		t.Fatalf("WS reset naming the bound task: %v, %v", err, r.Metadata)
	}
	if _, err := c.Reset(ctx, client.ResetOptions{TaskID: other}); !errors.As(err, &se) || se.Code != CodeExecutionError || !strings.Contains(se.Message, "bound to its task") || strings.Contains(se.Message, bound) {
		t.Errorf("WS reset naming another task: %v, want EXECUTION_ERROR saying bound (not naming the task)", err)
	}
	// The refused reset left the episode running.
	if _, err := c.Step(ctx, "list_files", nil); err != nil {
		t.Errorf("step after a refused reset: %v", err)
	}
	code, b := post(t, base+"/reset", `{"task_id":"`+other+`"}`)
	if code != http.StatusUnprocessableEntity || !strings.Contains(b, `"loc":["body","task_id"]`) || !strings.Contains(b, "bound to its task") {
		t.Errorf("HTTP /reset naming another task: %d %s", code, b)
	}
	for _, body := range []string{``, `{"seed":1}`, `{"task_id":"` + bound + `"}`} {
		code, b := post(t, base+"/reset", body)
		var env struct{ Metadata map[string]any }
		json.Unmarshal([]byte(b), &env)
		if code != http.StatusOK || env.Metadata["task_id"] != bound {
			t.Errorf("HTTP /reset %q: %d %.200s", body, code, b)
		}
	}
	if code, b := post(t, base+"/step", `{"action":{"tool":"list_files"},"task_id":"`+other+`"}`); code != http.StatusUnprocessableEntity || !strings.Contains(b, "bound to its task") {
		t.Errorf("HTTP /step naming another task: %d %s", code, b)
	}
	if code, b := post(t, base+"/step", `{"action":{"tool":"list_files"}}`); code != http.StatusOK || !strings.Contains(b, `"task_id":"`+bound+`"`) {
		t.Errorf("HTTP /step: %d %.300s", code, b)
	}

	// Never rebound: the file replaced by another task, then removed.
	os.Remove(filepath.Join(dir, bind.FileName))
	if err := bind.Write(dir, other, os.Getuid(), os.Getgid()); err != nil {
		t.Fatal(err)
	}
	c2 := workbenchtest.Dial(t, ctx, base)
	if r, err := c2.Reset(ctx, client.ResetOptions{}); err != nil || r.Metadata["task_id"] != bound {
		t.Errorf("after the file changed, a new session's reset: %v %v", err, r.Metadata)
	}
	if _, err := c2.Reset(ctx, client.ResetOptions{TaskID: other}); err == nil {
		t.Error("after the file changed, its task was served")
	}
	os.Remove(filepath.Join(dir, bind.FileName))
	if code, b := post(t, base+"/reset", ``); code != http.StatusOK || !strings.Contains(b, bound) {
		t.Errorf("after the file went: %d %.200s", code, b)
	}
}

// TestBadBindFile: a bind file the workbench does not trust (readable by
// others) refuses every reset; the client is not told the path, the log
// says what is wrong.
func TestBadBindFile(t *testing.T) {
	dir, base := boundWorld(t)
	path := filepath.Join(dir, bind.FileName)
	os.WriteFile(path, []byte("logs/error_count@1\n"), 0o444)
	os.Chmod(path, 0o444)
	code, b := post(t, base+"/reset", ``)
	if code != http.StatusServiceUnavailable || strings.Contains(b, path) || strings.Contains(b, "logs/") {
		t.Errorf("HTTP /reset with a bad bind file: %d %s", code, b)
	}
}
