package adapter

import (
	"errors"
	"testing"

	"github.com/agentpen/agentpen/campaign"
)

// TestState: State reads one campaign's journal from the files on every
// call, says when the state root has none, and dates the last cleanup by
// the generation begun before it (a cleanup of an earlier generation says
// nothing of a later one).
func TestState(t *testing.T) {
	a := &Adapter{StateRoot: t.TempDir()}
	if _, err := a.State("camp-1"); !errors.Is(err, ErrNoCampaign) {
		t.Fatalf("no journal: %v, want ErrNoCampaign", err)
	}
	j, err := campaign.OpenJournal(a.CampaignDir("camp-1"))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	appendAll := func(recs ...campaign.Record) {
		t.Helper()
		for _, r := range recs {
			if err := j.Append(r); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendAll(
		campaign.Record{Op: campaign.OpBegin, Gen: 1, Instance: "i1"},
		campaign.Record{Op: campaign.OpCreated, Gen: 1, Kind: campaign.KindContainer, Name: "c", ID: "id1"},
		campaign.Record{Op: campaign.OpNote, Gen: 1, Note: "ready"},
	)
	st, err := a.State("camp-1")
	if err != nil || !st.Ready || st.LastCleanup != "" || len(st.Live()) != 1 {
		t.Fatalf("up: %+v %v", st, err)
	}
	appendAll(
		campaign.Record{Op: campaign.OpRemoved, Gen: 1, Kind: campaign.KindContainer, Name: "c", ID: "id1"},
		campaign.Record{Op: campaign.OpNote, Note: "cleanup verified"},
		campaign.Record{Op: campaign.OpBegin, Gen: 2, Instance: "i2"},
		campaign.Record{Op: campaign.OpCreated, Gen: 2, Kind: campaign.KindContainer, Name: "c", ID: "id2"},
	)
	st, err = a.State("camp-1")
	if err != nil || st.Ready || st.LastCleanup != "" || st.Latest().N != 2 || len(st.Live()) != 1 {
		t.Fatalf("generation 2 starting after generation 1's cleanup: %+v %v", st, err)
	}
	appendAll(campaign.Record{Op: campaign.OpNote, Note: "cleanup failed"})
	if st, err = a.State("camp-1"); err != nil || st.LastCleanup != "failed" {
		t.Fatalf("a cleanup of generation 2: %+v %v", st, err)
	}
}

// TestStateNotes: a bring-up stopped between readiness and its
// attestation's verdict is not up (it read as up, and the API served it),
// and a down stopped before it journalled any removal leaves a campaign
// that reads as being removed (it read as up).
func TestStateNotes(t *testing.T) {
	for _, tt := range []struct {
		name                 string
		notes                []string
		up, pending, removal bool
	}{
		{"ready", nil, true, false, false},
		{"attesting", []string{noteReadyAttesting}, false, true, false},
		{"attested_ok", []string{noteReadyAttesting, noteAttestedOK}, true, false, false},
		{"attested_failed", []string{noteReadyAttesting, noteAttestedFailed}, true, false, false},
		{"removal_started", []string{noteReadyAttesting, noteAttestedOK, noteRemovalStarted}, false, false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := &Adapter{StateRoot: t.TempDir()}
			j, err := campaign.OpenJournal(a.CampaignDir("camp-1"))
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			recs := []campaign.Record{
				{Op: campaign.OpBegin, Gen: 1, Instance: "i1"},
				{Op: campaign.OpCreated, Gen: 1, Kind: campaign.KindContainer, Name: "c", ID: "id1"},
			}
			if tt.notes == nil {
				recs = append(recs, campaign.Record{Op: campaign.OpNote, Gen: 1, Note: noteReady})
			}
			for _, n := range tt.notes {
				r := campaign.Record{Op: campaign.OpNote, Gen: 1, Note: n}
				if n == noteRemovalStarted {
					r.Gen = 0 // as the cleanup journals it
				}
				recs = append(recs, r)
			}
			for _, r := range recs {
				if err := j.Append(r); err != nil {
					t.Fatal(err)
				}
			}
			st, err := a.State("camp-1")
			if err != nil || st.Up() != tt.up || st.AttestPending != tt.pending || st.RemovalStarted != tt.removal {
				t.Fatalf("up %v pending %v removal %v (%v), want %v %v %v", st.Up(), st.AttestPending, st.RemovalStarted, err, tt.up, tt.pending, tt.removal)
			}
		})
	}
}
