package adapter

import (
	"testing"
	"time"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/fakedriver"
	"github.com/agentpen/agentpen/store"
)

// fakeUpFor brings a campaign of one workspace up with lifetime l.
func fakeUpFor(t *testing.T, a *Adapter, root *store.Root, id string, l campaign.Lifetime) *store.Campaign {
	t.Helper()
	spec := campaign.CampaignSpec{CampaignID: id, Server: campaign.ServerSpec{Image: fakeImage},
		Workspaces: []campaign.WorkspaceSpec{{TaskID: "software/median", AttemptID: "0", Image: fakeImage}}}
	opts, err := root.PlanOptions()
	if err != nil {
		t.Fatal(err)
	}
	p, err := campaign.Validate(spec, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	p.Lifetime = l
	if _, err := a.BringUp(t.Context(), root, p); err != nil {
		t.Fatal(err)
	}
	c, err := root.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestReconcileLauncherGone: a campaign tied to its launcher is removed,
// reason launcher_gone, by an expiry whose caller last saw the launcher
// its launcher timeout ago; not a moment before, not when the caller
// never saw it (agentpen reconcile), and not when it is not tied.
func TestReconcileLauncherGone(t *testing.T) {
	d := fakedriver.New(map[string]string{"img": fakeImage})
	a, root := fakeEngine(t, d, t.TempDir())
	now := time.Now()
	tied := fakeUpFor(t, a, root, "tied", campaign.Lifetime{Accepted: now, TTL: time.Hour, Launcher: 30 * time.Second})
	loose := fakeUpFor(t, a, root, "loose", campaign.Lifetime{Accepted: now, TTL: time.Hour})
	for _, c := range []struct {
		name string
		c    *store.Campaign
		opts ReconcileOptions
	}{
		{"before", tied, ReconcileOptions{Now: now.Add(time.Minute), ExpiryOnly: true, LauncherSeen: now.Add(31 * time.Second)}},
		{"never_seen", tied, ReconcileOptions{Now: now.Add(time.Minute), ExpiryOnly: true}},
		{"reconcile_command", tied, ReconcileOptions{Now: now.Add(time.Minute), LauncherSeen: now}},
		{"not_tied", loose, ReconcileOptions{Now: now.Add(time.Minute), ExpiryOnly: true, LauncherSeen: now}},
	} {
		if res, err := a.Reconcile(t.Context(), c.c, c.opts); err != nil || res.Reason != "" {
			t.Fatalf("%s: %+v %v, want nothing done", c.name, res, err)
		}
	}
	res, err := a.Reconcile(t.Context(), tied, ReconcileOptions{Now: now.Add(time.Minute), ExpiryOnly: true, LauncherSeen: now.Add(30 * time.Second)})
	if err != nil || res.Reason != campaign.ReasonLauncherGone || res.Report == nil || !res.Report.OK || res.Report.Reason != campaign.ReasonLauncherGone {
		t.Fatalf("gone: %+v %v", res, err)
	}
	if st, err := tied.Read(); err != nil || st.Status != campaign.StatusRemoved || st.LastRemoval != campaign.ReasonLauncherGone {
		t.Fatalf("after: %v %v", st.Status, err)
	}
}

// TestWarn: a warning is journalled once per deadline, lead before it,
// and only for a campaign that is up.
func TestWarn(t *testing.T) {
	d := fakedriver.New(map[string]string{"img": fakeImage})
	a, root := fakeEngine(t, d, t.TempDir())
	now := time.Now()
	c := fakeUpFor(t, a, root, "warned", campaign.Lifetime{Accepted: now, TTL: time.Hour})
	count := func() int {
		recs, _, err := c.Records()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range recs {
			if r.Op == campaign.OpExpiring {
				n++
			}
		}
		return n
	}
	if _, due, err := a.Warn(t.Context(), c, now.Add(58*time.Minute), time.Minute); due || err != nil || count() != 0 {
		t.Fatalf("two minutes before: due %v %v, %d warnings", due, err, count())
	}
	for i := range 2 {
		e, due, err := a.Warn(t.Context(), c, now.Add(59*time.Minute+time.Duration(i)*time.Second), time.Minute)
		if err != nil || due != (i == 0) || count() != 1 || due && (e.Reason != campaign.ReasonTTL || !e.Deadline.Equal(now.Add(time.Hour))) {
			t.Fatalf("warn %d: %+v due %v %v, %d warnings", i, e, due, err, count())
		}
	}
	if _, _, err := a.Cleanup(t.Context(), c, campaign.ReasonDelete); err != nil {
		t.Fatal(err)
	}
	if _, due, err := a.Warn(t.Context(), c, now.Add(59*time.Minute+30*time.Second), time.Hour); due || err != nil {
		t.Fatalf("removed: due %v %v", due, err)
	}
}
