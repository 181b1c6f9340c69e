// Package events is the one schema of a campaign's events: the JSON
// records agentpen's commands write with --log-format json while they
// bring a campaign up, attest it, remove it or reconcile it, and the
// server-sent events of the launcher API's GET /v1/campaigns/{id}/events.
//
// An event is read from one journal record (FromRecord): the record is
// the fact, written and synced before anything reads it, and the event
// is how it is told. So a stream that starts late replays what already
// happened from the journal, a service restarted in the middle of an
// operation tells it the same way, and the command that does the work
// (from the records it appends, campaign.Journal.Observe) and the
// service that streams it say the same thing in the same order. A final
// event of type state (Final) says what the campaign ended as.
//
// Each event is a JSON object with slog's envelope (time, level, msg) so
// that a JSON log reader takes the command's other lines too; its type
// is in "event". No event holds a task id, a key, a token or any other
// secret: journal records hold none, and the notes they carry are the
// adapter's own errors, which name resources by their opaque names.
//
// The package reads records; it opens no file and talks to nothing.
package events

import (
	"fmt"
	"time"

	"github.com/agentpen/agentpen/campaign"
)

// Type is what an event tells.
type Type string

// The event types. Each but State is one journal operation's.
const (
	// Begin: a bring-up of a new generation began.
	Begin Type = "begin"
	// Lifetime: the generation's lifetime was set (at bring-up, or by
	// an extension).
	Lifetime Type = "lifetime"
	// Claim: a task was bound to a pooled workspace (Name, ID: its
	// container; never the task).
	Claim Type = "claim"
	// Expiring: the campaign will be removed at ExpiresAt for Reason
	// (ttl, idle) unless its lifetime is extended (PATCH) or, for idle,
	// an episode is played: agentpen serve warns shortly before.
	Expiring Type = "expiring"
	// Created: a network, directory or container was created (and a
	// container started).
	Created Type = "created"
	// CreateFailed: a create call failed (the bring-up then rolls back).
	CreateFailed Type = "create_failed"
	// Ready: every container answered its readiness check (a bring-up
	// without attestation).
	Ready Type = "ready"
	// Attesting: every container answered its readiness check and the
	// attestation began.
	Attesting Type = "attesting"
	// Attested: an attestation's verdict (Status ok or failed) and its
	// report; a refill's names the pool slots it attested (Slots).
	Attested Type = "attested"
	// RolledBack: a bring-up failed, or was interrupted, and what it made
	// was removed (Note says why).
	RolledBack Type = "rolled_back"
	// RemovalStarted: a removal began; Reason says why (down, delete,
	// ttl, idle, launcher_gone, rollback, not_attested, reconcile, ...).
	RemovalStarted Type = "removal_started"
	// Removed: a resource was removed (or confirmed never created).
	Removed Type = "removed"
	// Orphan: a resource of the generation the journal had missed was
	// found by its labels, before its removal.
	Orphan Type = "orphan"
	// Cleanup: a removal's verdict (Status verified or failed) and its
	// report.
	Cleanup Type = "cleanup"
	// State: the last event of a stream: what the campaign is (State),
	// and why (Msg; Reason for a removal).
	State Type = "state"
)

// Levels (slog's names).
const (
	LevelInfo = "INFO"
	LevelWarn = "WARN"
)

