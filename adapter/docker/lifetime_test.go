package docker

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/adapter/drivertest"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/lifecycletest"
	"github.com/agentpen/agentpen/store"
)

// journalShape writes the records of a lifecycletest shape (its run
// directories under the adapter's run base) as campaign id's journal.
func journalShape(t *testing.T, h *drivertest.Harness, id string, build func(*lifecycletest.History)) *lifecycletest.History {
	t.Helper()
	hist := lifecycletest.New(lifecycletest.Spec(id), campaign.PlanOptions{}, dk(h.Adapter).runBase())
	build(hist)
	c, err := h.Root.Create(id)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.WriteSpec(1, lifecycletest.Spec(id)); err != nil {
		t.Fatal(err)
	}
	j, err := c.OpenJournal()
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for _, r := range hist.Records {
		if err := j.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	return hist
}

// TestReconcile: on its journal alone, a bring-up that did not finish is
// rolled back (and journalled so), a removal that did not finish is
// finished with its own reason, a campaign past its deadline is removed
// (ttl), one within it is left; with ExpiryOnly only the last kind is
// removed; a campaign another process holds is left alone (ErrLocked).
// Each removal's cleanup report says why.
func TestReconcile(t *testing.T) {
	h, _ := fakeAdapter(t)
	now := time.Now()
	cases := []struct {
		id, reason string
		expiryOnly bool
		build      func(*lifecycletest.History)
		status     campaign.Status
	}{
		{"killed", campaign.ReasonRollback, false, func(x *lifecycletest.History) { x.Begin(1) }, campaign.StatusRemoved},
		{"down-cut", campaign.ReasonDown, false, func(x *lifecycletest.History) {
			x.Begin(1).Op(campaign.OpReady, 1).Removal(campaign.ReasonDown)
		}, campaign.StatusRemoved},
		{"expired", campaign.ReasonTTL, false, func(x *lifecycletest.History) {
			x.Begin(1)
			x.Records = append(x.Records, campaign.Lifetime{Accepted: now.Add(-time.Hour), TTL: time.Minute}.Record(1))
			x.Op(campaign.OpReady, 1)
		}, campaign.StatusRemoved},
		{"within", "", false, func(x *lifecycletest.History) {
			x.Begin(1)
			x.Records = append(x.Records, campaign.Lifetime{Accepted: now, TTL: time.Hour}.Record(1))
			x.Op(campaign.OpReady, 1)
		}, campaign.StatusReady},
		{"killed-expiry-only", "", true, func(x *lifecycletest.History) { x.Begin(1) }, campaign.StatusStartingOrFailed},
		// Killed after its first record, before its first create: rolled
		// back all the same, and the journal says why (it read removed,
		// with no removal of its own).
		{"killed-before-first-create", campaign.ReasonRollback, false, func(x *lifecycletest.History) { x.BeginOnly(1) }, campaign.StatusRemoved},
	}
	for _, c := range cases {
		t.Run(c.id, func(t *testing.T) {
			journalShape(t, h, c.id, c.build)
			sc, err := h.Root.Open(c.id)
			if err != nil {
				t.Fatal(err)
			}
			defer sc.Close()
			res, err := h.Reconcile(t.Context(), sc, adapter.ReconcileOptions{Now: now, ExpiryOnly: c.expiryOnly})
			if err != nil {
				t.Fatal(err)
			}
			st, _ := sc.Read()
			if res.Reason != c.reason || st.Status != c.status {
				t.Fatalf("reason %q, status %s; want %q, %s", res.Reason, st.Status, c.reason, c.status)
			}
			if c.reason == "" {
				if res.Report != nil {
					t.Fatalf("a report for nothing done: %+v", res.Report)
				}
				return
			}
			if res.Report == nil || !res.Report.OK || res.Report.Reason != c.reason || st.LastRemoval != c.reason {
				t.Fatalf("report %+v, journal's last removal %q", res.Report, st.LastRemoval)
			}
			if (c.reason == campaign.ReasonRollback) != (st.RollbackNote != "") {
				t.Fatalf("rollback note %q", st.RollbackNote)
			}
		})
	}
	// Held by another process: left alone.
	journalShape(t, h, "held", func(x *lifecycletest.History) { x.Begin(1) })
	sc, err := h.Root.Open("held")
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	locks, err := h.Locks()
	if err != nil {
		t.Fatal(err)
	}
	lock, err := locks.Campaign(t.Context(), sc.Key, store.DefaultLockWait)
	if err != nil {
		t.Fatal(err)
	}
	// The lock is taken per open file: another open of it is another
	// holder, as another process would be.
	res, err := h.Reconcile(t.Context(), sc, adapter.ReconcileOptions{Now: now})
	lock.Unlock()
	if !errors.Is(err, store.ErrLocked) || res.Reason != "" {
		t.Fatalf("a campaign held elsewhere: %+v %v", res, err)
	}
	if st, _ := sc.Read(); st.Status != campaign.StatusStartingOrFailed {
		t.Fatalf("touched: %s", st.Status)
	}
}

// TestLastActivity: the campaign's last activity is the latest time of
// its live workspaces' sockets, read below the run base without following
// a link: a link (or a file) where a socket belongs tells nothing.
func TestLastActivity(t *testing.T) {
	h, _ := fakeAdapter(t)
	hist := journalShape(t, h, "act", func(x *lifecycletest.History) { x.Begin(1).Op(campaign.OpReady, 1) })
	var dirs []string
	for _, r := range campaign.Resources(hist.Records) {
		if r.Kind == campaign.KindDir && r.Role == campaign.RoleWork {
			dirs = append(dirs, r.ID)
			if err := os.MkdirAll(r.ID, 0o700); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(dirs) != 2 {
		t.Fatalf("dirs %v", dirs)
	}
	sc, err := h.Root.Open("act")
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	if got, err := h.LastActivity(sc); err != nil || !got.IsZero() {
		t.Fatalf("no sockets: %v %v", got, err)
	}
	t1 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	sock := filepath.Join(dirs[0], "wb.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	os.Chtimes(sock, t1, t1)
	// The other workspace's socket is a link to a socket with a later
	// time: not followed.
	later := filepath.Join(t.TempDir(), "later.sock")
	l2, err := net.Listen("unix", later)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	os.Chtimes(later, t1.Add(time.Hour), t1.Add(time.Hour))
	if err := os.Symlink(later, filepath.Join(dirs[1], "wb.sock")); err != nil {
		t.Fatal(err)
	}
	if got, err := h.LastActivity(sc); err != nil || !got.Equal(t1) {
		t.Fatalf("last activity %v (%v), want %v", got, err, t1)
	}
	// A run directory that is itself a link: not followed either.
	os.Remove(sock)
	os.Remove(dirs[0])
	if err := os.Symlink(filepath.Dir(later), dirs[0]); err != nil {
		t.Fatal(err)
	}
	if got, _ := h.LastActivity(sc); !got.IsZero() {
		t.Fatalf("through a linked run directory: %v", got)
	}
}
