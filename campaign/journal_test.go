package campaign

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func TestJournalRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "campaign")
	j, err := openJournalDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	steps := []Record{
		{Op: OpIntent, Kind: KindNetwork, Role: RoleNetwork, Name: "net", Labels: map[string]string{LabelCampaign: "c"}},
		{Op: OpCreated, Kind: KindNetwork, Name: "net", ID: "n1"},
		{Op: OpIntent, Kind: KindContainer, Role: RoleServer, Name: "srv"},
		{Op: OpIntent, Kind: KindContainer, Role: RoleWork, Name: "ws"},
		{Op: OpCreated, Kind: KindContainer, Name: "ws", ID: "c2"},
		{Op: OpRemoved, Kind: KindContainer, ID: "c2"},
	}
	for _, r := range steps {
		if err := j.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if err := j.Append(Record{Op: OpNote}); err == nil {
		t.Fatal("append after close succeeded")
	}
	st, _ := os.Stat(j.Path())
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("journal mode %v", st.Mode())
	}
	recs, err := readJournalPath(j.Path())
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		if r.Seq != i+1 || r.Time.IsZero() {
			t.Fatalf("record %d: seq %d time %v", i, r.Seq, r.Time)
		}
	}
	res := Resources(recs)
	want := []Resource{
		{Kind: KindNetwork, Role: RoleNetwork, Name: "net", ID: "n1"},
		{Kind: KindContainer, Role: RoleServer, Name: "srv"},
		{Kind: KindContainer, Role: RoleWork, Name: "ws", ID: "c2", Removed: true},
	}
	if len(res) != len(want) {
		t.Fatalf("resources %+v", res)
	}
	for i := range want {
		if res[i].Kind != want[i].Kind || res[i].Name != want[i].Name || res[i].ID != want[i].ID || res[i].Removed != want[i].Removed || res[i].Role != want[i].Role {
			t.Fatalf("resource %d = %+v, want %+v", i, res[i], want[i])
		}
	}
	// Reopening continues the sequence.
	j2, err := openJournalDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	if err := j2.Append(Record{Op: OpNote, Note: "again"}); err != nil {
		t.Fatal(err)
	}
	recs, _ = readJournalPath(j2.Path())
	if last := recs[len(recs)-1]; last.Seq != len(steps)+1 {
		t.Fatalf("seq after reopen = %d", last.Seq)
	}
}

