package campaign_test

import (
	"strings"
	"testing"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/lifecycletest"
)

// TestFold: every journal shape (lifecycletest.Shapes, which the test of
// ls, the API and attest also reads) reads as the one status every reader
// shows, with the reason a campaign that is not up gives.
func TestFold(t *testing.T) {
	for _, sh := range lifecycletest.Shapes {
		t.Run(sh.Name, func(t *testing.T) {
			h := lifecycletest.New(lifecycletest.Spec("camp"), campaign.PlanOptions{}, "/run/x")
			sh.Build(h)
			lc := campaign.Fold(h.Records)
			if lc.Status != sh.Want || campaign.StatusOf(h.Records) != sh.Want {
				t.Fatalf("status %s, want %s (%+v)", lc.Status, sh.Want, lc)
			}
			r := lc.Reason("camp")
			switch {
			case sh.Want.Up() && r != "":
				t.Errorf("a campaign that is up has a reason: %q", r)
			case !sh.Want.Up() && (sh.Reason == "" || !strings.Contains(r, sh.Reason)):
				t.Errorf("reason %q, want it to say %q", r, sh.Reason)
			}
		})
	}
}

// TestStatusNames: the names are the API's words, each once, and the
// zero value is unusable (a state nobody read is never a good one).
func TestStatusNames(t *testing.T) {
	want := []string{"unusable", "creating", "ready", "attestation_failed", "starting_or_failed", "deleting", "cleanup_failed", "removed", "empty"}
	var got []string
	for _, s := range campaign.Statuses() {
		got = append(got, s.String())
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("names %v, want %v", got, want)
	}
	var zero campaign.Status
	if zero != campaign.StatusUnusable || campaign.Status(99).String() != "Status(99)" {
		t.Fatalf("zero %s, 99 %s", zero, campaign.Status(99))
	}
	for _, s := range campaign.Statuses() {
		if s.Up() != (s == campaign.StatusReady || s == campaign.StatusAttestationFailed) {
			t.Errorf("%s.Up() = %v", s, s.Up())
		}
	}
}
