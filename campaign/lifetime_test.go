package campaign_test

import (
	"errors"
	"testing"
	"time"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/lifecycletest"
)

// TestReconcileReason: what reconciling does with every journal shape
// (no lifetime): a bring-up that never finished is rolled back, a
// removal that did not finish is finished with the reason it began with,
// and a campaign that is up or removed is left alone.
func TestReconcileReason(t *testing.T) {
	want := map[string]string{
		"killed_create":               campaign.ReasonRollback,
		"killed_attesting":            campaign.ReasonRollback,
		"killed_before_first_create":  campaign.ReasonRollback,
		"removal_started":             campaign.ReasonDown,
		"removal_interrupted":         campaign.ReasonReconcile, // removed with no removal_started
		"cleanup_failed":              campaign.ReasonDelete,
		"cleanup_failed_nothing_live": campaign.ReasonDown,
		"rollback_not_verified":       campaign.ReasonRollback,
		"earlier_generation_live":     campaign.ReasonReconcile,
	}
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, sh := range lifecycletest.Shapes {
		t.Run(sh.Name, func(t *testing.T) {
			h := lifecycletest.New(lifecycletest.Spec("camp"), campaign.PlanOptions{}, "/run/x")
			sh.Build(h)
			if got := campaign.Fold(h.Records).ReconcileReason(now, time.Time{}); got != want[sh.Name] {
				t.Fatalf("reconcile %q, want %q", got, want[sh.Name])
			}
		})
	}
}

// TestDue: a campaign that is up with a lifetime is due for removal at
// its deadline (ttl) or once idle for its timeout since it was last
// active, its readiness or its lifetime's change, whichever is latest;
// not a moment before, and next says when to ask again. One that is not
// up, or has no lifetime, is never due.
func TestDue(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	up := func(l campaign.Lifetime) campaign.Lifecycle {
		h := lifecycletest.New(lifecycletest.Spec("camp"), campaign.PlanOptions{}, "/run/x")
		h.Begin(1)
		recs := append(h.Records, l.Record(1), campaign.Record{Op: campaign.OpAttesting, Gen: 1, Time: t0.Add(10 * time.Second)},
			campaign.Record{Op: campaign.OpAttested, Gen: 1, Status: campaign.AttestOK, Report: "a", Digest: "d"})
		recs[len(recs)-3].Time = t0
		return campaign.Fold(recs)
	}
	ttl := up(campaign.Lifetime{Accepted: t0, TTL: 60 * time.Second})
	if ttl.Lifetime.Expires() != t0.Add(time.Minute) || ttl.ReadyAt != t0.Add(10*time.Second) {
		t.Fatalf("folded lifetime %+v, ready at %v", ttl.Lifetime, ttl.ReadyAt)
	}
	for _, c := range []struct {
		name       string
		lc         campaign.Lifecycle
		now, last  time.Time
		reason     string
		next       time.Time
		reconciled string
	}{
		{"ttl_before", ttl, t0.Add(59 * time.Second), time.Time{}, "", t0.Add(time.Minute), ""},
		{"ttl_at", ttl, t0.Add(time.Minute), time.Time{}, campaign.ReasonTTL, time.Time{}, campaign.ReasonTTL},
		{"idle_from_readiness", up(campaign.Lifetime{Accepted: t0, Idle: 30 * time.Second}), t0.Add(39 * time.Second), time.Time{}, "", t0.Add(40 * time.Second), ""},
		{"idle_at", up(campaign.Lifetime{Accepted: t0, Idle: 30 * time.Second}), t0.Add(40 * time.Second), time.Time{}, campaign.ReasonIdle, time.Time{}, campaign.ReasonIdle},
		{"idle_activity_later", up(campaign.Lifetime{Accepted: t0, Idle: 30 * time.Second}), t0.Add(40 * time.Second), t0.Add(20 * time.Second), "", t0.Add(50 * time.Second), ""},
		{"idle_before_ttl", up(campaign.Lifetime{Accepted: t0, TTL: time.Hour, Idle: 30 * time.Second}), t0.Add(time.Second), time.Time{}, "", t0.Add(40 * time.Second), ""},
		{"ttl_before_idle", up(campaign.Lifetime{Accepted: t0, TTL: 20 * time.Second, Idle: time.Hour}), t0.Add(time.Second), time.Time{}, "", t0.Add(20 * time.Second), ""},
		{"no_lifetime", up(campaign.Lifetime{}), t0.Add(1000 * time.Hour), time.Time{}, "", time.Time{}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			reason, next := c.lc.Due(c.now, c.last)
			if reason != c.reason || !next.Equal(c.next) {
				t.Fatalf("due %q next %v, want %q next %v", reason, next, c.reason, c.next)
			}
			if got := c.lc.ReconcileReason(c.now, c.last); got != c.reconciled {
				t.Fatalf("reconcile %q, want %q", got, c.reconciled)
			}
		})
	}
	// An extension is the latest lifetime; an idle timeout counts from no
	// earlier than it.
	h := lifecycletest.New(lifecycletest.Spec("camp"), campaign.PlanOptions{}, "/run/x")
	h.Begin(1)
	ext := campaign.Lifetime{Accepted: t0, TTL: 2 * time.Hour, Idle: 30 * time.Second}.Record(1)
	ext.Time = t0.Add(time.Hour)
	recs := append(h.Records, campaign.Lifetime{Accepted: t0, TTL: time.Hour}.Record(1), campaign.Record{Op: campaign.OpReady, Gen: 1, Time: t0}, ext)
	lc := campaign.Fold(recs)
	if r, next := lc.Due(t0.Add(time.Hour+10*time.Second), time.Time{}); r != "" || !next.Equal(t0.Add(time.Hour+30*time.Second)) {
		t.Fatalf("after an extension: due %q next %v", r, next)
	}
	// Removed: never due.
	h.Removal(campaign.ReasonTTL).Removed(1, "").Cleanup(campaign.CleanupVerified)
	if r, next := campaign.Fold(append(recs, h.Records[len(recs)-2:]...)).Due(t0.Add(100*time.Hour), time.Time{}); r != "" || !next.IsZero() {
		t.Fatalf("removed: due %q next %v", r, next)
	}
}

