package kube

import (
	"slices"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/campaign"
)

// TestNATPolicyKeepsLinkLocalOut: under egress nat the workspaces'
// policy opens the outside but link-local (clouds' instance metadata),
// rendered as the attestation plans it; under internal there is no such
// policy at all.
func TestNATPolicyKeepsLinkLocalOut(t *testing.T) {
	p := &campaign.Plan{Egress: campaign.EgressNAT}
	p.Server.Port = 8080
	var allows []string
	for _, np := range policies("ns", p) {
		allows = append(allows, policyOf(np).Allows...)
	}
	const want = "egress pods{io.agentpen.role=workspace} -> cidr{0.0.0.0/0 except 169.254.0.0/16} any"
	if !slices.Contains(allows, want) {
		t.Fatalf("nat policies allow %q; want %q among them", allows, want)
	}
	p.Egress = campaign.EgressInternal
	for _, np := range policies("ns", p) {
		for _, a := range policyOf(np).Allows {
			if strings.Contains(a, "cidr{") {
				t.Fatalf("internal egress allows %q", a)
			}
		}
	}
}
