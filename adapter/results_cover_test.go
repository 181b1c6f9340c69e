package adapter

import (
	"maps"
	"testing"

	"github.com/agentpen/agentpen/campaign"
)

// TestCoveringAttestations: a result names the latest passing
// attestation of its generation that covered its workspace: a whole
// campaign's covers the workspaces made before it, a refill's only the
// slots it names, a failed one takes every coverage before it away (it
// fails the campaign closed), and a workspace made again after an
// attestation is not covered by it.
func TestCoveringAttestations(t *testing.T) {
	intent := func(gen int, agent string, slot string) campaign.Record {
		l := map[string]string{campaign.LabelAgent: agent}
		if slot != "" {
			l[campaign.LabelPoolSlot] = slot
		}
		return campaign.Record{Op: campaign.OpIntent, Gen: gen, Kind: campaign.KindContainer, Labels: l}
	}
	attested := func(gen int, status, digest string, slots ...int) campaign.Record {
		return campaign.Record{Op: campaign.OpAttested, Gen: gen, Status: status, Digest: digest, Slots: slots}
	}
	recs := []campaign.Record{
		intent(1, "old", ""), attested(1, campaign.AttestOK, "gen1"),
		intent(2, "a", ""), intent(2, "p0", "0"), attested(2, campaign.AttestOK, "whole"),
		intent(2, "p1", "1"), attested(2, campaign.AttestFailed, "failed", 1),
		intent(2, "p2", "2"), attested(2, campaign.AttestOK, "refill", 2),
		intent(2, "p0", "0"), // the slot made again: not covered by "whole" any more
	}
	if got, want := coveringAttestations(recs[:5], 2), map[string]string{"a": "whole", "p0": "whole"}; !maps.Equal(got, want) {
		t.Fatalf("before the failed verdict: covered %v, want %v", got, want)
	}
	got := coveringAttestations(recs, 2)
	want := map[string]string{"p2": "refill"}
	if !maps.Equal(got, want) {
		t.Fatalf("covered %v, want %v", got, want)
	}
}