// Event is one event of a campaign.
type Event struct {
	Time  time.Time `json:"time" doc:"When it happened (its journal record's time)"`
	Level string    `json:"level" enum:"INFO,WARN" doc:"INFO, or WARN for a failure"`
	Msg   string    `json:"msg" doc:"What happened, for a person"`
	Type  Type      `json:"event" enum:"begin,lifetime,claim,expiring,created,create_failed,ready,attesting,attested,rolled_back,removal_started,removed,orphan,cleanup,state" doc:"What the event tells"`
	// Campaign is the campaign's id; Seq its journal record's sequence
	// number (0 for State), which a stream's client resumes after
	// (Last-Event-ID).
	Campaign   string `json:"campaign" doc:"The campaign's id"`
	Seq        int    `json:"seq,omitempty" doc:"Its journal record's sequence number (the SSE id); absent on the final state event"`
	Generation int    `json:"generation,omitempty" doc:"The generation it belongs to"`
	// Kind, Role, Name and ID name the resource of a Created, Removed,
	// CreateFailed, Orphan or Claim event.
	Kind string `json:"kind,omitempty" enum:"network,container,dir" doc:"The resource's kind"`
	Role string `json:"role,omitempty" doc:"The resource's role: server, workspace or network"`
	Name string `json:"name,omitempty" doc:"The resource's name (opaque: agent ids, never a task id)"`
	ID   string `json:"id,omitempty" doc:"The resource's id on the daemon (a path, for a directory)"`
	// Owner is the launcher whose token asked for the generation
	// through agentpen serve (Begin; its name, never its token).
	Owner string `json:"owner,omitempty" doc:"The name of the launcher's token that created the generation (begin; absent: agentpen up)"`
	// Status is a verdict (Attested: ok, failed; Cleanup: verified,
	// failed); Report its report's file name.
	Status string `json:"status,omitempty" doc:"A verdict: ok or failed (attested), verified or failed (cleanup)"`
	Report string `json:"report,omitempty" doc:"The verdict's report file in the campaign's state directory"`
	// Reason is why a removal began (RemovalStarted, State), or which
	// removal comes (Expiring).
	Reason string `json:"reason,omitempty" doc:"Why the removal began: down, delete, ttl, idle, launcher_gone, rollback, not_attested, undelivered, exit, orphan, reconcile; on expiring, the removal that comes: ttl or idle"`
	// ExpiresAt, IdleTimeoutSeconds and LauncherTimeoutSeconds are a
	// Lifetime's; ExpiresAt is also an Expiring's deadline.
	ExpiresAt              *time.Time `json:"expires_at,omitempty" doc:"When the campaign is removed (lifetime: reason ttl; expiring: its reason)"`
	IdleTimeoutSeconds     int        `json:"idle_timeout_seconds,omitempty" doc:"How long without a reset or a step before it is removed (reason idle)"`
	LauncherTimeoutSeconds int        `json:"launcher_timeout_seconds,omitempty" doc:"How long its launcher may be gone (no event stream of it, no keepalive) before it is removed (reason launcher_gone)"`
	// Slots are the pool slots a refill's attestation covered
	// (Attested).
	Slots []int `json:"slots,omitempty" doc:"The pool slots a refill made and attested (attested; absent: the whole campaign)"`
	// Note is a failure's error (CreateFailed, RolledBack, Removed).
	Note string `json:"note,omitempty" doc:"An error, for a person"`
	// State is what the campaign is (State events only).
	State string `json:"state,omitempty" enum:"creating,ready,attestation_failed,starting_or_failed,deleting,cleanup_failed,removed,unusable" doc:"What the campaign is (the final state event)"`
}

