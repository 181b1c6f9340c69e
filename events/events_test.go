package events_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/events"
	"github.com/agentpen/agentpen/internal/testkit/lifecycletest"
)

// TestEveryOp: every journal operation that is a fact has its event
// type; an intent (the create follows) and a note (prose) have none.
func TestEveryOp(t *testing.T) {
	want := map[campaign.Op]events.Type{
		campaign.OpBegin: events.Begin, campaign.OpLifetime: events.Lifetime, campaign.OpCreated: events.Created,
		campaign.OpCreateFailed: events.CreateFailed, campaign.OpOrphan: events.Orphan, campaign.OpRemoved: events.Removed,
		campaign.OpReady: events.Ready, campaign.OpAttesting: events.Attesting, campaign.OpAttested: events.Attested,
		campaign.OpRolledBack: events.RolledBack, campaign.OpRemovalStarted: events.RemovalStarted, campaign.OpCleanup: events.Cleanup,
		campaign.OpClaim: events.Claim, campaign.OpExpiring: events.Expiring,
		campaign.OpIntent: "", campaign.OpNote: "",
	}
	for op, typ := range want {
		ev, ok := events.FromRecord("c", campaign.Record{Op: op, Seq: 3, Gen: 1, Status: campaign.AttestOK, Accepted: time.Unix(0, 0), TTL: 60,
			Reason: campaign.ReasonTTL, Deadline: time.Unix(60, 0)})
		if ok != (typ != "") || ev.Type != typ {
			t.Errorf("%s: event %q (%v), want %q", op, ev.Type, ok, typ)
		}
		if ok && (ev.Campaign != "c" || ev.Seq != 3 || ev.Msg == "" || ev.Level == "") {
			t.Errorf("%s: %+v", op, ev)
		}
	}
}

// TestEventsOfEveryShape: the events of every journal shape are one per
// record that is a fact, in order, each a JSON object that decodes back
// into Event with nothing left over, and none holds a task id.
func TestEventsOfEveryShape(t *testing.T) {
	for _, sh := range lifecycletest.Shapes {
		t.Run(sh.Name, func(t *testing.T) {
			spec := lifecycletest.Spec("camp")
			h := lifecycletest.New(spec, campaign.PlanOptions{}, "/run/x")
			sh.Build(h)
			for i := range h.Records {
				h.Records[i].Seq = i + 1
			}
			evs := events.FromRecords("camp", h.Records)
			seq := 0
			for _, ev := range evs {
				if ev.Seq <= seq {
					t.Fatalf("event %+v out of order", ev)
				}
				seq = ev.Seq
				b, err := json.Marshal(ev)
				if err != nil {
					t.Fatal(err)
				}
				for _, ws := range spec.Workspaces {
					family, _, _ := strings.Cut(ws.TaskID, "@")
					if bytes.Contains(b, []byte(family)) {
						t.Fatalf("an event holds a task id: %s", b)
					}
				}
				var back events.Event
				dec := json.NewDecoder(bytes.NewReader(b))
				dec.DisallowUnknownFields()
				if err := dec.Decode(&back); err != nil || !reflect.DeepEqual(back, ev) {
					t.Fatalf("%s does not decode back (%v): %+v", b, err, back)
				}
			}
			final := events.Final("camp", sh.Want, campaign.Fold(h.Records), time.Now())
			if final.Type != events.State || final.State != sh.Want.String() || final.Seq != 0 {
				t.Fatalf("final %+v", final)
			}
		})
	}
}

