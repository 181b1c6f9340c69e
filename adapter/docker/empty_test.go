package docker

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/adapter/drivertest"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/dockerfake"
	"github.com/agentpen/agentpen/internal/testkit/lifecycletest"
	"github.com/agentpen/agentpen/store"
)

// ghost makes what a create killed before its first record left, before
// creates were one step on disk: campaign id's directory with an empty
// journal and its first spec.
func ghost(t *testing.T, h *drivertest.Harness, id string) {
	t.Helper()
	dir := h.Root.CampaignDir(id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, campaign.JournalFile), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, store.SpecFile(1)), []byte(`{"campaign_id": "`+id+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
}

func listing(t *testing.T, h *drivertest.Harness, id string) store.Listing {
	t.Helper()
	list, err := h.Root.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range list {
		if l.ID == id {
			return l
		}
	}
	t.Fatalf("%s is not listed: %+v", id, list)
	return store.Listing{}
}

// TestDiscardEmpty: the directory of a campaign whose journal holds no
// generation is removed once nothing on the daemon carries its id (a
// dry run says so and removes nothing); one whose id a container still
// carries stays (ErrStillNamed), and so does one whose lock another
// holds (ErrLocked); a campaign with a generation is never touched.
func TestDiscardEmpty(t *testing.T) {
	h, fake := fakeAdapter(t)
	ctx := t.Context()
	ghost(t, h, "ghost-free")
	ghost(t, h, "ghost-named")
	fake.AddContainer(dockerfake.Container{ID: "c0ffee", Name: "x", Labels: map[string]string{campaign.LabelOwner: campaign.OwnerValue, campaign.LabelCampaign: "ghost-named"}})
	journalShape(t, h, "alive", func(x *lifecycletest.History) { x.Begin(1).Op(campaign.OpReady, 1) })

	free := listing(t, h, "ghost-free")
	if free.State.Status != campaign.StatusEmpty {
		t.Fatalf("ghost-free reads %s", free.State.Status)
	}
	if ok, err := h.Adapter.DiscardEmpty(ctx, h.Root, free, true); !ok || err != nil {
		t.Fatalf("dry run: %v %v", ok, err)
	}
	if _, err := os.Stat(free.Path); err != nil {
		t.Fatalf("the dry run removed it: %v", err)
	}
	locks, err := h.Adapter.Locks()
	if err != nil {
		t.Fatal(err)
	}
	held, err := locks.Campaign(ctx, free.Key, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Adapter.DiscardEmpty(ctx, h.Root, free, false); !errors.Is(err, store.ErrLocked) {
		t.Fatalf("under another's lock: %v, want ErrLocked", err)
	}
	held.Unlock()
	if ok, err := h.Adapter.DiscardEmpty(ctx, h.Root, free, false); !ok || err != nil {
		t.Fatalf("discard: %v %v", ok, err)
	}
	if _, err := os.Stat(free.Path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("still there: %v", err)
	}

	named := listing(t, h, "ghost-named")
	if ok, err := h.Adapter.DiscardEmpty(ctx, h.Root, named, false); ok || !errors.Is(err, adapter.ErrStillNamed) {
		t.Fatalf("a ghost whose id a container carries: %v %v, want ErrStillNamed", ok, err)
	}
	if _, err := os.Stat(named.Path); err != nil {
		t.Fatalf("removed: %v", err)
	}

	alive := listing(t, h, "alive")
	if ok, err := h.Adapter.DiscardEmpty(ctx, h.Root, alive, false); ok || err != nil {
		t.Fatalf("a campaign with a generation: %v %v", ok, err)
	}
	// A listing that lied (read empty, has a generation now) is read
	// again under the lock.
	alive.State.Status = campaign.StatusEmpty
	if _, err := h.Adapter.DiscardEmpty(ctx, h.Root, alive, false); err == nil {
		t.Fatal("a campaign with a generation was discarded on a stale listing")
	}
	if c, err := h.Root.Open("alive"); err != nil {
		t.Fatalf("alive: %v", err)
	} else {
		c.Close()
	}
}

// TestSweepCreates: the directory of a create killed before its first
// record (never listed) goes with a sweep, unless its campaign's lock is
// held (a create in flight).
func TestSweepCreates(t *testing.T) {
	h, _ := fakeAdapter(t)
	ctx := t.Context()
	for _, id := range []string{"killed-a", "in-flight"} {
		if _, err := h.Root.Create(id); err != nil { // never closed: killed
			t.Fatal(err)
		}
	}
	locks, err := h.Adapter.Locks()
	if err != nil {
		t.Fatal(err)
	}
	held, err := locks.Campaign(ctx, campaign.Key("in-flight"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock()
	n, err := h.Adapter.SweepCreates(ctx, h.Root)
	if n != 1 || err != nil {
		t.Fatalf("swept %d (%v), want 1", n, err)
	}
	staged, err := h.Root.Staged()
	if err != nil || len(staged) != 1 || staged[0].Key != campaign.Key("in-flight") {
		t.Fatalf("left: %+v %v, want the one in flight", staged, err)
	}
}
