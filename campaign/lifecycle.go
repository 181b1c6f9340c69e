package campaign

import (
	"fmt"
	"time"
)

// Status is what a campaign is. Fold reads it from the journal's typed
// records; every reader (agentpen ls, attest and down, the launcher API,
// its pages) names it with String, so one campaign reads the same
// everywhere. The zero value is StatusUnusable: a state nobody could read
// is never taken for a good one.
type Status int

// Campaign states. Their names (String) are part of the API and of
// agentpen ls --json, and are documented in docs/spec.md: they do not
// change.
const (
	// StatusUnusable: its journal is corrupt, or its state directory or
	// journal is owned or writable by another user. Nothing is done with
	// it until an operator repairs it.
	StatusUnusable Status = iota
	// StatusCreating: a bring-up of it is running in this process (the
	// journal alone says StatusStartingOrFailed: it cannot tell a
	// bring-up in flight from one that was killed).
	StatusCreating
	// StatusReady: its latest generation is up, nothing of it was
	// removed, and its latest attestation (if any) passed.
	StatusReady
	// StatusAttestationFailed: up, but its latest attestation failed.
	StatusAttestationFailed
	// StatusStartingOrFailed: resources live, but its latest generation
	// never reached readiness, or stopped between readiness and its
	// attestation's verdict, and nothing removed it: a bring-up killed, or
	// one still running in another process.
	StatusStartingOrFailed
	// StatusDeleting: a removal of it is running in this process.
	StatusDeleting
	// StatusCleanupFailed: a removal that was not verified or did not
	// finish (its process was killed), or an earlier generation that is
	// still live: resources may remain.
	StatusCleanupFailed
	// StatusRemoved: nothing its journal records is live, and no cleanup
	// since its latest generation began failed.
	StatusRemoved
	// StatusEmpty: its journal holds no generation (no record of one
	// began): a create that stopped before its first record (an agentpen
	// whose create was not one step on disk), or a journal emptied by
	// hand. It names nothing on the daemon; agentpen reconcile removes
	// its directory once nothing there carries its id.
	StatusEmpty
)

var statusNames = [...]string{
	StatusUnusable:          "unusable",
	StatusCreating:          "creating",
	StatusReady:             "ready",
	StatusAttestationFailed: "attestation_failed",
	StatusStartingOrFailed:  "starting_or_failed",
	StatusDeleting:          "deleting",
	StatusCleanupFailed:     "cleanup_failed",
	StatusRemoved:           "removed",
	StatusEmpty:             "empty",
}

// String is the status's name.
func (s Status) String() string {
	if s < 0 || int(s) >= len(statusNames) {
		return fmt.Sprintf("Status(%d)", int(s))
	}
	return statusNames[s]
}

// Statuses are every status, in order, for documentation and schemas.
func Statuses() []Status {
	out := make([]Status, len(statusNames))
	for i := range out {
		out[i] = Status(i)
	}
	return out
}

// Up reports whether a campaign in this status is up: its latest
// generation is ready, attested or not, and no removal of it began. Only
// a campaign that is up is attested again, or served.
func (s Status) Up() bool { return s == StatusReady || s == StatusAttestationFailed }

// Lifecycle is a campaign's journal folded: its generations and what
// became of the latest one.
type Lifecycle struct {
	Status Status
	// Generations are the journal's, oldest first.
	Generations []Generation

	// Facts of the latest generation.

	// Ready: it reached readiness (OpReady or OpAttesting).
	Ready bool
	// Attestation is its latest attestation's verdict (AttestOK,
	// AttestFailed), "pending" while its bring-up's attestation has no
	// verdict, "" for none.
	Attestation string
	// AttestationReport and AttestationDigest name the latest
	// attestation's report file and its SHA-256 ("" for none).
	AttestationReport, AttestationDigest string
	// RollbackNote says why its bring-up failed and was rolled back (""
	// when it was not).
	RollbackNote string
	// Removal is why a removal of it began ("" for none): a removal after
	// readiness (OpRemovalStarted, or any removal of its resources).
	Removal string
	// Cleanup is the verdict of the last cleanup since it began
	// (CleanupVerified, CleanupFailed; "" for none); CleanupReport and
	// CleanupDigest name that cleanup's report.
	Cleanup, CleanupReport, CleanupDigest string
	// LastRemoval is why the last removal since it began began (its
	// OpRemovalStarted's reason, before readiness too; "" for none).
	LastRemoval string
	// ReadyAt is when it reached readiness (zero: never).
	ReadyAt time.Time
	// Lifetime is its latest OpLifetime's (zero: none).
	Lifetime Lifetime
	// Warnings are the removals its OpExpiring records warned of.
	Warnings []Expiry
	// Pool are its pooled workspaces (CampaignSpec.Pool), in slot order.
	Pool []Slot
}

