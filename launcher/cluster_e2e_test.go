//go:build kube

package launcher_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentpen/agentpen/adapter/kube"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/kuberig"
	"github.com/agentpen/agentpen/internal/testkit/oracle"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
	apiclient "github.com/agentpen/agentpen/launcher/client"
	"github.com/agentpen/agentpen/store"
	"github.com/agentpen/agentpen/workbench/sandbox"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestClusterCampaignThroughTheAPI is the launcher's whole job on the
// project's Kubernetes node, through HTTP only, as on Docker: a campaign
// of three workspaces created (brought up and attested on the cluster),
// an oracle episode at reward 1.0 through each base_url, one per client
// (the project's Go client, the Python client speaking OpenEnv's
// WebSocket frames, the official MCP Go SDK), each result collected,
// and DELETE with the cleanup verified. Inside each workspace pod the
// workbench's forwarded listener refuses a connection from an episode uid
// and serves one from outside the episode space, as its socket does on
// Docker.
func TestClusterCampaignThroughTheAPI(t *testing.T) {
	kuberig.Config(t) // fails, never skips, without the rig
	d, err := kube.Open(t.Context(), kube.Config{Kubeconfig: os.Getenv("KUBECONFIG"), NodeName: kuberig.NodeName, SeccompProfile: kuberig.SeccompProfile})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	img, err := d.Resolve(t.Context(), testenv.WorkbenchImage())
	if err != nil {
		t.Fatalf("the workbench image on the node (make kube-test imports it): %v", err)
	}
	l := startLiveOn(t, d, img)
	ctx := testenv.Context(t)
	id := fmt.Sprintf("cluster-e2e-%d", time.Now().UnixNano()%1e9)
	tasks := []string{"software/median@2", "data/csv_region_total@5", "logs/error_count@1"}
	v := l.create(t, id, tasks)
	if v.Attestation == nil || !v.Attestation.OK || len(v.Workspaces) != 3 {
		t.Fatalf("created: attestation %+v, %d workspaces", v.Attestation, len(v.Workspaces))
	}
	var baseURLs []string
	for i, w := range v.Workspaces {
		if w.Index != i {
			t.Fatalf("workspace %d answered as index %d", i, w.Index)
		}
		baseURLs = append(baseURLs, w.BaseURL)
	}

	// The project's Go client, through the proxy.
	playThroughProxy(t, v.Workspaces[0].BaseURL, tasks[0], "sql/top_customer")

	// The Python client: OpenEnv's WebSocket frames at <base_url>/ws.
	py := exec.CommandContext(ctx, "python3", filepath.Join("..", "testdata", "clients", "workbench_client.py"),
		"--oracles", filepath.Join("..", "testdata", "oracles"), "--url", v.Workspaces[1].BaseURL, "data/csv_region_total@5=number")
	out, err := py.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "reward=1.0") {
		t.Errorf("the Python client through %s: %v\n%s", v.Workspaces[1].BaseURL, err, out)
	}

	// The official MCP Go SDK at <base_url>/mcp.
	c := sdk.NewClient(&sdk.Implementation{Name: "agentpen-cluster-test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: v.Workspaces[2].BaseURL + "/mcp"}, nil)
	if err != nil {
		t.Fatalf("MCP through %s: %v", v.Workspaces[2].BaseURL, err)
	}
	call := func(tool string, args map[string]any) (oracle.Result, string, error) {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			return oracle.Result{}, "", err
		}
		var o struct {
			Task, Output, Error string
			Done                bool
			Reward              float64
		}
		b, _ := json.Marshal(res.StructuredContent)
		err = json.Unmarshal(b, &o)
		return oracle.Result{Output: o.Output, Error: o.Error, Done: o.Done, Reward: o.Reward}, o.Task, err
	}
	_, instruction, err := call("list_files", map[string]any{})
	if err != nil || instruction == "" {
		t.Fatalf("MCP: the first call: %v (task %q)", err, instruction)
	}
	final, err := oracle.PlayTask(tasks[2], instruction, func(tool string, args map[string]any) (oracle.Result, error) {
		r, _, err := call(tool, args)
		return r, err
	})
	if err != nil {
		t.Errorf("MCP: %v", err)
	}
	cs.Close()
	if !final.Done || final.Reward != 1.0 {
		t.Errorf("MCP: final %+v, want done with 1.0", final)
	}

	// Every workspace's result, collected from its pod.
	api := apiclient.New(l.ts.URL, l.token, nil)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(500 * time.Millisecond) {
		eps, err := api.Episodes(ctx, id, -1)
		if err == nil && rewardsOf(eps) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("episodes: %v %+v; want three at reward 1.0", err, eps)
		}
	}

	// The connection gate on each workspace's forwarded listener.
	kcs, cfg := kuberig.Client(t)
	c0, err := l.root.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	recs, _, err := c0.Records()
	c0.Close()
	if err != nil {
		t.Fatal(err)
	}
	pods := 0
	for _, r := range campaign.Resources(recs) {
		if r.Kind != campaign.KindContainer || r.Role != campaign.RoleWork || r.ID == "" || r.Removed {
			continue
		}
		pods++
		ns, name, _ := strings.Cut(r.Name, "/")
		for uid, want := range map[int]string{sandbox.DefaultRange.Base: "refused", 1000: "served"} {
			out, stderr, err := kuberig.Exec(ctx, kcs, cfg, ns, name, "workspace", nil, kuberig.ConnectAsCommand(uid, kube.WorkbenchPort)...)
			if got := strings.TrimSpace(out); err != nil || got != want {
				t.Errorf("%s: a connection from uid %d to the forwarded listener: %q (%v %s), want %s", name, uid, got, err, stderr, want)
			}
		}
	}
	if pods != 3 {
		t.Fatalf("%d workspace pods journalled, want 3", pods)
	}

	// DELETE: removed by exact UID, the cleanup verified.
	if rep, err := api.Delete(ctx, id); err != nil || !rep.OK {
		t.Fatalf("delete: %v %+v", err, rep)
	}
	if rep, err := l.verify(t, id); err != nil || !rep.OK {
		t.Fatalf("after DELETE, verify: %v %+v", err, rep)
	}
	l.checkNoSecrets(t, baseURLs, tasks)
}

// rewardsOf counts the episodes that ended at reward 1.0.
func rewardsOf(rs []store.Result) int {
	n := 0
	for _, r := range rs {
		if r.Reward == 1.0 {
			n++
		}
	}
	return n
}
