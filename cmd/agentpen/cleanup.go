package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/cleanup"
	"github.com/agentpen/agentpen/internal/cli"
)

const downHelp = `Removes, by exact id, everything the campaign's journal records (every generation), after
resolving each create whose outcome was never recorded (by exact name and the generation's
instance label) and listing what carries a generation's instance label as a final net. Each
resource is inspected first and removed only when its labels prove it is this campaign's; then
every id is inspected again (it must be absent) and the daemon is asked for anything still
carrying the campaign's label (there must be none). Nothing is ever pruned or removed by a name
pattern or a label filter alone.

One progress line per resource goes to stderr; a summary (or the report with --json) to stdout.
The report (schema agentpen.cleanup.v1) is written to <state dir>/cleanup.json.
Exit status: 0 verified, 1 not verified (the report says why), 2 bad input or no such campaign,
3 daemon unreachable, 4 locked by another agentpen process, 130/143 interrupted.`

func down(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := cli.NewFlagSet("agentpen", "down", "[flags] CAMPAIGN_ID", downHelp, stdout)
	var cf campaignFlags
	cf.register(fs, getenv)
	asJSON := fs.Bool("json", false, "print the cleanup report as JSON on stdout")
	pos, err := fs.Parse(args, 1, 1)
	if err != nil {
		return err
	}
	if err := campaign.CheckID("campaign_id", pos[0]); err != nil {
		return err
	}
	a, err := cf.adapter(ctx, stderr, getenv)
	if err != nil {
		return err
	}
	defer a.Docker.Close()
	rep, err := a.Cleanup(ctx, pos[0])
	if rep == nil {
		return err
	}
	if werr := printCleanup(stdout, rep, filepath.Join(a.CampaignDir(pos[0]), adapter.CleanupReportFile), *asJSON); werr != nil {
		return errors.Join(err, werr)
	}
	return err
}

const verifyHelp = `Verifies, read-only, that nothing of the campaign remains: every id its journal ever recorded
must be absent, every intent resolved, and nothing on the daemon may carry the campaign's label.
Removes nothing and writes nothing.
Exit status: 0 verified, 1 while anything of the campaign remains, 2 bad input or no such
campaign, 3 daemon unreachable.`

// cleanupCmd is "agentpen cleanup verify".
func cleanupCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	if len(args) > 0 && args[0] == "verify" {
		return cli.InCommand("agentpen cleanup verify", cleanupVerify(ctx, args[1:], stdout, stderr, getenv))
	}
	if len(args) > 0 && (args[0] == "--help" || args[0] == "-h") {
		fmt.Fprint(stdout, "Usage: agentpen cleanup verify [flags] CAMPAIGN_ID\n\n"+verifyHelp+"\n")
		return cli.ErrHelp
	}
	return &cli.UsageError{Msg: "missing subcommand: verify", Hint: "agentpen cleanup verify --help"}
}

func cleanupVerify(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := cli.NewFlagSet("agentpen", "cleanup verify", "[flags] CAMPAIGN_ID", verifyHelp, stdout)
	var cf campaignFlags
	cf.register(fs, getenv)
	asJSON := fs.Bool("json", false, "print the verification report as JSON on stdout")
	pos, err := fs.Parse(args, 1, 1)
	if err != nil {
		return err
	}
	if err := campaign.CheckID("campaign_id", pos[0]); err != nil {
		return err
	}
	a, err := cf.adapter(ctx, stderr, getenv)
	if err != nil {
		return err
	}
	defer a.Docker.Close()
	rep, err := a.Verify(ctx, pos[0])
	if rep == nil {
		return err
	}
	if werr := printCleanup(stdout, rep, "", *asJSON); werr != nil {
		return errors.Join(err, werr)
	}
	return err
}

// printCleanup prints a cleanup report: as JSON, or a summary with a line
// per resource left and per failed check.
func printCleanup(w io.Writer, rep *cleanup.Report, path string, asJSON bool) error {
	if asJSON {
		return cli.WriteJSON(w, rep)
	}
	what := "cleanup"
	if rep.ReadOnly {
		what = "verification"
	}
	fmt.Fprintf(w, "%s of %s: %s (%d removed, %d already gone, %d left alone, %d unexpected) in %s\n",
		what, rep.CampaignID, rep.Status, len(rep.Removed), len(rep.AlreadyGone), len(rep.LeftAlone), len(rep.Unexpected),
		(time.Duration(rep.Timings.TotalMS) * time.Millisecond).String())
	for _, e := range rep.LeftAlone {
		fmt.Fprintf(w, "  left alone: %s %s %s: %s\n", e.Kind, e.Name, shortID(e.ID), e.Reason)
	}
	for _, f := range rep.Unexpected {
		fmt.Fprintf(w, "  still labelled with the campaign: %s %s %s (instance %s)\n", f.Kind, f.Name, shortID(f.ID), f.Labels[campaign.LabelInstance])
	}
	for _, c := range rep.FailedChecks {
		fmt.Fprintf(w, "  failed check: %s\n", c)
	}
	if path != "" {
		fmt.Fprintf(w, "report: %s\n", path)
	}
	return nil
}