// TestLifetimePolicy: the operator's defaults fill what a spec leaves 0;
// its maxima refuse more, naming the fields; the spec's own bounds are
// checked first.
func TestLifetimePolicy(t *testing.T) {
	pol := campaign.LifetimePolicy{DefaultTTL: time.Hour, MaxTTL: 2 * time.Hour, DefaultIdle: 10 * time.Minute}
	if ttl, idle, err := pol.Apply("ttl_seconds", 0, "idle_timeout_seconds", 0); err != nil || ttl != time.Hour || idle != 10*time.Minute {
		t.Fatalf("defaults: %v %v %v", ttl, idle, err)
	}
	if ttl, idle, err := pol.Apply("ttl_seconds", 20, "idle_timeout_seconds", 3600*24); err != nil || ttl != 20*time.Second || idle != 24*time.Hour {
		t.Fatalf("asked: %v %v %v", ttl, idle, err)
	}
	_, _, err := pol.Apply("ttl_seconds", 3*3600, "idle_timeout_seconds", 0)
	var ve *campaign.ValidationError
	if !errors.As(err, &ve) || ve.Field != "ttl_seconds" {
		t.Fatalf("over the maximum: %v", err)
	}
	if err := campaign.CheckLifetime("ttl_seconds", 5, "idle_timeout_seconds", 1); len(campaign.FieldErrors(err)) != 2 {
		t.Fatalf("under the minima: %v", err)
	}
	if err := campaign.CheckLifetime("ttl_seconds", 0, "idle_timeout_seconds", campaign.MinIdleTimeoutSeconds); err != nil {
		t.Fatal(err)
	}
	s := lifecycletest.Spec("camp")
	s.TTLSeconds = campaign.MaxTTLSeconds + 1
	if _, err := campaign.NewPlan(s); !errors.As(err, &ve) || ve.Field != "ttl_seconds" {
		t.Fatalf("a spec over the bound: %v", err)
	}
}

// upAt is a campaign of one generation up since t0+10s (attested) with
// lifetime l, and the records after its attestation.
func upAt(t0 time.Time, l campaign.Lifetime, more ...campaign.Record) campaign.Lifecycle {
	h := lifecycletest.New(lifecycletest.Spec("camp"), campaign.PlanOptions{}, "/run/x")
	h.Begin(1)
	lr := l.Record(1)
	lr.Time = t0
	recs := append(h.Records, lr, campaign.Record{Op: campaign.OpAttesting, Gen: 1, Time: t0.Add(10 * time.Second)},
		campaign.Record{Op: campaign.OpAttested, Gen: 1, Status: campaign.AttestOK, Report: "a", Digest: "d"})
	return campaign.Fold(append(recs, more...))
}

