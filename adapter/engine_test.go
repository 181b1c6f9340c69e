package adapter

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/cleanup"
	"github.com/agentpen/agentpen/internal/testkit/fakedriver"
	"github.com/agentpen/agentpen/store"
)

const fakeImage = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

var fakeEnv = map[string]string{campaign.DefaultAPIKeyEnv: "k3y-for-the-fake-driver-0123456789"}

// fakeEngine is an engine on an in-memory runtime, with a state root and a
// lock base of its own.
func fakeEngine(t testing.TB, d *fakedriver.Driver, lockBase string) (*Adapter, *store.Root) {
	t.Helper()
	root, err := store.CreateRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return &Adapter{Driver: d, Getenv: func(k string) string { return fakeEnv[k] }, LockBase: lockBase}, root
}

func fakeUp(t *testing.T, a *Adapter, root *store.Root, id string, n int) *Campaign {
	t.Helper()
	spec := campaign.CampaignSpec{CampaignID: id, Server: campaign.ServerSpec{Image: fakeImage}}
	for i := range n {
		spec.Workspaces = append(spec.Workspaces, campaign.WorkspaceSpec{TaskID: "software/median", AttemptID: fmt.Sprint(i), Image: fakeImage})
	}
	opts, err := root.PlanOptions()
	if err != nil {
		t.Fatal(err)
	}
	p, err := campaign.Validate(spec, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	c, err := a.BringUp(t.Context(), root, p)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestRemovalObservesAChangedResourceAgain: a resource that changes between
// its observation and its removal (the runtime refuses the removal's
// precondition) is observed and decided again: relabelled, it is no
// longer the campaign's and is left alone, and the report says so.
func TestRemovalObservesAChangedResourceAgain(t *testing.T) {
	d := fakedriver.New(map[string]string{"img": fakeImage})
	a, root := fakeEngine(t, d, t.TempDir())
	a.CleanupTimeout = 5 * time.Second // a removal that keeps failing ends
	c := fakeUp(t, a, root, "changed", 1)
	ws := c.Workspaces[0].ContainerID
	relabelled := false
	d.RemoveFunc = func(ctx context.Context, r campaign.Resource, seen cleanup.Observation) error {
		if r.ID == ws && !relabelled {
			relabelled = true
			ob, _ := d.Runtime.Get(ws)
			l := maps.Clone(ob.Labels)
			l[campaign.LabelInstance] = "another"
			d.Runtime.Relabel(ws, l) // between the observation and the removal
		}
		return d.Runtime.Remove(r.ID, seen.Version)
	}
	sc, err := root.Open("changed")
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	rep, _, err := a.Cleanup(t.Context(), sc, campaign.ReasonDown)
	if err == nil || rep.OK {
		t.Fatalf("a removal that left the relabelled %s says verified", ws)
	}
	if _, ok := d.Runtime.Get(ws); !ok {
		t.Fatalf("the relabelled %s was removed", ws)
	}
	i := slices.IndexFunc(rep.LeftAlone, func(e cleanup.Entry) bool { return e.ID == ws })
	if i < 0 {
		t.Fatalf("the report does not leave %s alone: %+v", ws, rep.LeftAlone)
	}
	// Decided again (not ours), not a removal that kept failing.
	if why := rep.LeftAlone[i].Reason; !strings.Contains(why, string(cleanup.NotOurs)) || strings.Contains(why, "version") {
		t.Fatalf("%s left alone because %q, want a new decision that it is not ours", ws, why)
	}
}

// TestUIDBlocksApartAcrossEngines: two engines on one runtime (two state
// roots, one lock base) claim uid blocks apart while both hold them, and
// a block a container carries is never claimed again.
func TestUIDBlocksApartAcrossEngines(t *testing.T) {
	d := fakedriver.New(map[string]string{"img": fakeImage})
	locks := t.TempDir()
	a, _ := fakeEngine(t, d, locks)
	b, rootB := fakeEngine(t, d, locks)
	mine, claimA, err := a.claimUIDBlocks(t.Context(), 2)
	if err != nil {
		t.Fatal(err)
	}
	theirs, claimB, err := b.claimUIDBlocks(t.Context(), 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, base := range theirs {
		if slices.Contains(mine, base) {
			t.Fatalf("both engines claimed uid block %d (%v and %v)", base, mine, theirs)
		}
	}
	claimA.release()
	claimB.release()
	c := fakeUp(t, b, rootB, "blocks", 2)
	again, claim, err := a.claimUIDBlocks(t.Context(), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer claim.release()
	for _, w := range c.Workspaces {
		if slices.Contains(again, w.UIDBase) {
			t.Fatalf("uid block %d of a live workspace claimed again: %v", w.UIDBase, again)
		}
	}
}

var _ driver.Driver = (*fakedriver.Driver)(nil)

// TestAnotherRuntimesCampaignIsRefused: a campaign brought up on another
// runtime (its daemon record names another identity) is neither removed,
// verified nor served here: its ids mean nothing to this driver, whose
// "no such resource" would read as removed.
func TestAnotherRuntimesCampaignIsRefused(t *testing.T) {
	d := fakedriver.New(map[string]string{"img": fakeImage})
	a, root := fakeEngine(t, d, t.TempDir())
	fakeUp(t, a, root, "elsewhere", 1)
	sc, err := root.Open("elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	// The same state root, another runtime.
	other := fakedriver.New(map[string]string{"img": fakeImage})
	other.InfoFunc = func(i driver.Info) driver.Info { i.Runtime.ID = "another-runtime"; return i }
	b := &Adapter{Driver: other, Getenv: a.Getenv, LockBase: t.TempDir()}
	if _, _, err := b.Cleanup(t.Context(), sc, campaign.ReasonDown); !errors.Is(err, ErrOtherRuntime) {
		t.Fatalf("cleanup on another runtime: %v", err)
	}
	if _, err := b.Verify(t.Context(), sc); !errors.Is(err, ErrOtherRuntime) {
		t.Fatalf("verify on another runtime: %v", err)
	}
	if _, err := b.Load(sc); !errors.Is(err, ErrOtherRuntime) {
		t.Fatalf("load on another runtime: %v", err)
	}
	// Its own runtime removes it.
	if rep, _, err := a.Cleanup(t.Context(), sc, campaign.ReasonDown); err != nil || !rep.OK {
		t.Fatalf("cleanup on its runtime: %v", err)
	}
}

// TestUpRefusesAnUnattestableRuntime: on a runtime whose campaigns the
// attestation cannot judge, Up (the fail-closed policy) refuses before
// anything is made: no object on the runtime, no campaign in the state
// root. It used to bring the campaign up only to remove it.
func TestUpRefusesAnUnattestableRuntime(t *testing.T) {
	d := fakedriver.New(map[string]string{"img": fakeImage})
	d.InfoFunc = func(i driver.Info) driver.Info { i.Capabilities.Attestable = false; return i }
	a, root := fakeEngine(t, d, t.TempDir())
	opts, err := root.PlanOptions()
	if err != nil {
		t.Fatal(err)
	}
	spec := campaign.CampaignSpec{CampaignID: "unattestable", Server: campaign.ServerSpec{Image: fakeImage},
		Workspaces: []campaign.WorkspaceSpec{{TaskID: "software/median", Image: fakeImage}}}
	p, err := campaign.Validate(spec, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Up(t.Context(), root, p, UpOptions{})
	if !errors.Is(err, ErrUnattestable) || !strings.Contains(err.Error(), "nothing was made") {
		t.Fatalf("Up on an unattestable runtime: %v", err)
	}
	if res == nil || res.Campaign != nil {
		t.Fatalf("result %+v, want no campaign", res)
	}
	if objs := d.Runtime.Objects(); len(objs) != 0 {
		t.Fatalf("the runtime holds %d objects after the refusal", len(objs))
	}
	if _, err := root.Open("unattestable"); !errors.Is(err, store.ErrNoCampaign) {
		t.Fatalf("the state root after the refusal: %v, want no campaign", err)
	}
}
