package adapter

import (
	"testing"

	"github.com/agentpen/agentpen/campaign"
)

// TestCoveringAttestationsAfterFailedRecheck: a whole-campaign
// attestation that fails after one that passed fails the campaign
// closed (campaign.Fold takes the failed verdict as the campaign's), so
// a result collected after it must not name the earlier passing report
// as the runtime it ran under: the latest verdict on that same runtime
// says it is not what was planned. (Review of 3fe701f.)
func TestCoveringAttestationsAfterFailedRecheck(t *testing.T) {
	recs := []campaign.Record{
		{Op: campaign.OpIntent, Gen: 1, Kind: campaign.KindContainer, Labels: map[string]string{campaign.LabelAgent: "a"}},
		{Op: campaign.OpAttested, Gen: 1, Status: campaign.AttestOK, Digest: "passed"},
		{Op: campaign.OpAttested, Gen: 1, Status: campaign.AttestFailed, Digest: "failed-later"},
	}
	if st := campaign.Fold(recs); st.Attestation != campaign.AttestFailed {
		t.Fatalf("the campaign's attestation is %q after the failed recheck; want %q", st.Attestation, campaign.AttestFailed)
	}
	if got := coveringAttestations(recs, 1)["a"]; got != "" {
		t.Fatalf("a result collected after a failed re-attestation names %q", got)
	}
}
