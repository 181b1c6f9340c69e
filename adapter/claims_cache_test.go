package adapter

import (
	"errors"
	"testing"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/fakedriver"
	"github.com/agentpen/agentpen/store"
)

// TestClaimsSeeAnotherProcesssWrites: two engines on one state root and
// one lock base (two agentpen processes) claim from one pool in turn.
// What a root keeps of the journal between claims is never served once
// the other wrote: each claim takes a slot the other did not, a task and
// attempt the other bound is refused, and once the other removed the
// campaign nothing is claimed.
func TestClaimsSeeAnotherProcesssWrites(t *testing.T) {
	d := fakedriver.New(map[string]string{"img": fakeImage})
	locks := t.TempDir()
	a, rootA := fakeEngine(t, d, locks)
	c := fakePool(t, a, rootA, "two", 3)
	b := &Adapter{Driver: d, Getenv: a.Getenv, LockBase: locks}
	rootB, err := store.OpenRoot(rootA.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer rootB.Close()
	cb, err := rootB.Open("two")
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()

	slots := map[int]string{}
	claim := func(e *Adapter, c *store.Campaign, who, attempt string) {
		t.Helper()
		cl, err := e.Claim(t.Context(), c, "software/median", attempt, AttestOptions{})
		if err != nil {
			t.Fatalf("%s's claim %s: %v", who, attempt, err)
		}
		if !cl.Warm {
			t.Fatalf("%s's claim %s: cold, with a slot left", who, attempt)
		}
		if had, ok := slots[cl.Slot]; ok {
			t.Fatalf("%s's claim %s took slot %d, which claim %s took", who, attempt, cl.Slot, had)
		}
		slots[cl.Slot] = attempt
	}
	claim(a, c, "A", "a0")
	claim(b, cb, "B", "b0")
	claim(a, c, "A", "a1") // A's journal read before B's claim is stale
	if _, err := a.Claim(t.Context(), c, "software/median", "b0", AttestOptions{}); !errors.Is(err, ErrTaskClaimed) {
		t.Fatalf("A claims the task and attempt B bound: %v, want ErrTaskClaimed", err)
	}
	recs, _, err := c.Records()
	if err != nil {
		t.Fatalf("the journal after both wrote: %v", err)
	}
	claims := 0
	for _, r := range recs {
		if r.Op == campaign.OpClaim {
			claims++
		}
	}
	if claims != 3 {
		t.Fatalf("%d claim records, want 3", claims)
	}
	if _, _, err := b.Cleanup(t.Context(), cb, campaign.ReasonDown); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Claim(t.Context(), c, "software/median", "a2", AttestOptions{}); !errors.Is(err, ErrNotUp) {
		t.Fatalf("A claims from the campaign B removed: %v, want ErrNotUp", err)
	}
}
