package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/cli"
	"github.com/agentpen/agentpen/store"
)

const reconcileHelp = `Brings every campaign of the state root in line with its journal, as agentpen serve does
when it starts, without serving (for cron or a systemd timer): a bring-up that did not finish
(its process was killed) is rolled back; a removal that did not finish, or whose cleanup was
not verified, is finished with the reason it began with; a campaign whose lifetime is over (past
its ttl_seconds, or idle for its idle_timeout_seconds: no reset or step reached its workspaces'
sockets) is removed, reason ttl or idle; the directory of a campaign whose journal holds no
generation (state empty: a create that stopped before its first record) is removed once nothing
on the daemon carries its id (action removed, reason empty: there is nothing to journal), and so
are the directories, which nothing lists, of creates killed before their first journal record.
Everything else is left as it is, and so is a campaign another process holds (a bring-up or a
removal in flight there). Each removal is by exact id, verified, with its cleanup report, as
agentpen down's; each action is journalled, so it is in the campaign's events (--log-format
json prints them on stderr). A summary goes to stdout (JSON with --json); --dry-run says what
it would do and does nothing.
A state root agentpen serve serves is refused: serve reconciles it itself.
Exit status: 0 done (or nothing to do), 1 a removal not verified or a campaign that could not be
reconciled, 2 bad input, 3 daemon unreachable, 4 a serve holds the state root.`

// reconciled is one campaign of agentpen reconcile's summary.
type reconciled struct {
	CampaignID string `json:"campaign_id"`
	// Status is what the journal said before.
	Status string `json:"status"`
	// Action: "left", "removed" (Reason says why), "in_flight" (another
	// process holds it), "unusable", "failed", or with --dry-run
	// "would_remove".
	Action  string `json:"action"`
	Reason  string `json:"reason,omitempty"`
	Cleanup string `json:"cleanup,omitempty"`
	Report  string `json:"report,omitempty"`
	Error   string `json:"error,omitempty"`
}

func reconcileCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := cli.NewFlagSet("agentpen", "reconcile", "[flags]", reconcileHelp, stdout)
	var cf campaignFlags
	cf.register(fs, getenv)
	asJSON := fs.Bool("json", false, "print the summary as JSON on stdout")
	dryRun := fs.Bool("dry-run", false, "say what would be done, and do nothing")
	if _, err := fs.Parse(args, 0, 0); err != nil {
		return err
	}
	// One reconciler of a state root at a time: a serve reconciles its own.
	root, lock, err := cf.rootAlone()
	if err != nil {
		return err
	}
	defer root.Close()
	defer lock.Unlock()
	a, view, err := cf.adapterWithProgress(ctx, stderr, getenv, "reconcile")
	if err != nil {
		return err
	}
	defer a.Driver.Close()
	defer view.finish()
	a.Progress = view.step
	var out []reconciled
	var failed []error
	if !*dryRun {
		// Creates killed before their first record made nothing: their
		// directories, which nothing lists, go.
		n, err := a.SweepCreates(ctx, root)
		if n > 0 {
			fmt.Fprintf(stderr, "agentpen reconcile: removed %d directories of creates killed before their first journal record\n", n)
		}
		if err != nil {
			failed = append(failed, fmt.Errorf("the directories of creates killed before their first journal record: %w", err))
		}
	}
	list, err := root.List()
	if err != nil {
		return err
	}
	for _, l := range list {
		r := reconciled{CampaignID: l.ID, Status: l.State.Status.String(), Action: "left"}
		if l.Err != nil {
			r.Action, r.Error = "unusable", l.Err.Error()
			out = append(out, r)
			continue
		}
		if l.State.Status == campaign.StatusEmpty {
			r.Action, r.Reason, err = discardOne(ctx, a, root, l, *dryRun)
			if err != nil {
				r.Error = err.Error()
				if r.Action == "failed" {
					failed = append(failed, fmt.Errorf("campaign %s: %w", l.ID, err))
				}
			}
			out = append(out, r)
			continue
		}
		r.Reason, r.Action, err = reconcileOne(ctx, a, root, l.ID, *dryRun)
		if err != nil {
			r.Error = err.Error()
		}
		if r.Action == "removed" {
			view.final(root, l.ID)
		}
		if c, oerr := root.Open(l.ID); oerr == nil && r.Action == "removed" {
			if st, rerr := c.Read(); rerr == nil {
				r.Cleanup, r.Report = st.Cleanup, c.ReportPath(st.CleanupReport)
			}
			c.Close()
		}
		if r.Action == "failed" || r.Cleanup == campaign.CleanupFailed {
			failed = append(failed, fmt.Errorf("campaign %s: %s", l.ID, orText(r.Error, "cleanup not verified")))
		}
		out = append(out, r)
	}
	view.finish()
	if *asJSON {
		if out == nil {
			out = []reconciled{}
		}
		if err := cli.WriteJSON(stdout, struct {
			DryRun    bool         `json:"dry_run,omitempty"`
			Campaigns []reconciled `json:"campaigns"`
		}{*dryRun, out}); err != nil {
			return err
		}
	} else {
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CAMPAIGN\tWAS\tACTION\tREASON\tCLEANUP")
		for _, r := range out {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.CampaignID, r.Status, r.Action, orText(r.Reason, "-"), orText(r.Cleanup, "-"))
		}
		tw.Flush()
	}
	if len(failed) > 0 {
		return errors.Join(failed...)
	}
	return nil
}

// reconcileOne reconciles one campaign (adapter.Reconcile, without
// waiting for a lock another process holds), or says what it would do.
func reconcileOne(ctx context.Context, a *adapter.Adapter, root *store.Root, id string, dryRun bool) (reason, action string, err error) {
	c, err := root.Open(id)
	if err != nil {
		return "", "failed", err
	}
	defer c.Close()
	if dryRun {
		st, err := c.Read()
		if err != nil {
			return "", "failed", err
		}
		last, _ := a.LastActivity(c)
		if reason = st.ReconcileReason(time.Now(), last); reason != "" {
			return reason, "would_remove", nil
		}
		return "", "left", nil
	}
	res, err := a.Reconcile(ctx, c, adapter.ReconcileOptions{})
	switch {
	case errors.Is(err, store.ErrLocked):
		return "", "in_flight", nil
	case res.Report != nil:
		return res.Reason, "removed", err
	case err != nil:
		return "", "failed", err
	}
	return "", "left", nil
}

// reasonEmpty is the summary's reason for an empty campaign directory
// removed (no removal is journalled: there is nothing to journal).
const reasonEmpty = "empty"

// discardOne removes (or with dryRun, says it would) the directory of a
// campaign whose journal holds no generation (adapter.DiscardEmpty).
func discardOne(ctx context.Context, a *adapter.Adapter, root *store.Root, l store.Listing, dryRun bool) (action, reason string, err error) {
	ok, err := a.DiscardEmpty(ctx, root, l, dryRun)
	switch {
	case errors.Is(err, store.ErrLocked):
		return "in_flight", "", nil
	case errors.Is(err, adapter.ErrStillNamed):
		return "left", "", err
	case err != nil:
		return "failed", "", err
	case ok && dryRun:
		return "would_remove", reasonEmpty, nil
	case ok:
		return "removed", reasonEmpty, nil
	}
	return "left", "", nil
}

func orText(s, or string) string {
	if s == "" {
		return or
	}
	return s
}
