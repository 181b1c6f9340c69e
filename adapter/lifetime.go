package adapter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/cleanup"
	"github.com/agentpen/agentpen/store"
)

// A campaign's lifetime (campaign.Lifetime) is journalled; enforcing it
// is removing the campaign, by exact id, as agentpen down does, when
// campaign.Lifecycle.Due says so, with the reason ttl or idle. Idle means
// no episode traffic: the workbench in a campaign workspace marks each
// reset and step it serves, at most once a second, whoever sent it (the
// API's proxy, or a client on its socket), and the driver reads the mark
// (driver.Workspaces.Activity: a Docker workspace's socket's modification
// time, read without following any link). See docs/decisions.md.

// SetLifetime journals l as the lifetime of the campaign's latest
// generation (campaign.OpLifetime), under the campaign's lock. Only a
// campaign that is up gets one (ErrNotUp otherwise).
func (a *Adapter) SetLifetime(ctx context.Context, c *store.Campaign, l campaign.Lifetime) error {
	lock, err := a.lockCampaign(ctx, c)
	if err != nil {
		return err
	}
	defer lock.Unlock()
	st, err := a.readState(c)
	if err != nil {
		return err
	}
	if !st.Status.Up() {
		return &notUpError{fmt.Sprintf("campaign %q is %s: only a campaign that is up gets a lifetime (%s)", c.ID, st.Status, st.Reason(c.ID))}
	}
	j, err := a.openJournal(c)
	if err != nil {
		return err
	}
	defer j.Close()
	return j.Append(l.Record(st.Latest().N))
}

// LastActivity is the last moment a workspace of the campaign's latest
// generation served a reset or a step (zero when none can be read).
func (a *Adapter) LastActivity(c *store.Campaign) (time.Time, error) {
	st, err := a.readState(c)
	if err != nil {
		return time.Time{}, err
	}
	return a.lastActivity(st), nil
}

func (a *Adapter) lastActivity(st store.State) time.Time {
	return a.Driver.Activity(context.Background(), st.Latest().Live())
}

// Warn journals a warning of the removal the campaign's lifetime makes
// next (campaign.OpExpiring), under its lock and on the state read under
// it, when one is due at now with lead (campaign.Lifecycle.Warning: the
// campaign is up, the deadline lead away at most, and not warned of
// yet); due says whether it did. A campaign another process holds for
// longer than the lock's wait is an error that wraps store.ErrLocked.
func (a *Adapter) Warn(ctx context.Context, c *store.Campaign, now time.Time, lead time.Duration) (e campaign.Expiry, due bool, err error) {
	lock, err := a.lockCampaign(ctx, c)
	if err != nil {
		return campaign.Expiry{}, false, err
	}
	defer lock.Unlock()
	st, err := a.readState(c)
	if err != nil {
		return campaign.Expiry{}, false, err
	}
	if e, due, _ = st.Warning(now, a.lastActivity(st), lead); !due {
		return e, false, nil
	}
	j, err := a.openJournal(c)
	if err != nil {
		return e, false, err
	}
	defer j.Close()
	if err := j.Append(e.Record(st.Latest().N)); err != nil {
		return e, false, err
	}
	a.log().Info("campaign expiring", "campaign", c.ID, "reason", e.Reason, "deadline", e.Deadline.UTC())
	return e, true, nil
}

// ReconcileOptions say what Reconcile may do.
type ReconcileOptions struct {
	// Now is the time the campaign's lifetime is judged at (zero: now).
	Now time.Time
	// ExpiryOnly: remove the campaign only when it is up and its lifetime
	// says so (a running service's timer), never for a bring-up or a
	// removal left unfinished.
	ExpiryOnly bool
	// LockWait bounds waiting for the campaign's lock; 0 is none: a
	// campaign another process holds (a bring-up in flight) is left alone,
	// with an error that wraps store.ErrLocked.
	LockWait time.Duration
	// LauncherSeen is when the launcher that created the campaign was
	// last seen (the caller watched it: an event stream of it open, now;
	// else when the last one closed, or its last keepalive). With
	// ExpiryOnly, a campaign tied to its launcher whose launcher timeout
	// has passed since is removed, reason launcher_gone
	// (campaign.Lifecycle.LauncherGone). Zero: not known, never removed
	// for it (agentpen reconcile watches no launcher).
	LauncherSeen time.Time
}

// Reconciled is what Reconcile did.
type Reconciled struct {
	// Reason is why the campaign was removed (campaign.RemovalReasons),
	// "" when it was left as it is.
	Reason string
	// Status is the campaign's status before (as read under its lock).
	Status campaign.Status
	// Report and ReportPath are the removal's cleanup report.
	Report     *cleanup.Report
	ReportPath string
}

// Reconcile brings the campaign in line with its journal, under its lock
// and on the state read under it: a bring-up that never finished (its
// process is gone, or it would hold the lock) is rolled back, and
// journalled so (campaign.OpRolledBack); a removal that did not finish, or
// whose cleanup was not verified, is finished with the reason it began
// with; a campaign that is up and whose lifetime is over (past its
// deadline, or idle for its timeout: LastActivity) is removed, reason ttl
// or idle, or, with ExpiryOnly and LauncherSeen, one whose launcher is
// gone (launcher_gone). Anything else is left alone (Reason ""). The
// error wraps ErrNotVerified when the removal's report is not verified.
func (a *Adapter) Reconcile(ctx context.Context, c *store.Campaign, opts ReconcileOptions) (Reconciled, error) {
	l, err := a.locks()
	if err != nil {
		return Reconciled{}, err
	}
	lock, err := a.takeAlone(c.Key, func() (*store.Lock, error) { return l.Campaign(ctx, c.Key, opts.LockWait) })
	if err != nil {
		return Reconciled{}, err
	}
	defer lock.Unlock()
	st, err := a.readState(c)
	if err != nil {
		return Reconciled{Status: st.Status}, err
	}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	res := Reconciled{Status: st.Status}
	active := a.lastActivity(st)
	if opts.ExpiryOnly {
		res.Reason, _ = st.Due(now, active)
		if gone, _ := st.LauncherGone(now, opts.LauncherSeen); res.Reason == "" && gone {
			res.Reason = campaign.ReasonLauncherGone
		}
	} else {
		res.Reason = st.ReconcileReason(now, active)
	}
	if res.Reason == "" {
		return res, nil
	}
	j, err := a.openJournal(c)
	if err != nil {
		return res, err
	}
	defer j.Close()
	a.log().Info("reconcile: removing the campaign", "campaign", c.ID, "status", st.Status, "reason", res.Reason)
	// As Cleanup does: the results still in the run directories first.
	if _, err := a.CollectResults(c); err != nil {
		a.log().Warn("results: not collected before removal", "campaign", c.ID, "err", err)
	}
	rep := a.cleanupJournal(ctx, c, j, cleanupOptions{reason: res.Reason})
	res.Report = &rep
	path, ferr := a.finishReport(ctx, c, j, &rep)
	res.ReportPath = path
	if res.Reason == campaign.ReasonRollback {
		note := fmt.Sprintf("the bring-up of generation %d did not finish (its process ended); rolled back by reconcile: cleanup %s", st.Latest().N, rep.Status)
		ferr = errors.Join(ferr, j.Append(campaign.Record{Op: campaign.OpRolledBack, Gen: st.Latest().N, Note: note}))
	}
	return res, ferr
}
