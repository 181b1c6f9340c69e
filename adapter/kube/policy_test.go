package kube

import (
	"slices"
	"testing"

	"github.com/agentpen/agentpen/campaign"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPolicyOfForeignShapes: policies another client might write
// render as something the planned rules never are (held in the review of issue 38).
func TestPolicyOfForeignShapes(t *testing.T) {
	work := metav1.LabelSelector{MatchLabels: map[string]string{campaign.LabelRole: campaign.RoleWork}}
	server := &metav1.LabelSelector{MatchLabels: map[string]string{campaign.LabelRole: campaign.RoleServer}}
	planned := "egress pods{" + campaign.LabelRole + "=" + campaign.RoleWork + "} -> pods{" + campaign.LabelRole + "=" + campaign.RoleServer + "} tcp/any"
	for name, spec := range map[string]networkingv1.NetworkPolicySpec{
		"no_types_egress_rules": {PodSelector: work, Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{PodSelector: server}}}}},
		"namespace_selector":    {PodSelector: work, PolicyTypes: []networkingv1.PolicyType{"Egress"}, Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}, PodSelector: server}}}}},
		"pod_expressions":       {PodSelector: work, PolicyTypes: []networkingv1.PolicyType{"Egress"}, Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: server.MatchLabels, MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "x", Operator: metav1.LabelSelectorOpDoesNotExist}}}}}}}},
		"except":                {PodSelector: work, PolicyTypes: []networkingv1.PolicyType{"Egress"}, Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: []string{"10.0.0.0/8"}}}}}}},
	} {
		p := policyOf(&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Spec: spec})
		t.Logf("%s: egress %v selects-other %v allows %q", name, p.Egress, p.SelectsOther, p.Allows)
		if !p.Egress || len(p.Allows) == 0 {
			t.Errorf("%s: rendered as no egress rule: %+v", name, p)
		}
		if name != "no_types_egress_rules" && slices.Contains(p.Allows, planned) {
			t.Errorf("%s: rendered as the planned rule", name)
		}
	}
}