// FromRecord is the event of one journal record of campaign id, and
// whether it has one (an intent or a note has none).
func FromRecord(id string, r campaign.Record) (Event, bool) {
	ev := Event{Time: r.Time, Level: LevelInfo, Campaign: id, Seq: r.Seq, Generation: r.Gen}
	resource := func(t Type, verb string) {
		ev.Type, ev.Kind, ev.Role, ev.Name, ev.ID = t, string(r.Kind), r.Role, r.Name, r.ID
		ev.Msg = fmt.Sprintf("%s %s %s", verb, what(r.Kind), r.Name)
	}
	switch r.Op {
	case campaign.OpBegin:
		ev.Type, ev.Msg, ev.Owner = Begin, fmt.Sprintf("bring-up of generation %d began", r.Gen), r.Owner
		if r.Owner != "" {
			ev.Msg += " for " + r.Owner
		}
	case campaign.OpLifetime:
		l := campaign.LifetimeOf(r)
		ev.Type, ev.Msg, ev.IdleTimeoutSeconds, ev.LauncherTimeoutSeconds = Lifetime, "lifetime: "+l.String(), r.Idle, r.Launcher
		if exp := l.Expires(); !exp.IsZero() {
			exp = exp.UTC()
			ev.ExpiresAt = &exp
		}
	case campaign.OpClaim:
		// The task it bound is the trainer's and stays out of events.
		resource(Claim, "claimed")
	case campaign.OpExpiring:
		exp := r.Deadline.UTC()
		ev.Type, ev.Level, ev.Reason, ev.ExpiresAt = Expiring, LevelWarn, r.Reason, &exp
		ev.Msg = fmt.Sprintf("expiring: removed at %s (%s) unless its lifetime is extended", exp.Format(time.RFC3339), r.Reason)
		if r.Reason == campaign.ReasonIdle {
			ev.Msg += " or an episode is played"
		}
	case campaign.OpCreated:
		resource(Created, "created")
	case campaign.OpCreateFailed:
		resource(CreateFailed, "could not create")
		ev.Level, ev.Note = LevelWarn, r.Note
	case campaign.OpOrphan:
		resource(Orphan, "found (not in the journal)")
	case campaign.OpRemoved:
		resource(Removed, "removed")
		if r.ID == "" {
			ev.Msg, ev.Note = fmt.Sprintf("%s %s was never created", what(r.Kind), r.Name), r.Note
		}
	case campaign.OpReady:
		ev.Type, ev.Msg = Ready, "every container is ready"
	case campaign.OpAttesting:
		ev.Type, ev.Msg = Attesting, "every container is ready; the attestation began"
	case campaign.OpAttested:
		ev.Type, ev.Status, ev.Report, ev.Slots = Attested, r.Status, r.Report, r.Slots
		ev.Msg = "attestation " + r.Status
		if len(r.Slots) > 0 {
			ev.Msg += fmt.Sprintf(" (a refill of the pool: slots %v)", r.Slots)
		}
		if r.Status != campaign.AttestOK {
			ev.Level = LevelWarn
		}
	case campaign.OpRolledBack:
		ev.Type, ev.Level, ev.Note, ev.Msg = RolledBack, LevelWarn, r.Note, fmt.Sprintf("generation %d failed to come up and was rolled back", r.Gen)
	case campaign.OpRemovalStarted:
		ev.Type, ev.Reason, ev.Msg = RemovalStarted, r.Reason, "removal began ("+r.Reason+")"
	case campaign.OpCleanup:
		ev.Type, ev.Status, ev.Report, ev.Msg = Cleanup, r.Status, r.Report, "cleanup "+r.Status
		if r.Status != campaign.CleanupVerified {
			ev.Level = LevelWarn
		}
	default:
		return Event{}, false
	}
	return ev, true
}

// FromRecords is the events of a journal's records, in order.
func FromRecords(id string, recs []campaign.Record) []Event {
	var out []Event
	for _, r := range recs {
		if ev, ok := FromRecord(id, r); ok {
			out = append(out, ev)
		}
	}
	return out
}

// Final is the last event of a stream: the campaign's status at now and,
// for one that is not up, why (lc.Reason).
func Final(id string, status campaign.Status, lc campaign.Lifecycle, now time.Time) Event {
	ev := Event{Time: now.UTC(), Level: LevelInfo, Type: State, Campaign: id, Generation: lc.Latest().N, State: status.String(),
		Msg: "campaign " + status.String()}
	if r := lc.Reason(id); r != "" && !status.Up() && status != campaign.StatusCreating && status != campaign.StatusDeleting {
		ev.Msg += ": " + r
	}
	if status == campaign.StatusRemoved || status == campaign.StatusCleanupFailed {
		ev.Reason = lc.LastRemoval
	}
	switch status {
	case campaign.StatusReady, campaign.StatusRemoved, campaign.StatusCreating, campaign.StatusDeleting:
	default:
		ev.Level = LevelWarn
	}
	return ev
}

// what names a kind for a person.
func what(k campaign.Kind) string {
	if k == campaign.KindDir {
		return "directory"
	}
	return string(k)
}
