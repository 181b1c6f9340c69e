//go:build kube

package kube_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/agentpen/agentpen/internal/testkit/workbenchtest"
	"github.com/agentpen/agentpen/workbench/client"
	"github.com/agentpen/agentpen/workbench/results"
)

// TestEpisodesThroughTheEngine: a campaign of two workspaces brought up
// by the engine on the node; each plays its task's oracle at reward 1.0
// through Driver.Dial (pods/portforward, as the launcher's proxy dials),
// and its result comes back through Driver.Results (pods/exec), read from
// where the last read ended.
func TestEpisodesThroughTheEngine(t *testing.T) {
	d, h, ctx, id := onTheNode(t, "episodes")
	c, err := h.BringUp(ctx, spec(t, d, id, 2))
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range c.Workspaces {
		task := w.TaskID
		if task == "" {
			t.Fatalf("workspace %d: no task", i)
		}
		s, err := client.Dial(ctx, "http://"+relay(t, d, w.Handle))
		if err != nil {
			t.Fatalf("workspace %d: %v", i, err)
		}
		if err := workbenchtest.PlayOracle(ctx, s, task); err != nil {
			t.Fatalf("workspace %d: %v", i, err)
		}
		s.Conn().CloseNow()
		var b []byte
		for deadline := time.Now().Add(30 * time.Second); len(b) == 0 && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if b, err = d.Results(ctx, w.Handle, 0); err != nil {
				t.Fatalf("workspace %d: results: %v", i, err)
			}
		}
		line, rest, _ := bytes.Cut(b, []byte("\n"))
		r, err := results.Parse(line)
		if err != nil || r.TaskID != task || r.Reward != 1 || len(rest) != 0 {
			t.Fatalf("workspace %d: results %q: %+v (%v)", i, b, r, err)
		}
		if more, err := d.Results(ctx, w.Handle, int64(len(b))); err != nil || len(more) != 0 {
			t.Fatalf("workspace %d: results after the first record: %q (%v)", i, more, err)
		}
	}
	if rep, err := h.Cleanup(ctx, id); err != nil || !rep.OK {
		t.Fatalf("removal: %v %+v", err, rep)
	}
}

// relay listens on the loopback and joins each connection to the
// workspace's episode server through Driver.Dial; it returns its address.
func relay(t *testing.T, d driver.Driver, w driver.Workspace) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer in.Close()
				out, err := d.Dial(context.Background(), w)
				if err != nil {
					t.Errorf("dial the workspace: %v", err)
					return
				}
				defer out.Close()
				wg.Go(func() { io.Copy(out, in); out.Close() })
				io.Copy(in, out)
			})
		}
	})
	return ln.Addr().String()
}
