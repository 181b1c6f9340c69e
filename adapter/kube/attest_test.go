//go:build kube

package kube_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/kuberig"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var update = flag.Bool("update", false, "recapture testdata/attest/cluster from the node")

// TestCampaignAttestsOnTheNode: a campaign of two workbench workspaces on
// the node attests ok from the API server's answers and the probes run
// through pods/exec (episode isolation, the episode uid block, the bind
// file, the grader's protected routes), with its network policies
// reported stored and proven not enforced (a pod reached the grader on a
// port no policy allows). Then the lies: a permissive network policy another
// client adds beside the campaign's makes the next attestation fail,
// naming it (policies are unioned), and with it removed the campaign
// attests ok again. With -update it captures the cluster fixture
// package attest judges (testdata/attest/cluster).
func TestCampaignAttestsOnTheNode(t *testing.T) {
	d, h, ctx, id := onTheNode(t, "attest")
	s := spec(t, d, id, 2)
	s.Workspaces[0].Integrity = campaign.IntegritySpec{ForbiddenPaths: []string{campaign.WorkbenchTaskFile, "/srv/answers/key.json"}}
	if _, err := h.BringUp(ctx, s); err != nil {
		t.Fatal(err)
	}
	src, obs, rep, err := h.Observe(ctx, id, adapter.AttestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK {
		t.Fatalf("the campaign does not attest on the node:\n%s", strings.Join(rep.FailureLines(), "\n"))
	}
	// Debian's bridge plugin on the node enforces no policy: the probe
	// from a workspace's pod reaches the grader pod on a port none allows.
	if !strings.HasPrefix(rep.NetworkPolicies, "stored, not enforced") {
		t.Fatalf("network policies reported %q on a plugin that enforces none; want stored, not enforced", rep.NetworkPolicies)
	}
	checks := rep.Checks()
	for _, name := range []string{"workspaces[0].host_users", "server.host_users", "workspaces[1].probe.episode_isolation", "workspaces[1].probe.uid_block",
		"workspaces[0].key_ref", "network.policy_allows", "campaign.unexpected_policies", "workspaces[0].probe.forbidden_paths"} {
		if c, ok := checks[name]; !ok || !c.Pass {
			t.Errorf("check %s: %+v (present %v)", name, c, ok)
		}
	}
	if *update {
		dir := filepath.Join("..", "..", "testdata", "attest", "cluster")
		os.MkdirAll(dir, 0o755)
		for name, v := range map[string]any{"source.json": src, "observation.json": obs} {
			b, err := json.MarshalIndent(v, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name), append(b, '\n'), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}

	// Another client of the cluster opens every port of the campaign's
	// pods to anyone.
	cs, _ := kuberig.Client(t)
	var ns string
	for _, r := range campaign.Resources(src.Records) {
		if r.Kind == campaign.KindNamespace && r.ID != "" && !r.Removed {
			ns = r.Name
		}
	}
	open := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "allow-everything", Namespace: ns},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{}}}}
	if _, err := cs.NetworkingV1().NetworkPolicies(ns).Create(ctx, open, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Gone before the campaign's removal (a namespace holding what is not
	// the campaign's is never removed), on every path.
	t.Cleanup(func() {
		cs.NetworkingV1().NetworkPolicies(ns).Delete(context.Background(), open.Name, metav1.DeleteOptions{})
	})
	rep, err = h.Attest(ctx, id, adapter.AttestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"network.policy_allows", "campaign.unexpected_policies"} {
		c := rep.Checks()[name]
		if c.Pass || !strings.Contains(fmt.Sprint(c.Observed), ns+"/allow-everything") {
			t.Errorf("with a foreign permissive policy, %s: %+v; want failed, naming it", name, c)
		}
	}
	if rep.OK || !slices.Contains(rep.FailedChecks, "network.policy_allows") {
		t.Fatalf("attested %v with a policy open to everyone beside the campaign's: failed %v", rep.OK, rep.FailedChecks)
	}
	if err := cs.NetworkingV1().NetworkPolicies(ns).Delete(ctx, open.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if rep, err = h.Attest(ctx, id, adapter.AttestOptions{}); err != nil || !rep.OK {
		t.Fatalf("with the foreign policy removed: %v %v", err, rep.FailureLines())
	}
	if rep, err := h.Cleanup(ctx, id); err != nil || !rep.OK {
		t.Fatalf("removal: %v %+v", err, rep)
	}
}