// TestFinalSaysWhy: the final event of a campaign removed for its
// lifetime names the reason, and a campaign that failed to come up says
// so, as a warning.
func TestFinalSaysWhy(t *testing.T) {
	h := lifecycletest.New(lifecycletest.Spec("camp"), campaign.PlanOptions{}, "/run/x")
	h.Begin(1).Op(campaign.OpAttesting, 1).Attested(1, campaign.AttestOK).Removal(campaign.ReasonTTL).Removed(1, "").Cleanup(campaign.CleanupVerified)
	lc := campaign.Fold(h.Records)
	if ev := events.Final("camp", lc.Status, lc, time.Now()); ev.State != "removed" || ev.Reason != campaign.ReasonTTL || ev.Level != events.LevelInfo ||
		!strings.Contains(ev.Msg, "was removed (cleanup verified)") {
		t.Fatalf("ttl: %+v", ev)
	}
	h = lifecycletest.New(lifecycletest.Spec("camp"), campaign.PlanOptions{}, "/run/x")
	h.Begin(1)
	lc = campaign.Fold(h.Records)
	if ev := events.Final("camp", lc.Status, lc, time.Now()); ev.State != "starting_or_failed" || ev.Level != events.LevelWarn || !strings.Contains(ev.Msg, "never became ready") {
		t.Fatalf("killed: %+v", ev)
	}
}

// TestBeginNamesOwner: a begin record's owner (a launcher's name) is its
// event's, and in its message; one agentpen up wrote has none.
func TestBeginNamesOwner(t *testing.T) {
	ev, _ := events.FromRecord("c", campaign.Record{Op: campaign.OpBegin, Seq: 1, Gen: 2, Owner: "team-a"})
	if ev.Owner != "team-a" || !strings.Contains(ev.Msg, "team-a") {
		t.Errorf("begin of team-a: %+v", ev)
	}
	ev, _ = events.FromRecord("c", campaign.Record{Op: campaign.OpBegin, Seq: 1, Gen: 2})
	if ev.Owner != "" || strings.Contains(ev.Msg, " for ") {
		t.Errorf("begin of agentpen up: %+v", ev)
	}
}

// TestClaimAndExpiring: a claim's event names the workspace it bound and
// never its task (the record holds it); an expiring warning says which
// removal comes when; a lifetime's says its launcher timeout; a refill's
// attestation names its slots.
func TestClaimAndExpiring(t *testing.T) {
	ev, _ := events.FromRecord("c", campaign.Record{Op: campaign.OpClaim, Seq: 9, Gen: 1, Kind: campaign.KindContainer, Role: campaign.RoleWork,
		Name: "agentpen-c-agent-0123", ID: "abcdef", Task: "software/median@7", Attempt: "a1"})
	b, _ := json.Marshal(ev)
	if ev.Type != events.Claim || ev.Name != "agentpen-c-agent-0123" || ev.ID != "abcdef" || bytes.Contains(b, []byte("median")) || bytes.Contains(b, []byte(`"a1"`)) {
		t.Errorf("claim: %s", b)
	}
	deadline := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ev, _ = events.FromRecord("c", campaign.Expiry{Reason: campaign.ReasonIdle, Deadline: deadline}.Record(1))
	if ev.Type != events.Expiring || ev.Reason != campaign.ReasonIdle || ev.ExpiresAt == nil || !ev.ExpiresAt.Equal(deadline) || ev.Level != events.LevelWarn ||
		!strings.Contains(ev.Msg, "2026-12-01T12:00:00Z") {
		t.Errorf("expiring: %+v", ev)
	}
	ev, _ = events.FromRecord("c", campaign.Lifetime{Accepted: deadline, Launcher: 30 * time.Second}.Record(1))
	if ev.LauncherTimeoutSeconds != 30 || !strings.Contains(ev.Msg, "launcher timeout 30 s") {
		t.Errorf("lifetime: %+v", ev)
	}
	ev, _ = events.FromRecord("c", campaign.Record{Op: campaign.OpAttested, Gen: 1, Status: campaign.AttestOK, Slots: []int{3, 4}})
	if len(ev.Slots) != 2 || !strings.Contains(ev.Msg, "refill") {
		t.Errorf("a refill's attestation: %+v", ev)
	}
}
