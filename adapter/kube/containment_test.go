//go:build kube

package kube_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/kuberig"
	"github.com/agentpen/agentpen/workbench/client"
	"github.com/agentpen/agentpen/workbench/sandbox"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestContainmentInAPod: the hostile corpus's containment cases, as an
// agent plays them through its workspace's forward on the cluster. A fork
// bomb (testdata/agents/fork_bomb.py) is stopped at the episode's process
// limit, the workbench answers the next step, and once the episode is over
// no process of an episode uid is left in the pod; a vsock socket is refused
// (testdata/agents/vsock_channel.py's first move); and the agent's code
// reaches neither the other workspace's pod nor the grader's, nor the
// cluster's API server, though its own pod can: its episode has a
// network namespace of its own.
func TestContainmentInAPod(t *testing.T) {
	d, h, ctx, id := onTheNode(t, "contain")
	c, err := h.BringUp(ctx, spec(t, d, id, 2))
	if err != nil {
		t.Fatal(err)
	}
	cs, cfg := kuberig.Client(t)
	ns := ""
	ips := map[string]string{} // pod name -> IP
	for _, r := range campaign.Resources(h.Records(t, id)) {
		if r.Kind != campaign.KindContainer || r.ID == "" || r.Removed {
			continue
		}
		var name string
		ns, name, _ = strings.Cut(r.Name, "/")
		pod, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ips[name] = pod.Status.PodIP
	}
	w0, w1 := c.Workspaces[0], c.Workspaces[1]
	s, err := client.Dial(ctx, "http://"+relay(t, d, w0.Handle))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Reset(ctx, client.ResetOptions{}); err != nil {
		t.Fatal(err)
	}
	run := func(code string) string {
		t.Helper()
		args, _ := json.Marshal(map[string]string{"code": code})
		r, err := s.Step(ctx, "run_python", args)
		if err != nil {
			t.Fatalf("run_python: %v", err)
		}
		return r.Observation.Output
	}

	bomb, err := os.ReadFile("../../testdata/agents/fork_bomb.py")
	if err != nil {
		t.Fatal(err)
	}
	out := run(string(bomb))
	forked, ok := strings.CutPrefix(strings.TrimSpace(strings.SplitN(out, "\n", 2)[0]), "forked ")
	n, err := strconv.Atoi(forked)
	if !ok || err != nil || n >= sandbox.DefaultLimits.Processes {
		t.Fatalf("the fork bomb: %q; want it stopped below the process limit %d", out, sandbox.DefaultLimits.Processes)
	}
	if got := run(`print("still here")`); !strings.Contains(got, "still here") {
		t.Fatalf("after the fork bomb the next run printed %q", got)
	}
	if got := run(`import socket
try:
    socket.socket(40, socket.SOCK_STREAM).close()
    print("vsock opened")
except OSError as e:
    print("vsock refused", e.errno)`); !strings.Contains(got, "vsock refused") {
		t.Errorf("a vsock socket from agent code: %q", got)
	}

	// The other workspace, the grader and the API server, from agent
	// code: no route; from the pod itself (the probe's exec), the other
	// workspace's pod answers, so the refusal is the episode's.
	apiHost := strings.TrimPrefix(strings.TrimPrefix(cfg.Host, "https://"), "http://")
	for what, addr := range map[string]string{
		"the other workspace": ips[w1.AgentID] + ":8765",
		"the grader":          ips["grader"] + ":8080",
		"the API server":      apiHost,
	} {
		got := run(fmt.Sprintf(`import socket
s = socket.socket()
s.settimeout(3)
try:
    s.connect((%q, %s))
    print("connected")
except OSError as e:
    print("no path", e.errno)`, strings.Split(addr, ":")[0], strings.Split(addr, ":")[1]))
		if !strings.Contains(got, "no path") {
			t.Errorf("agent code to %s (%s): %q", what, addr, got)
		}
	}
	if got, _, err := kuberig.Exec(ctx, cs, cfg, ns, w0.AgentID, "workspace", nil, "python3", "-c",
		fmt.Sprintf(`import socket; s = socket.create_connection((%q, 8080), timeout=5); print("pod reaches the grader")`, ips["grader"])); err != nil || !strings.Contains(got, "pod reaches") {
		t.Errorf("the control: the workspace's pod itself to the grader: %q %v", got, err)
	}
	// No process of an episode uid is left in the pod once the episode
	// is over (its session closed).
	s.Close()
	var left []string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(500 * time.Millisecond) {
		stdout, _, err := kuberig.Exec(ctx, cs, cfg, ns, w0.AgentID, "workspace", nil, "sh", "-c",
			`for s in /proc/[0-9]*/status; do awk -v p="$s" '/^Uid:/{print $2 ":" p}' "$s" 2>/dev/null; done`)
		left = nil
		for _, f := range strings.Fields(stdout) {
			uid, _, _ := strings.Cut(f, ":")
			if n, _ := strconv.Atoi(uid); sandbox.IsSandboxUID(n) {
				left = append(left, f)
			}
		}
		if err == nil && len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a minute after the episode ended, processes of episode uids are left in the pod: %v (%v)", left, err)
		}
	}
	if rep, err := h.Cleanup(ctx, id); err != nil || !rep.OK {
		t.Fatalf("removal: %v %+v", err, rep)
	}
}