// AttestPending is Lifecycle.Attestation while a bring-up's attestation
// has no verdict.
const AttestPending = "pending"

// Fold reads a campaign's journal records into its lifecycle. It is the
// one place that decides what a campaign is.
func Fold(recs []Record) Lifecycle {
	lc := Lifecycle{Generations: Generations(recs)}
	latest := 0
	if n := len(lc.Generations); n > 0 {
		latest = lc.Generations[n-1].N
	}
	for _, r := range recs {
		switch r.Op {
		case OpBegin:
			if r.Gen == latest {
				// A generation's story starts here: nothing of an earlier
				// one (its cleanup, its attestation) speaks for it.
				lc = Lifecycle{Generations: lc.Generations}
			}
		case OpReady:
			if r.Gen == latest {
				lc.Ready, lc.ReadyAt = true, r.Time
			}
		case OpAttesting:
			if r.Gen == latest {
				lc.Ready, lc.Attestation, lc.ReadyAt = true, AttestPending, r.Time
			}
		case OpLifetime:
			if r.Gen == latest {
				lc.Lifetime = LifetimeOf(r)
			}
		case OpExpiring:
			if r.Gen == latest {
				lc.Warnings = append(lc.Warnings, Expiry{Reason: r.Reason, Deadline: r.Deadline})
			}
		case OpAttested:
			// A refill's attestation (Slots) that passed speaks for its
			// slots alone; one that failed fails the campaign closed.
			if r.Gen == latest && (len(r.Slots) == 0 || r.Status != AttestOK) {
				lc.Attestation, lc.AttestationReport, lc.AttestationDigest = r.Status, r.Report, r.Digest
			}
		case OpRolledBack:
			if r.Gen == latest {
				lc.RollbackNote = r.Note
			}
		case OpRemovalStarted:
			lc.LastRemoval = r.Reason
			if lc.Ready {
				lc.Removal = r.Reason
			}
		case OpRemoved:
			// A removal of its resources after readiness that no
			// OpRemovalStarted announced (an orphan's, and a dropped pool
			// slot's, excepted).
			if r.Gen == latest && lc.Ready && r.ID != "" && len(r.Slots) == 0 && lc.Removal == "" && !isOrphan(lc.Generations, r) {
				lc.Removal = "unannounced"
			}
		case OpCleanup:
			lc.Cleanup, lc.CleanupReport, lc.CleanupDigest = r.Status, r.Report, r.Digest
		}
	}
	lc.Pool = foldPool(recs, latest)
	lc.Status = lc.status()
	return lc
}

func isOrphan(gens []Generation, r Record) bool {
	for _, g := range gens {
		if g.N != r.Gen {
			continue
		}
		for _, res := range g.Resources {
			if res.ID == r.ID && res.Kind == r.Kind {
				return res.Orphan
			}
		}
	}
	return false
}

// StatusOf is Fold(recs).Status.
func StatusOf(recs []Record) Status { return Fold(recs).Status }

// Latest returns the newest generation (the zero Generation for none).
func (lc Lifecycle) Latest() Generation {
	if len(lc.Generations) == 0 {
		return Generation{}
	}
	return lc.Generations[len(lc.Generations)-1]
}

