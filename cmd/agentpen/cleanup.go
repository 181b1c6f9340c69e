package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/cleanup"
	"github.com/agentpen/agentpen/internal/cli"
	"github.com/agentpen/agentpen/store"
)

const downHelp = `Removes, by exact id, everything the campaign's journal records (every generation), after
resolving each create whose outcome was never recorded (by its exact name and the secret of that
create, a label recorded in its intent and nowhere else). Each resource is inspected first and
removed only when its labels prove it is this campaign's; then every id is inspected again (it
must be absent) and the daemon is asked for anything still carrying the campaign's label (there
must be none: a look-alike another daemon client made with copied labels is left alone and
reported as foreign, and the cleanup is not verified). Nothing is ever pruned or removed by a
name pattern or a label filter alone.

One progress line per resource goes to stderr; a summary (or the report with --json) to stdout.
The report (schema agentpen.cleanup.v1) is written as a new file in the campaign's state directory
(cleanup-<generation>-<n>.json; no report is ever rewritten) and its verdict journalled. A journal whose
last write did not complete (a final line without its newline) has that line cut first, and the
cut recorded; a corrupt journal (a complete line that is not a record) is not touched.
Exit status: 0 verified, 1 not verified (the report says why) or a corrupt journal, 2 bad input,
no such campaign, or state another user owns or can write, 3 daemon unreachable, 4 locked by
another agentpen process, 130/143 interrupted.`

func down(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := cli.NewFlagSet("agentpen", "down", "[flags] CAMPAIGN_ID", downHelp, stdout)
	var cf campaignFlags
	cf.register(fs, getenv)
	asJSON := fs.Bool("json", false, "print the cleanup report as JSON on stdout")
	pos, err := fs.Parse(args, 1, 1)
	if err != nil {
		return err
	}
	cc, err := cf.openCampaign(ctx, stderr, getenv, pos[0], "down "+pos[0])
	if err != nil {
		return err
	}
	defer cc.close()
	cc.a.Progress = cc.view.step
	rep, path, err := cc.a.Cleanup(ctx, cc.c, campaign.ReasonDown)
	cc.view.finish()
	cc.view.final(cc.root, pos[0])
	if rep == nil {
		return err
	}
	if werr := printCleanup(stdout, rep, path, *asJSON); werr != nil {
		return errors.Join(err, werr)
	}
	return printedNotVerified(err, rep, *asJSON)
}

// printedNotVerified is err once the report was printed: a cleanup not
// verified says how many checks failed and where they are, not each again
// (printCleanup named each, or the JSON holds them); any other error
// joined to it is kept.
func printedNotVerified(err error, rep *cleanup.Report, asJSON bool) error {
	if !errors.Is(err, adapter.ErrNotVerified) {
		return err
	}
	where := "each named above"
	if asJSON {
		where = "in the report on stdout"
	}
	n := len(rep.FailedChecks)
	errs := []error{fmt.Errorf("campaign %s: %w: %d failed check%s (%s)", rep.CampaignID, adapter.ErrNotVerified, n, map[bool]string{true: "", false: "s"}[n == 1], where)}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if e != nil && !errors.Is(e, adapter.ErrNotVerified) {
				errs = append(errs, e)
			}
		}
	}
	return errors.Join(errs...)
}

const verifyHelp = `Verifies, read-only, that nothing of the campaign remains: every id its journal ever recorded
must be absent, every intent resolved, and nothing on the daemon may carry the campaign's label.
Removes nothing and writes nothing (a torn final journal line is read past, not cut).
Exit status: 0 verified, 1 while anything of the campaign remains or a corrupt journal, 2 bad
input, no such campaign, or state another user owns or can write, 3 daemon unreachable.`

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
	cc, err := cf.openCampaign(ctx, stderr, getenv, pos[0], "")
	if err != nil {
		return err
	}
	defer cc.close()
	rep, err := cc.a.Verify(ctx, cc.c)
	if rep == nil {
		return err
	}
	if werr := printCleanup(stdout, rep, "", *asJSON); werr != nil {
		return errors.Join(err, werr)
	}
	return printedNotVerified(err, rep, *asJSON)
}

