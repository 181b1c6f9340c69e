// Package campaign is agentpen's pure model of a campaign: the launcher's
// spec (CampaignSpec), its validation (ValidationError, ErrInvalid), the
// plan computed from it before anything is created (Plan: names, opaque
// agent ids, DNS aliases, labels, environment), the ownership rule for
// labels (OwnedBy), the daemon identity both bring-up and attestation speak
// of (Daemon), and the campaign's journal (Journal, Record, Resources): the
// append-only, fsync'd record of what agentpen meant to create, what it
// created by id, and what it removed. A journal's torn final line (a write
// that did not complete) is ignored on reading and cut before the next
// append; a complete line that is not a record is corruption
// (CorruptError), which nothing acts on; and a journal or directory
// another user owns or can write is refused (TrustError, CheckPrivate).
//
// It uses the standard library only. It never talks to Docker, the
// network or a subprocess (a dependency test in the repository root
// enforces that): the adapter does the I/O and hands this package's types
// to the pure attest and cleanup packages. The only file it touches is a
// journal, in a directory its caller names.
//
// The task id of a workspace never appears in anything the agent can see:
// NewPlan refuses any launcher value that would spell it (raw or as a DNS
// slug) in a name, alias, label, command or environment variable, and
// names everything after the opaque agent id instead.
package campaign