func shortID(id string) string {
	if len(id) > 12 && !strings.Contains(id, "/") {
		return id[:12]
	}
	return id
}

const lsHelp = `Lists the campaigns in the state root: generation, state and what of each is live on the
daemon (containers and networks carrying its label). States: up (the latest generation is
ready and has live resources), starting-or-failed (live resources, not ready, no cleanup
since), failed (a cleanup or rollback was not verified, or the daemon still holds labelled
resources after one), down-verified (nothing journalled is live and nothing on the daemon
carries the campaign's label).
Exit status: 0, 2 bad flags, 3 daemon unreachable.`

// lsEntry is one campaign in agentpen ls --json.
type lsEntry struct {
	CampaignID       string `json:"campaign_id"`
	Generation       int    `json:"generation"`
	State            string `json:"state"`
	LiveContainers   int    `json:"live_containers"`
	LiveNetworks     int    `json:"live_networks"`
	JournalledLive   int    `json:"journalled_live"`
	LastCleanup      string `json:"last_cleanup,omitempty"`
	StateDir         string `json:"state_dir"`
	InstanceOfLatest string `json:"instance,omitempty"`
}

func ls(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := cli.NewFlagSet("agentpen", "ls", "[flags]", lsHelp, stdout)
	var cf campaignFlags
	cf.register(fs, getenv)
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := fs.Parse(args, 0, 0); err != nil {
		return err
	}
	a, err := cf.adapter(ctx, stderr, getenv)
	if err != nil {
		return err
	}
	defer a.Docker.Close()
	states, err := a.Campaigns()
	if err != nil {
		return err
	}
	entries := []lsEntry{}
	for _, st := range states {
		found, err := a.Labelled(ctx, campaign.LabelCampaign+"="+st.CampaignID)
		if err != nil {
			return err
		}
		e := lsEntry{CampaignID: st.CampaignID, Generation: st.Latest().N, InstanceOfLatest: st.Latest().Instance,
			JournalledLive: len(st.Live()), LastCleanup: st.LastCleanup, StateDir: st.Dir}
		for _, f := range found {
			if f.Kind == campaign.KindNetwork {
				e.LiveNetworks++
			} else {
				e.LiveContainers++
			}
		}
		e.State = campaignState(st, len(found))
		entries = append(entries, e)
	}
	if *asJSON {
		return cli.WriteJSON(stdout, entries)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CAMPAIGN\tGEN\tSTATE\tCONTAINERS\tNETWORKS")
	for _, e := range entries {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\n", e.CampaignID, e.Generation, e.State, e.LiveContainers, e.LiveNetworks)
	}
	return tw.Flush()
}

// campaignState names a campaign's state from its journal and what the
// daemon still holds with its label.
func campaignState(st adapter.CampaignState, onDaemon int) string {
	live := len(st.Live())
	switch {
	case live == 0 && onDaemon == 0:
		return "down-verified"
	case live == 0, st.LastCleanup == string(cleanup.Failed):
		return "failed"
	case st.Ready:
		return "up"
	}
	return "starting-or-failed"
}

const orphansHelp = `Lists, read-only, the containers and networks labelled as agentpen's that no journal in the
state root accounts for by id, with what their labels claim and whether their ownership can be
proven: a resource whose campaign and instance nonce are a generation journalled here is that
generation's (its create was lost from the journal). --remove ID removes exactly that id, and
only when its ownership is proven that way; anything else is refused and left alone.
Exit status: 0, 1 when a --remove was refused or not verified, 2 bad flags, 3 daemon unreachable.`

func orphans(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := cli.NewFlagSet("agentpen", "orphans", "[flags] [--remove ID ...]", orphansHelp, stdout)
	var cf campaignFlags
	cf.register(fs, getenv)
	asJSON := fs.Bool("json", false, "print JSON")
	remove := fs.Bool("remove", false, "remove the exact ids given as arguments (each must be a provable orphan)")
	ids, err := fs.Parse(args, 0, -1)
	if err != nil {
		return err
	}
	if !*remove && len(ids) > 0 {
		return &cli.UsageError{Msg: fmt.Sprintf("unexpected argument %q (ids are taken only with --remove)", ids[0]), Hint: "agentpen orphans --help"}
	}
	if *remove && len(ids) == 0 {
		return &cli.UsageError{Msg: "--remove needs at least one exact id", Hint: "agentpen orphans --help"}
	}
	a, err := cf.adapter(ctx, stderr, getenv)
	if err != nil {
		return err
	}
	defer a.Docker.Close()
	if *remove {
		var errs []error
		for _, id := range ids {
			o, err := a.RemoveOrphan(ctx, id)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			fmt.Fprintf(stdout, "removed %s %s %s\n", o.Resource.Kind, o.Resource.Name, shortID(o.Resource.ID))
		}
		return errors.Join(errs...)
	}
	list, err := a.Orphans(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		if list == nil {
			list = []adapter.Orphan{}
		}
		return cli.WriteJSON(stdout, list)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tID\tNAME\tCAMPAIGN\tPROVABLE\tWHY")
	for _, o := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\t%s\n", o.Kind, shortID(o.ID), o.Name, o.CampaignID, o.Provable, o.Why)
	}
	return tw.Flush()
}
