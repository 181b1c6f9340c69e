package campaign

import (
	"strings"
	"testing"
)

// history builds a journal's records as bring-up, attestation and
// removal write them.
type history struct{ recs []Record }

func (h *history) add(r Record) *history { h.recs = append(h.recs, r); return h }

// begin opens generation gen with two containers created.
func (h *history) begin(gen int) *history {
	g := string(rune('0' + gen))
	return h.add(Record{Op: OpBegin, Gen: gen, Instance: "i" + g}).
		add(Record{Op: OpIntent, Gen: gen, Kind: KindContainer, Name: "s" + g}).
		add(Record{Op: OpCreated, Gen: gen, Kind: KindContainer, Name: "s" + g, ID: "s" + g}).
		add(Record{Op: OpIntent, Gen: gen, Kind: KindContainer, Name: "w" + g}).
		add(Record{Op: OpCreated, Gen: gen, Kind: KindContainer, Name: "w" + g, ID: "w" + g})
}

func (h *history) op(op Op, gen int) *history { return h.add(Record{Op: op, Gen: gen}) }

func (h *history) attested(gen int, status string) *history {
	return h.add(Record{Op: OpAttested, Gen: gen, Status: status, Report: "attestation-1-1.json", Digest: "d"})
}

func (h *history) removal(reason string) *history {
	return h.add(Record{Op: OpRemovalStarted, Reason: reason})
}

func (h *history) removed(gen int, ids ...string) *history {
	for _, id := range ids {
		h.add(Record{Op: OpRemoved, Gen: gen, Kind: KindContainer, ID: id})
	}
	return h
}

func (h *history) cleanup(status string) *history {
	return h.add(Record{Op: OpCleanup, Status: status, Report: "cleanup-1-1.json"})
}

func hist() *history { return &history{} }

