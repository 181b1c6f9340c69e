package docker_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/agentpen/agentpen/adapter/drivertest"
	"github.com/agentpen/agentpen/campaign"
)

// failingStart is the real driver, but the start of every pooled
// workspace's container after the first `ok` ones fails.
type failingStart struct {
	driver.Driver
	ok, starts atomic.Int32
}

func (f *failingStart) Start(ctx context.Context, o *driver.Object) error {
	if o.Kind == campaign.KindContainer && o.Labels[campaign.LabelPoolSlot] != "" && f.starts.Add(1) > f.ok.Load() {
		return driver.Kind("injected: the container did not start", driver.ErrRefused)
	}
	return f.Driver.Start(ctx, o)
}

// TestRefillDropsASlotThatDidNotStart: a pooled workspace whose container
// was made but did not start is removed by its journalled id, not left
// made and stopped, where the campaign's next attestation would find a
// container of it not running and fail the whole campaign closed. The
// refill keeps the slots that came up, the campaign attests ok after it,
// and the next refill makes the pool whole.
func TestRefillDropsASlotThatDidNotStart(t *testing.T) {
	d, cli := realDocker(t)
	img := imageID(t, cli, workbenchImage)
	fs := &failingStart{Driver: d}
	fs.ok.Store(1 << 20) // the bring-up's pool starts
	getenv := func(k string) string {
		return map[string]string{campaign.DefaultAPIKeyEnv: "pool-key-5c0e7a91d2b84f63a1e0"}[k]
	}
	h := drivertest.NewHarness(t, &adapter.Adapter{Driver: fs, Getenv: getenv, ReadyTimeout: 60 * time.Second}, t.TempDir())
	ctx := t.Context()
	id := uniqueCampaign(t)
	t.Cleanup(func() { forceRemove(cli, id) })
	s := workbenchSpec(id, img, e2eTasks[:1])
	s.Pool = 2
	if _, rep, err := h.BringUpAttested(ctx, s, adapter.AttestOptions{}); err != nil || !rep.OK {
		t.Fatalf("bring-up: %v %+v", err, rep)
	}
	for i := range 2 {
		if _, err := h.Claim(ctx, id, e2eTasks[i], fmt.Sprint("c", i)); err != nil {
			t.Fatal(err)
		}
	}
	// The refill makes two; the second's start fails.
	fs.starts.Store(0)
	fs.ok.Store(1)
	n, err := h.Refill(ctx, id)
	if n != 1 {
		t.Fatalf("refill with one start failing: %d up, %v; want 1", n, err)
	}
	rep, err := h.Attest(ctx, id, adapter.AttestOptions{})
	if err != nil {
		t.Fatalf("the campaign after a slot failed to start: %v", err)
	}
	if !rep.OK {
		t.Fatalf("the campaign after a slot failed to start does not attest: %v", rep.FailureLines())
	}
	stopped := 0
	for _, r := range campaign.Resources(h.Records(t, id)) {
		if r.Kind == campaign.KindContainer && r.ID != "" && !r.Removed {
			if c, err := cli.ContainerInspect(ctx, r.ID); err == nil && !c.State.Running {
				stopped++
			}
		}
	}
	if stopped != 0 {
		t.Fatalf("%d live journalled containers are not running", stopped)
	}
	fs.ok.Store(1 << 20)
	if n, err := h.Refill(ctx, id); err != nil || n != 1 {
		t.Fatalf("the next refill: %d made, %v; want the missing one", n, err)
	}
	if st, err := h.State(id); err != nil || len(st.PoolReady()) != 2 {
		t.Fatalf("the pool after: %d ready, %v", len(st.PoolReady()), err)
	}
}