// Live returns the resources of every generation not yet removed.
func (lc Lifecycle) Live() []Resource {
	var out []Resource
	for _, g := range lc.Generations {
		out = append(out, g.Live()...)
	}
	return out
}

// status decides the campaign's status from the folded facts.
func (lc Lifecycle) status() Status {
	g := lc.Latest()
	live, gLive := len(lc.Live()), len(g.Live())
	removed := 0 // of the latest generation's own resources that existed
	for _, r := range g.Resources {
		if r.Removed && r.ID != "" && !r.Orphan && !r.Dropped {
			removed++
		}
	}
	switch {
	case len(lc.Generations) == 0:
		return StatusEmpty
	case lc.Cleanup == CleanupFailed:
		return StatusCleanupFailed
	case live == 0 && !lc.Ready && lc.LastRemoval == "" && lc.Cleanup == "" && lc.RollbackNote == "":
		// Begun, nothing made yet, and nothing says it ended: a bring-up
		// in flight, or one killed before its first create (never
		// removed: nothing says why it would be).
		return StatusStartingOrFailed
	case live == 0:
		return StatusRemoved
	case !lc.Ready, lc.Attestation == AttestPending:
		// Never ready, or killed (or still running elsewhere) between its
		// readiness and its attestation's verdict.
		return StatusStartingOrFailed
	case lc.Cleanup != "", lc.Removal != "", removed > 0, live > gLive:
		// A removal began and did not finish, or an earlier generation is
		// still live: nothing to serve.
		return StatusCleanupFailed
	case lc.Attestation == AttestFailed:
		return StatusAttestationFailed
	}
	return StatusReady
}

// Reason says, for a person, why a campaign that is not up is not, and
// what to do ("" for one that is up). id is the campaign's id, for the
// commands it names.
func (lc Lifecycle) Reason(id string) string {
	g := lc.Latest()
	live := len(g.Live())
	switch {
	case lc.Status.Up():
		return ""
	case lc.Status == StatusUnusable:
		return "its state cannot be used"
	case len(lc.Generations) == 0:
		return fmt.Sprintf("its journal holds no generation (a create that stopped before its first record): it names nothing on the daemon; agentpen reconcile removes its directory once nothing there carries the id %s", id)
	case lc.Removal != "" && live > 0 && lc.Cleanup == "":
		return fmt.Sprintf("its latest generation (%d) is being removed, or a removal of it did not finish: agentpen down %s finishes it", g.N, id)
	case lc.Attestation == AttestPending && live > 0 && lc.Cleanup == "":
		return fmt.Sprintf("its latest generation (%d) stopped while it was being attested at bring-up (killed, or still running in another process): agentpen down %s removes it", g.N, id)
	case lc.RollbackNote != "" && live == 0:
		return fmt.Sprintf("its latest generation (%d) failed to come up and was rolled back (cleanup %s)", g.N, orNot(lc.Cleanup))
	case lc.Attestation == AttestFailed && lc.Cleanup == CleanupVerified:
		return fmt.Sprintf("its latest generation (%d) did not attest and was removed (cleanup verified)", g.N)
	case lc.Cleanup == CleanupVerified:
		return fmt.Sprintf("its latest generation (%d) was removed (cleanup verified)", g.N)
	case lc.Cleanup != "":
		return fmt.Sprintf("its latest generation (%d) was being removed and its cleanup %s: agentpen down %s finishes it", g.N, lc.Cleanup, id)
	case lc.Ready && live == 0:
		return fmt.Sprintf("its latest generation (%d) was removed (every resource of it is journalled removed)", g.N)
	case live == 0 && lc.Status != StatusStartingOrFailed:
		return fmt.Sprintf("its latest generation (%d) failed and was rolled back", g.N)
	case lc.Status == StatusCleanupFailed:
		return fmt.Sprintf("an earlier generation of it is still live: agentpen down %s removes it", id)
	}
	return fmt.Sprintf("its latest generation (%d) never became ready (a bring-up in flight, or one killed: agentpen down %s removes it)", g.N, id)
}

func orNot(s string) string {
	if s == "" {
		return "not journalled"
	}
	return s
}
