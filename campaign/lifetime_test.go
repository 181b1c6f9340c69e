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