func TestJournalConcurrentAppend(t *testing.T) {
	j, err := openJournalDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			if err := j.Append(Record{Op: OpIntent, Kind: KindContainer, Name: fmt.Sprint("c", i)}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	recs, err := readJournalPath(j.Path())
	if err != nil || len(recs) != 16 {
		t.Fatalf("%v, %d records", err, len(recs))
	}
	seen := map[int]bool{}
	for _, r := range recs {
		if seen[r.Seq] {
			t.Fatalf("duplicate seq %d", r.Seq)
		}
		seen[r.Seq] = true
	}
}

// TestGenerations: a name created again in a later generation is a new
// resource (the fold used to key by kind and name and kept the old
// generation's removed mark, so the second down removed nothing).
func TestGenerations(t *testing.T) {
	recs := []Record{
		{Op: OpBegin, Gen: 1, Instance: "n1"},
		{Op: OpIntent, Gen: 1, Kind: KindNetwork, Name: "net"},
		{Op: OpCreated, Gen: 1, Kind: KindNetwork, Name: "net", ID: "N1"},
		{Op: OpIntent, Gen: 1, Kind: KindDir, Name: "/r/k/agent-x"},
		{Op: OpCreated, Gen: 1, Kind: KindDir, Name: "/r/k/agent-x", ID: "/r/k/agent-x"},
		{Op: OpIntent, Gen: 1, Kind: KindContainer, Name: "srv"}, // never got an id
		{Op: OpRemoved, Gen: 1, Kind: KindNetwork, ID: "N1"},
		{Op: OpRemoved, Gen: 1, Kind: KindDir, ID: "/r/k/agent-x"},
		{Op: OpRemoved, Gen: 1, Kind: KindContainer, Name: "srv"}, // confirmed never created
		{Op: OpBegin, Gen: 2, Instance: "n2"},
		{Op: OpIntent, Gen: 2, Kind: KindNetwork, Name: "net"},
		{Op: OpCreated, Gen: 2, Kind: KindNetwork, Name: "net", ID: "N2"},
		{Op: OpIntent, Gen: 2, Kind: KindDir, Name: "/r/k/agent-x"},
		{Op: OpCreated, Gen: 2, Kind: KindDir, Name: "/r/k/agent-x", ID: "/r/k/agent-x"},
		{Op: OpIntent, Gen: 2, Kind: KindContainer, Name: "srv"},
		{Op: OpCreated, Gen: 2, Kind: KindContainer, Name: "srv", ID: "C2"},
		{Op: OpCreated, Gen: 2, Kind: KindContainer, Name: "srv", ID: "C2", Note: "adopted twice"},
		{Op: OpCreated, Gen: 2, Kind: KindContainer, Name: "late", ID: "C3", Note: "found by instance label"},
	}
	gens := Generations(recs)
	if len(gens) != 2 || gens[0].Instance != "n1" || gens[1].Instance != "n2" {
		t.Fatalf("generations %+v", gens)
	}
	if live := gens[0].Live(); len(live) != 0 {
		t.Fatalf("generation 1 live: %+v", live)
	}
	var got []string
	for _, r := range gens[1].Live() {
		got = append(got, string(r.Kind)+":"+r.ID)
	}
	want := []string{"network:N2", "dir:/r/k/agent-x", "container:C2", "container:C3"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("generation 2 live = %v, want %v", got, want)
	}
	if all := Resources(recs); len(all) != 7 {
		t.Fatalf("Resources: %d, want 7", len(all))
	}
}

// TestOwnerOfGenerations: each generation has the owner its begin
// record names, and the lifecycle's latest generation is the one that
// counts (the operator's re-create of a removed id takes it over; one
// agentpen up made has none).
func TestOwnerOfGenerations(t *testing.T) {
	recs := []Record{
		{Op: OpBegin, Gen: 1, Instance: "n1", Owner: "team-a"},
		{Op: OpBegin, Gen: 2, Instance: "n2", Owner: "operator"},
		{Op: OpBegin, Gen: 3, Instance: "n3"},
	}
	for n := 1; n <= 3; n++ {
		lc := Fold(recs[:n])
		if got, want := lc.Latest().Owner, recs[n-1].Owner; got != want {
			t.Errorf("after generation %d: owner %q, want %q", n, got, want)
		}
		if got := lc.Generations[0].Owner; got != "team-a" {
			t.Errorf("after generation %d: generation 1's owner %q", n, got)
		}
	}
}

// TestGenerationsUnknownIDRemoval: a removal of an id no generation
// created changes nothing.
func TestGenerationsUnknownIDRemoval(t *testing.T) {
	gens := Generations([]Record{
		{Op: OpBegin, Gen: 1, Instance: "n"},
		{Op: OpIntent, Gen: 1, Kind: KindContainer, Name: "a"},
		{Op: OpCreated, Gen: 1, Kind: KindContainer, Name: "a", ID: "A"},
		{Op: OpRemoved, Gen: 1, Kind: KindContainer, ID: "B"},
		{Op: OpRemoved, Gen: 2, Kind: KindContainer, ID: "A"},
		{Op: OpRemoved, Gen: 1, Kind: KindNetwork, ID: "A"},
	})
	if live := gens[0].Live(); len(live) != 1 || live[0].ID != "A" {
		t.Fatalf("live = %+v, want A still live", live)
	}
}

// TestJournalAppendAll: records appended in one batch, between single
// appends, follow the chain one by one (a reader and a reopened journal
// take them), and the observer sees each once, in order, after the sync.
func TestJournalAppendAll(t *testing.T) {
	dir := t.TempDir()
	j, err := openJournalDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var seen []int
	j.Observe(func(r Record) { seen = append(seen, r.Seq) })
	if err := j.Append(Record{Op: OpNote, Note: "one"}); err != nil {
		t.Fatal(err)
	}
	var batch []Record
	for i := range 5 {
		batch = append(batch, Record{Op: OpClaim, Gen: 1, Kind: KindContainer, Role: RoleWork, Name: fmt.Sprint("ws", i), ID: fmt.Sprint("c", i), Task: "t", Attempt: fmt.Sprint(i)})
	}
	if err := j.AppendAll(batch); err != nil {
		t.Fatal(err)
	}
	if err := j.AppendAll(nil); err != nil {
		t.Fatalf("an empty batch: %v", err)
	}
	if err := j.Append(Record{Op: OpNote, Note: "after"}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	recs, err := readJournalPath(j.Path())
	if err != nil || len(recs) != 7 {
		t.Fatalf("%v, %d records, want 7", err, len(recs))
	}
	for i, r := range recs {
		if r.Seq != i+1 {
			t.Errorf("record %d: seq %d", i, r.Seq)
		}
	}
	if recs[3].Name != "ws2" || recs[3].Attempt != "2" {
		t.Errorf("record 4: %+v, want the batch's third", recs[3])
	}
	if fmt.Sprint(seen) != "[1 2 3 4 5 6 7]" {
		t.Errorf("observed %v", seen)
	}
	j2, err := openJournalDir(dir)
	if err != nil {
		t.Fatalf("reopen after a batch: %v", err)
	}
	defer j2.Close()
	if err := j2.Append(Record{Op: OpNote}); err != nil {
		t.Fatal(err)
	}
	if recs, err := readJournalPath(j2.Path()); err != nil || recs[len(recs)-1].Seq != 8 {
		t.Fatalf("after reopen: %v", err)
	}
}
