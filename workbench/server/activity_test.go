package server

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentpen/agentpen/internal/testkit/workbenchtest"
	"github.com/agentpen/agentpen/workbench/client"
)

// TestActivityOnResetAndStep: the server reports episode traffic (a reset
// or a step, over HTTP or a WebSocket) and nothing else: health, state,
// schema and invalid requests are not activity.
func TestActivityOnResetAndStep(t *testing.T) {
	var n atomic.Int32
	_, ts := startServer(t, newFakeWorld(), func(c *Config) { c.Activity = func() { n.Add(1) } })
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/health", ""}, {"GET", "/state", ""}, {"GET", "/schema", ""}, {"GET", "/metadata", ""},
		{"POST", "/reset", `{"seed":-1}`}, {"POST", "/step", `{}`},
	} {
		do(t, r.method, ts.URL+r.path, r.body)
	}
	if got := n.Load(); got != 0 {
		t.Fatalf("%d activities without a reset or a step", got)
	}
	do(t, "POST", ts.URL+"/reset", `{}`)
	do(t, "POST", ts.URL+"/step", `{"action":{"tool":"echo","args":{"text":"x"}}}`)
	if got := n.Load(); got != 2 {
		t.Fatalf("HTTP reset and step: %d activities, want 2", got)
	}
	ctx := t.Context()
	c := workbenchtest.Dial(t, ctx, ts.URL)
	if _, err := c.Reset(ctx, client.ResetOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Step(ctx, "echo", json.RawMessage(`{"text":"x"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.State(ctx); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if got := n.Load(); got != 4 {
		t.Fatalf("after a WebSocket reset, step and state: %d activities, want 4", got)
	}
}

// TestSocketActivity: SocketActivity sets each socket's modification time
// to its clock's now, at most once a second, and never follows a link put
// where a socket was (the link's target keeps its time).
func TestSocketActivity(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "wb.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	target := filepath.Join(dir, "victim")
	os.WriteFile(target, nil, 0o600)
	link := filepath.Join(dir, "link.sock")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, p := range []string{sock, target} {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	touch := SocketActivity([]string{sock, link}, func() time.Time { return now })
	mtime := func(p string) time.Time {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi.ModTime().UTC()
	}
	touch()
	if got := mtime(sock); !got.Equal(now) {
		t.Fatalf("socket time %v, want %v", got, now)
	}
	if got := mtime(target); !got.Equal(old) {
		t.Fatalf("the link's target was touched: %v", got)
	}
	first := now
	now = now.Add(500 * time.Millisecond)
	touch()
	if got := mtime(sock); !got.Equal(first) {
		t.Fatalf("touched again within a second: %v", got)
	}
	now = now.Add(time.Second)
	touch()
	if got := mtime(sock); !got.Equal(now) {
		t.Fatalf("a second later: %v, want %v", got, now)
	}
}
