package store

import (
	"os"
	"reflect"
	"testing"

	"github.com/agentpen/agentpen/campaign"
)

// TestRootReadsWhatOthersWrote: a root that read a campaign's journal
// reads what another root (another process) wrote since: records
// appended, a torn line its crash left (ignored, then cut by this
// root's next open, whose records go on from the cut), and a campaign
// removed and made again under the same id (another file). Each read
// agrees with a fresh root's.
func TestRootReadsWhatOthersWrote(t *testing.T) {
	r, c := newCampaign(t, "camp-1", begun...)
	other, err := OpenRoot(r.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	co, err := other.Open("camp-1")
	if err != nil {
		t.Fatal(err)
	}
	defer co.Close()
	agree := func(what string, want int) {
		t.Helper()
		got, _, gerr := c.Records()
		fresh, err := OpenRoot(r.Path())
		if err != nil {
			t.Fatal(err)
		}
		defer fresh.Close()
		cf, err := fresh.Open("camp-1")
		if err != nil {
			t.Fatal(err)
		}
		defer cf.Close()
		rf, _, ferr := cf.Records()
		if gerr != nil || ferr != nil || len(got) != want || !reflect.DeepEqual(got, rf) {
			t.Fatalf("%s: %d records (%v), a fresh root reads %d (%v), want %d", what, len(got), gerr, len(rf), ferr, want)
		}
	}
	agree("at first", 3)
	j, err := co.OpenJournal()
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Append(campaign.Record{Op: campaign.OpClaim, Gen: 1, Kind: campaign.KindContainer, Name: "w", ID: "w1", Task: "software/median"}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	agree("after another's claim", 4)

	// Another's crash in the middle of an append: a torn line.
	f, err := os.OpenFile(c.JournalPath(), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"v":2,"seq":5,"op":"cla`); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, torn, err := c.Records(); err != nil || torn == nil {
		t.Fatalf("after a torn append: torn %v, %v", torn, err)
	}
	agree("after a torn append", 4)
	j, err = c.OpenJournal()
	if err != nil {
		t.Fatal(err)
	}
	if j.Cut() == nil {
		t.Fatal("the torn line was not cut")
	}
	if err := j.Append(campaign.Record{Op: campaign.OpNote, Note: "after the cut"}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	agree("after the cut", 6) // the cut's note, then ours

	// Removed and made again: another journal of the name.
	if err := os.Remove(c.JournalPath()); err != nil {
		t.Fatal(err)
	}
	j, err = co.OpenJournal()
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Append(campaign.Record{Op: campaign.OpBegin, Gen: 1, Instance: "i2"}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	agree("another journal", 1)
	if recs, _, _ := c.Records(); recs[0].Instance != "i2" {
		t.Fatalf("another journal: %+v", recs[0])
	}
}