// TestWarning: a removal a lifetime will make is warned of lead before
// its deadline (at most half its limit before), once: a deadline the
// journal warned of is not warned of again, an extension or an episode
// that moves it is warned of anew, and a campaign past its deadline, not
// up, or with no lifetime has none; next says when to ask again.
func TestWarning(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	lead := time.Minute
	ttl := campaign.Lifetime{Accepted: t0, TTL: time.Hour}
	warnedTTL := campaign.Expiry{Reason: campaign.ReasonTTL, Deadline: t0.Add(time.Hour)}.Record(1)
	idle := campaign.Lifetime{Accepted: t0, Idle: 30 * time.Second}
	for _, c := range []struct {
		name      string
		lc        campaign.Lifecycle
		now, last time.Time
		want      campaign.Expiry // zero: none due
		next      time.Time
	}{
		{"ttl_before", upAt(t0, ttl), t0.Add(58 * time.Minute), time.Time{}, campaign.Expiry{}, t0.Add(59 * time.Minute)},
		{"ttl_at_lead", upAt(t0, ttl), t0.Add(59 * time.Minute), time.Time{}, campaign.Expiry{Reason: campaign.ReasonTTL, Deadline: t0.Add(time.Hour)}, time.Time{}},
		{"ttl_warned", upAt(t0, ttl, warnedTTL), t0.Add(59*time.Minute + time.Second), time.Time{}, campaign.Expiry{}, time.Time{}},
		{"ttl_extended_after_warning", upAt(t0, ttl, warnedTTL, campaign.Lifetime{Accepted: t0, TTL: 2 * time.Hour}.Record(1)), t0.Add(59 * time.Minute), time.Time{}, campaign.Expiry{}, t0.Add(119 * time.Minute)},
		{"ttl_past", upAt(t0, ttl), t0.Add(2 * time.Hour), time.Time{}, campaign.Expiry{}, time.Time{}},
		{"ttl_short_half", upAt(t0, campaign.Lifetime{Accepted: t0, TTL: 20 * time.Second}), t0.Add(10 * time.Second), time.Time{}, campaign.Expiry{Reason: campaign.ReasonTTL, Deadline: t0.Add(20 * time.Second)}, time.Time{}},
		{"ttl_short_before_half", upAt(t0, campaign.Lifetime{Accepted: t0, TTL: 20 * time.Second}), t0.Add(9 * time.Second), time.Time{}, campaign.Expiry{}, t0.Add(10 * time.Second)},
		{"idle_at", upAt(t0, idle), t0.Add(25 * time.Second), time.Time{}, campaign.Expiry{Reason: campaign.ReasonIdle, Deadline: t0.Add(40 * time.Second)}, time.Time{}},
		{"idle_moved_by_an_episode", upAt(t0, idle, campaign.Expiry{Reason: campaign.ReasonIdle, Deadline: t0.Add(40 * time.Second)}.Record(1)),
			t0.Add(50 * time.Second), t0.Add(30 * time.Second), campaign.Expiry{Reason: campaign.ReasonIdle, Deadline: t0.Add(60 * time.Second)}, time.Time{}},
		{"earliest_first", upAt(t0, campaign.Lifetime{Accepted: t0, TTL: 41 * time.Second, Idle: 30 * time.Second}), t0.Add(39 * time.Second), time.Time{}, campaign.Expiry{Reason: campaign.ReasonIdle, Deadline: t0.Add(40 * time.Second)}, time.Time{}},
		{"no_lifetime", upAt(t0, campaign.Lifetime{}), t0.Add(1000 * time.Hour), time.Time{}, campaign.Expiry{}, time.Time{}},
		{"launcher_only", upAt(t0, campaign.Lifetime{Accepted: t0, Launcher: 30 * time.Second}), t0.Add(1000 * time.Hour), time.Time{}, campaign.Expiry{}, time.Time{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, due, next := c.lc.Warning(c.now, c.last, lead)
			if due != (c.want.Reason != "") || e.Reason != c.want.Reason || !e.Deadline.Equal(c.want.Deadline) || !next.Equal(c.next) {
				t.Fatalf("warning %+v due %v next %v, want %+v next %v", e, due, next, c.want, c.next)
			}
		})
	}
	// Not up: none.
	h := lifecycletest.New(lifecycletest.Spec("camp"), campaign.PlanOptions{}, "/run/x")
	h.Begin(1)
	if _, due, next := campaign.Fold(append(h.Records, ttl.Record(1))).Warning(t0.Add(59*time.Minute), time.Time{}, lead); due || !next.IsZero() {
		t.Fatalf("a campaign that is not up: due %v next %v", due, next)
	}
}

// TestLauncherGone: a campaign tied to its launcher is gone its launcher
// timeout after the launcher was last seen, not a moment before; one
// whose launcher was never seen (no service watched it), not tied, or not
// up never is.
func TestLauncherGone(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	tied := upAt(t0, campaign.Lifetime{Accepted: t0, TTL: time.Hour, Launcher: 30 * time.Second})
	for _, c := range []struct {
		name      string
		lc        campaign.Lifecycle
		now, seen time.Time
		gone      bool
		next      time.Time
	}{
		{"before", tied, t0.Add(59 * time.Second), t0.Add(30 * time.Second), false, t0.Add(time.Minute)},
		{"at", tied, t0.Add(time.Minute), t0.Add(30 * time.Second), true, time.Time{}},
		{"never_seen", tied, t0.Add(time.Hour), time.Time{}, false, time.Time{}},
		{"not_tied", upAt(t0, campaign.Lifetime{Accepted: t0, TTL: time.Hour}), t0.Add(time.Hour), t0, false, time.Time{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			gone, next := c.lc.LauncherGone(c.now, c.seen)
			if gone != c.gone || !next.Equal(c.next) {
				t.Fatalf("gone %v next %v, want %v next %v", gone, next, c.gone, c.next)
			}
			// Due knows nothing of launchers: a tie alone is never due.
			if r, _ := c.lc.Due(c.now, time.Time{}); r == campaign.ReasonLauncherGone {
				t.Fatalf("Due said %q", r)
			}
		})
	}
	if err := campaign.CheckLauncherTimeout("launcher_timeout_seconds", 4); err == nil {
		t.Fatal("a launcher timeout of 4 s was accepted")
	}
	if err := campaign.CheckLauncherTimeout("launcher_timeout_seconds", 5); err != nil {
		t.Fatal(err)
	}
}