// lifecycleCases are every journal shape the state tables of ls, the API
// and attest covered, and one per typed op, with the status each reads
// as.
var lifecycleCases = []struct {
	name   string
	h      *history
	want   Status
	reason string // a part of Reason (for states that are not up)
}{
	{"no_generation", hist(), StatusRemoved, "it has no generation"},
	{"ready", hist().begin(1).op(OpReady, 1), StatusReady, ""},
	{"attested_ok", hist().begin(1).op(OpAttesting, 1).attested(1, AttestOK), StatusReady, ""},
	{"attested_failed", hist().begin(1).op(OpAttesting, 1).attested(1, AttestFailed), StatusAttestationFailed, ""},
	{"later_attest_failed", hist().begin(1).op(OpAttesting, 1).attested(1, AttestOK).attested(1, AttestFailed), StatusAttestationFailed, ""},
	{"attest_passed_again", hist().begin(1).op(OpAttesting, 1).attested(1, AttestFailed).attested(1, AttestOK), StatusReady, ""},
	{"ready_then_attested_failed", hist().begin(1).op(OpReady, 1).attested(1, AttestFailed), StatusAttestationFailed, ""},
	{"killed_create", hist().begin(1), StatusStartingOrFailed, "never became ready"},
	// Killed between readiness and its attestation's verdict: never
	// served (it read as ready, unattested, with working base_urls).
	{"killed_attesting", hist().begin(1).op(OpAttesting, 1), StatusStartingOrFailed, "stopped while it was being attested"},
	// A down killed before it journalled any removal.
	{"removal_started", hist().begin(1).op(OpAttesting, 1).attested(1, AttestOK).removal(ReasonDown), StatusCleanupFailed, "is being removed"},
	{"removal_interrupted", hist().begin(1).op(OpReady, 1).removed(1, "w1"), StatusCleanupFailed, "is being removed"},
	{"cleanup_failed", hist().begin(1).op(OpReady, 1).removal(ReasonDelete).removed(1, "w1").cleanup(CleanupFailed), StatusCleanupFailed, "its cleanup failed"},
	{"cleanup_failed_nothing_live", hist().begin(1).op(OpReady, 1).removal(ReasonDown).removed(1, "w1", "s1").cleanup(CleanupFailed), StatusCleanupFailed, "its cleanup failed"},
	{"removed", hist().begin(1).op(OpReady, 1).removal(ReasonDown).removed(1, "w1", "s1").cleanup(CleanupVerified), StatusRemoved, "was removed (cleanup verified)"},
	{"removed_unjournalled_cleanup", hist().begin(1).op(OpReady, 1).removal(ReasonDown).removed(1, "w1", "s1"), StatusRemoved, "every resource of it is journalled removed"},
	{"not_attested_removed", hist().begin(1).op(OpAttesting, 1).attested(1, AttestFailed).removal(ReasonNotAttested).removed(1, "w1", "s1").cleanup(CleanupVerified), StatusRemoved, "did not attest and was removed"},
	{"rolled_back", hist().begin(1).removal(ReasonRollback).removed(1, "w1", "s1").cleanup(CleanupVerified).add(Record{Op: OpRolledBack, Gen: 1, Note: "w1: start: boom"}), StatusRemoved, "failed to come up and was rolled back (cleanup verified)"},
	{"rollback_not_verified", hist().begin(1).removal(ReasonRollback).removed(1, "s1").cleanup(CleanupFailed).add(Record{Op: OpRolledBack, Gen: 1}), StatusCleanupFailed, "its cleanup failed"},
	// A failed cleanup of generation 1 says nothing of generation 2.
	{"earlier_cleanup_failed", hist().begin(1).op(OpReady, 1).removed(1, "w1", "s1").cleanup(CleanupFailed).begin(2).op(OpReady, 2), StatusReady, ""},
	{"earlier_generation_live", hist().begin(1).op(OpReady, 1).begin(2).op(OpReady, 2), StatusCleanupFailed, "an earlier generation"},
	{"earlier_attestation_failed", hist().begin(1).op(OpAttesting, 1).attested(1, AttestFailed).removed(1, "w1", "s1").cleanup(CleanupVerified).begin(2).op(OpReady, 2), StatusReady, ""},
	// An orphan of the generation removed (agentpen orphans --remove) is
	// not a removal of the campaign.
	{"orphan_removed", hist().begin(1).op(OpReady, 1).
		add(Record{Op: OpOrphan, Gen: 1, Kind: KindContainer, Name: "x", ID: "orphan"}).removed(1, "orphan"), StatusReady, ""},
	{"note_is_prose", hist().begin(1).op(OpReady, 1).add(Record{Op: OpNote, Note: "removal started"}), StatusReady, ""},
}

// TestFold: every journal shape reads as the one status every reader
// shows.
func TestFold(t *testing.T) {
	for _, tt := range lifecycleCases {
		t.Run(tt.name, func(t *testing.T) {
			lc := Fold(tt.h.recs)
			if lc.Status != tt.want || StatusOf(tt.h.recs) != tt.want {
				t.Fatalf("status %s, want %s (%+v)", lc.Status, tt.want, lc)
			}
			r := lc.Reason("camp")
			switch {
			case tt.want.Up() && r != "":
				t.Errorf("a campaign that is up has a reason: %q", r)
			case !tt.want.Up() && (tt.reason == "" || !strings.Contains(r, tt.reason)):
				t.Errorf("reason %q, want it to say %q", r, tt.reason)
			}
		})
	}
}

// TestStatusNames: the names are the API's words, each once, and the
// zero value is unusable (a state nobody read is never a good one).
func TestStatusNames(t *testing.T) {
	want := []string{"unusable", "creating", "ready", "attestation_failed", "starting_or_failed", "deleting", "cleanup_failed", "removed"}
	var got []string
	for _, s := range Statuses() {
		got = append(got, s.String())
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("names %v, want %v", got, want)
	}
	var zero Status
	if zero != StatusUnusable || Status(99).String() != "Status(99)" {
		t.Fatalf("zero %s, 99 %s", zero, Status(99))
	}
	for _, s := range Statuses() {
		if s.Up() != (s == StatusReady || s == StatusAttestationFailed) {
			t.Errorf("%s.Up() = %v", s, s.Up())
		}
	}
}