// printCleanup prints a cleanup report: as JSON, or what was removed (by
// kind and role), how long it took, and a line per resource left and per
// failed check.
func printCleanup(w io.Writer, rep *cleanup.Report, path string, asJSON bool) error {
	if asJSON {
		return cli.WriteJSON(w, rep)
	}
	what := "cleanup"
	if rep.ReadOnly {
		what = "verification"
	}
	took := (time.Duration(rep.Timings.TotalMS) * time.Millisecond).Round(10 * time.Millisecond)
	fmt.Fprintf(w, "%s of %s: %s in %s\n", what, rep.CampaignID, rep.Status, took)
	if !rep.ReadOnly {
		fmt.Fprintf(w, "  removed       %s\n", tally(rep.Removed))
	}
	if len(rep.AlreadyGone) > 0 || rep.ReadOnly {
		fmt.Fprintf(w, "  already gone  %s\n", tally(rep.AlreadyGone))
	}
	for _, e := range rep.LeftAlone {
		fmt.Fprintf(w, "  left alone: %s: %s\n", resourceText(e.Kind, e.Name, e.ID), e.Reason)
	}
	for _, f := range rep.Unexpected {
		fmt.Fprintf(w, "  foreign, left alone: %s carries the campaign's labels (instance %s), and no record of its journal proves it agentpen's\n", resourceText(f.Kind, f.Name, f.ID), orNone(f.Labels[campaign.LabelInstance]))
	}
	for _, c := range rep.FailedChecks {
		fmt.Fprintf(w, "  failed check: %s\n", c)
	}
	if path != "" {
		fmt.Fprintf(w, "  report        %s\n", path)
	}
	return nil
}

