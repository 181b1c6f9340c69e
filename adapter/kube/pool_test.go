//go:build kube

package kube_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/workbenchtest"
	"github.com/agentpen/agentpen/workbench/client"
	"github.com/agentpen/agentpen/workbench/results"
)

// TestPoolOnTheNode: a pool on the cluster is pods, attested before any
// is handed out. A campaign with a pool of two attests ok with its slots
// covered (their probes in the report); a claim binds a warm slot, which
// plays its task's oracle at 1.0 through the forward, the same task and
// attempt is not claimed twice, and the pool refills to two under its
// cap. A pool whose slots fail a probe (a forbidden file the episode uid
// can read) does not attest, naming the slot's check, and nothing is
// ever claimed from it.
func TestPoolOnTheNode(t *testing.T) {
	d, h, ctx, id := onTheNode(t, "pool")
	s := spec(t, d, id, 1)
	s.Pool = 2
	_, rep, err := h.BringUpAttested(ctx, s, adapter.AttestOptions{})
	if err != nil || rep == nil || !rep.OK {
		t.Fatalf("a pool of two on the node: %v %v", err, rep.FailureLines())
	}
	for _, slot := range []string{"workspaces[1]", "workspaces[2]"} {
		for _, check := range []string{".probe.uid_block", ".probe.bind_file", ".host_users", ".key_ref"} {
			if c, ok := rep.Checks()[slot+check]; !ok || !c.Pass {
				t.Errorf("the pooled slot's %s: %+v (present %v)", slot+check, c, ok)
			}
		}
	}
	const task = "software/median@3"
	cl, err := h.Claim(ctx, id, task, "a")
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	if !cl.Warm {
		t.Errorf("the first claim of a pool of two came cold")
	}
	sess, err := client.Dial(ctx, "http://"+relay(t, d, cl.Workspace.Handle))
	if err != nil {
		t.Fatal(err)
	}
	if err := workbenchtest.PlayOracle(ctx, sess, task); err != nil {
		t.Fatalf("the claimed slot: %v", err)
	}
	sess.Conn().CloseNow()
	var b []byte
	for deadline := time.Now().Add(30 * time.Second); len(b) == 0 && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if b, err = d.Results(ctx, cl.Workspace.Handle, 0); err != nil {
			t.Fatal(err)
		}
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	if r, err := results.Parse(line); err != nil || r.TaskID != task || r.Reward != 1 {
		t.Fatalf("the claimed slot's result %q: %+v (%v)", b, r, err)
	}
	if _, err := h.Claim(ctx, id, task, "a"); err == nil {
		t.Error("the same task and attempt was claimed twice")
	}
	if n, err := h.Refill(ctx, id); err != nil || n != 1 {
		t.Fatalf("refill after one claim: %d made, %v; want 1", n, err)
	}
	if rep, err := h.Cleanup(ctx, id); err != nil || !rep.OK {
		t.Fatalf("removal: %v %+v", err, rep)
	}

	// A pool whose slots an episode uid can read a forbidden file in.
	leaky := fmt.Sprintf("pool-leaky-%d", time.Now().UnixNano()%1e9)
	t.Cleanup(func() { h.Cleanup(context.Background(), leaky) })
	ls := spec(t, d, leaky, 1)
	ls.Pool = 1
	ls.Workspaces[0].Integrity = campaign.IntegritySpec{ForbiddenPaths: []string{"/etc/os-release"}}
	_, lrep, err := h.BringUpAttested(ctx, ls, adapter.AttestOptions{})
	if lrep == nil || lrep.OK {
		t.Fatalf("a pool with a readable forbidden file: report %v, error %v; want a report that is not ok", lrep, err)
	}
	if !slices.Contains(lrep.FailedChecks, "workspaces[1].probe.forbidden_paths") {
		t.Errorf("the pooled slot's forbidden_paths did not fail: %v", lrep.FailedChecks)
	}
	if cl, err := h.Claim(ctx, leaky, task, "b"); err == nil {
		t.Fatalf("a slot of a pool that did not attest was handed out: %+v", cl.Workspace)
	}
}