// resourceText names one resource for a person: "container NAME
// (ID12)", "network NAME (ID12)", "directory PATH" (a directory's name is
// its path and its id); a resource without a name or an id shows what it
// has.
func resourceText(kind campaign.Kind, name, id string) string {
	k := string(kind)
	if kind == campaign.KindDir {
		k = "directory"
		if id == "" || id == name {
			return k + " " + name
		}
	}
	switch {
	case name == "":
		return k + " " + shortID(id)
	case id == "":
		return k + " " + name + " (no id recorded)"
	}
	return k + " " + name + " (" + shortID(id) + ")"
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// tally counts entries by kind, containers also by role: "4 containers
// (1 server, 3 workspace), 4 directories, 1 network"; "nothing" for none.
func tally(es []cleanup.Entry) string {
	if len(es) == 0 {
		return "nothing"
	}
	kinds := map[campaign.Kind]int{}
	roles := map[string]int{}
	for _, e := range es {
		kinds[e.Kind]++
		if e.Kind == campaign.KindContainer {
			roles[e.Role]++
		}
	}
	var parts []string
	for _, k := range []struct {
		kind       campaign.Kind
		one, other string
	}{{campaign.KindContainer, "container", "containers"}, {campaign.KindDir, "directory", "directories"}, {campaign.KindNetwork, "network", "networks"}} {
		n := kinds[k.kind]
		if n == 0 {
			continue
		}
		p := fmt.Sprintf("%d %s", n, map[bool]string{true: k.one, false: k.other}[n == 1])
		if k.kind == campaign.KindContainer {
			var rs []string
			for _, r := range []string{campaign.RoleServer, campaign.RoleWork} {
				if roles[r] > 0 {
					rs = append(rs, fmt.Sprintf("%d %s", roles[r], r))
				}
			}
			if len(rs) > 0 {
				p += " (" + strings.Join(rs, ", ") + ")"
			}
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}

func shortID(id string) string {
	if len(id) > 12 && !strings.Contains(id, "/") {
		return id[:12]
	}
	return id
}

const lsHelp = `Lists the campaigns in the state root: generation, state (read from the journal, in the
launcher API's words) and what of each is live on the daemon (containers and networks carrying
its label); --json adds each workspace (index, agent id, task, container id and its episode
server's socket on the host, for workbench client). States:
  ready               up, and its latest attestation (if any) passed
  attestation_failed  up, but its latest attestation failed (kept with up --keep-failed, or a
                      later agentpen attest): agentpen attest again, or agentpen down
  starting_or_failed  live resources, never ready and attested, no cleanup since (a bring-up
                      in flight, or one killed, also during its attestation: agentpen down)
  cleanup_failed      a removal that was not verified or did not finish (a down or a DELETE
                      killed), or an earlier generation still live: agentpen down again
  removed             nothing journalled is live
  empty               its journal holds no generation: a create that stopped before its first
                      record (an older agentpen's); agentpen reconcile removes its directory
                      once nothing on the daemon carries its id
  unusable            its journal is corrupt (the error names the file and line), or its
                      directory or journal is another user's or writable by others
The NOTE column (shown when there is a note; notes in --json) says what the daemon holds that the journal does not
expect: journalled containers gone from the daemon (removed outside agentpen, or lost), or
resources still labelled with a removed campaign (agentpen orphans lists them).
An unusable campaign is listed with its error (on stderr, and as "error" in --json) and never
hides the others.
Exit status: 0; 1 when any campaign is unusable (the others are listed all the same); 2 bad
flags or an unusable state root; 3 daemon unreachable.`

// lsEntry is one campaign in agentpen ls --json.
type lsEntry struct {
	CampaignID     string `json:"campaign_id"`
	Generation     int    `json:"generation"`
	State          string `json:"state"`
	LiveContainers int    `json:"live_containers"`
	LiveNetworks   int    `json:"live_networks"`
	JournalledLive int    `json:"journalled_live"`
	// MissingContainers counts the latest generation's journalled live
	// containers the daemon does not hold.
	MissingContainers int      `json:"missing_containers"`
	Notes             []string `json:"notes,omitempty"`
	LastCleanup       string   `json:"last_cleanup,omitempty"`
	StateDir          string   `json:"state_dir"`
	Instance          string   `json:"instance,omitempty"`
	// Attestation and Cleanup are the latest reports of the latest
	// generation, as the journal names them.
	Attestation string `json:"attestation,omitempty"`
	Cleanup     string `json:"cleanup,omitempty"`
	// Error says why the campaign's state cannot be used (unusable).
	Error string `json:"error,omitempty"`
	// Workspaces are the latest generation's workspaces, while their run
	// directories exist.
	Workspaces []adapter.Workspace `json:"workspaces,omitempty"`
}

// errUnsound ends a listing that showed every campaign but could not use
// some (the command printed which): exit 1.
var errUnsound = fmt.Errorf("some campaigns' state cannot be used: %w", cli.ErrReported)

func ls(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := cli.NewFlagSet("agentpen", "ls", "[flags]", lsHelp, stdout)
	var cf campaignFlags
	cf.register(fs, getenv)
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := fs.Parse(args, 0, 0); err != nil {
		return err
	}
	root, err := cf.root(false)
	if err != nil {
		return err
	}
	defer root.Close()
	a, err := cf.adapter(ctx, stderr, getenv)
	if err != nil {
		return err
	}
	defer a.Driver.Close()
	list, err := root.List()
	if err != nil {
		return err
	}
	entries := []lsEntry{}
	unsound := false
	for _, l := range list {
		found, err := a.Driver.List(ctx, campaign.LabelCampaign+"="+l.ID)
		if err != nil {
			return err
		}
		entries = append(entries, lsEntryOf(a, root, l, found))
		e := &entries[len(entries)-1]
		switch {
		case l.Err != nil:
			unsound = true
			fmt.Fprintf(stderr, "agentpen ls: campaign %s is %s: %v\n", l.ID, e.State, l.Err)
		case l.State.Torn != nil:
			fmt.Fprintf(stderr, "agentpen ls: campaign %s: journal %s: ignoring %s; the next agentpen down or up of it cuts it\n",
				l.ID, filepath.Join(l.Path, campaign.JournalFile), l.State.Torn)
		}
	}
	if *asJSON {
		if err := cli.WriteJSON(stdout, entries); err != nil {
			return err
		}
	} else {
		// The NOTE column only when there is a note (no trailing blanks).
		notes := slices.ContainsFunc(entries, func(e lsEntry) bool { return len(e.Notes) > 0 })
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		head := "CAMPAIGN\tGEN\tSTATE\tCONTAINERS\tNETWORKS"
		if notes {
			head += "\tNOTE"
		}
		fmt.Fprintln(tw, head)
		for _, e := range entries {
			line := fmt.Sprintf("%s\t%d\t%s\t%d\t%d", e.CampaignID, e.Generation, e.State, e.LiveContainers, e.LiveNetworks)
			if notes {
				line += "\t" + strings.Join(e.Notes, "; ")
			}
			fmt.Fprintln(tw, line)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if unsound {
		return errUnsound
	}
	return nil
}

// lsEntryOf describes one listed campaign: its state as the journal says
// it (campaign.Status), and what the daemon holds with its label (found)
// that the journal does not expect, as notes.
func lsEntryOf(a *adapter.Adapter, root *store.Root, l store.Listing, found []cleanup.Found) lsEntry {
	st := l.State
	g := st.Latest()
	e := lsEntry{CampaignID: l.ID, Generation: g.N, Instance: g.Instance, State: st.Status.String(),
		JournalledLive: len(st.Live()), LastCleanup: st.Cleanup, StateDir: l.Path}
	if l.Err != nil {
		e.State, e.Error = campaign.StatusUnusable.String(), l.Err.Error()
	}
	present := map[string]bool{}
	for _, f := range found {
		present[f.ID] = true
		if f.Kind == campaign.KindNetwork {
			e.LiveNetworks++
		} else {
			e.LiveContainers++
		}
	}
	if l.Err != nil {
		return e
	}
	for _, r := range g.Live() {
		if r.Kind == campaign.KindContainer && r.ID != "" && !present[r.ID] {
			e.MissingContainers++
		}
	}
	if st.Status == campaign.StatusEmpty && l.Err == nil {
		e.Notes = append(e.Notes, "its journal holds no generation (a create that stopped before its first record): agentpen reconcile removes its directory")
	}
	if e.MissingContainers > 0 {
		e.Notes = append(e.Notes, fmt.Sprintf("%d journalled containers gone from the daemon: agentpen down %s removes the rest and verifies", e.MissingContainers, l.ID))
	}
	if len(st.Live()) == 0 && len(found) > 0 {
		e.Notes = append(e.Notes, fmt.Sprintf("%d resources still carry its label (agentpen orphans)", len(found)))
	}
	if sc, err := root.Open(l.ID); err == nil {
		if st.AttestationReport != "" {
			e.Attestation = sc.ReportPath(st.AttestationReport)
		}
		if st.CleanupReport != "" {
			e.Cleanup = sc.ReportPath(st.CleanupReport)
		}
		e.Workspaces, _ = a.Workspaces(sc, st)
		sc.Close()
	}
	return e
}

const orphansHelp = `Lists, read-only, the containers and networks labelled as agentpen's that no journal in the
state root (named on the first line) accounts for by id, with what their labels claim and whether their ownership can be
proven: a resource of the name of a create a journal here recorded as an intent, without its id,
carrying that create's secret (a label recorded only in the intent), is that create's. Labels
alone prove nothing: any daemon client can copy them from a live resource. --remove ID removes
exactly that id (given whole, or as an unambiguous prefix of at least 12 hex digits, as listed),
and only when its ownership is proven that way; anything else is refused and left alone.
A campaign whose journal is corrupt or untrusted hides nothing: what carries its id is listed
(never provable), and the campaign is named on stderr.
Exit status: 0; 1 when a --remove was refused or not verified, or a campaign's state cannot be
used (the rest is listed all the same); 2 bad flags or an unusable state root; 3 daemon
unreachable.`

func orphans(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := cli.NewFlagSet("agentpen", "orphans", "[flags] [--remove ID ...]", orphansHelp, stdout)
	var cf campaignFlags
	cf.register(fs, getenv)
	asJSON := fs.Bool("json", false, "print JSON")
	remove := fs.Bool("remove", false, "remove the ids given as arguments (whole, or a unique prefix of 12 or more hex digits; each must be a provable orphan)")
	ids, err := fs.Parse(args, 0, -1)
	if err != nil {
		return err
	}
	if !*remove && len(ids) > 0 {
		return &cli.UsageError{Msg: fmt.Sprintf("unexpected argument %q (ids are taken only with --remove)", ids[0]), Hint: "agentpen orphans --help"}
	}
	if *remove && len(ids) == 0 {
		return &cli.UsageError{Msg: "--remove needs at least one id", Hint: "agentpen orphans --help"}
	}
	root, err := cf.root(false)
	if err != nil {
		return err
	}
	defer root.Close()
	a, err := cf.adapter(ctx, stderr, getenv)
	if err != nil {
		return err
	}
	defer a.Driver.Close()
	if *remove {
		var errs []error
		for _, id := range ids {
			o, err := a.RemoveOrphan(ctx, root, id)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			fmt.Fprintf(stdout, "removed %s %s %s\n", o.Resource.Kind, o.Resource.Name, o.Resource.ID)
		}
		return errors.Join(errs...)
	}
	list, err := a.Orphans(ctx, root)
	if err != nil {
		return err
	}
	if *asJSON {
		if list == nil {
			list = []adapter.Orphan{}
		}
		err = cli.WriteJSON(stdout, list)
	} else {
		fmt.Fprintf(stdout, "state root %s: %d agentpen-labelled resources no journal here accounts for\n", root.Path(), len(list))
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "KIND\tID\tNAME\tCAMPAIGN\tPROVABLE\tWHY")
		for _, o := range list {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\t%s\n", o.Kind, shortID(o.ID), o.Name, o.CampaignID, o.Provable, o.Why)
		}
		err = tw.Flush()
	}
	if err != nil {
		return err
	}
	return unsoundCampaigns(root, "orphans", stderr)
}

// unsoundCampaigns names on stderr each campaign of the state root whose
// state cannot be used (after a whole-root command listed everything it
// could) and returns errUnsound when there is one; it names each empty
// one (campaign.StatusEmpty) too.
func unsoundCampaigns(root *store.Root, cmd string, stderr io.Writer) error {
	list, err := root.List()
	if err != nil {
		return err
	}
	var bad error
	for _, l := range list {
		switch {
		case l.Err != nil:
			fmt.Fprintf(stderr, "agentpen %s: campaign %s is %s: %v\n", cmd, l.ID, campaign.StatusUnusable, l.Err)
			bad = errUnsound
		case l.State.Status == campaign.StatusEmpty:
			// Not unsound: it accounts for nothing, and says so.
			fmt.Fprintf(stderr, "agentpen %s: campaign %s is %s: %s\n", cmd, l.ID, campaign.StatusEmpty, l.State.Reason(l.ID))
		}
	}
	return bad
}
