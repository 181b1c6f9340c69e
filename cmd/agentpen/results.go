package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/agentpen/agentpen/internal/cli"
	"github.com/agentpen/agentpen/store"
	"github.com/agentpen/agentpen/workbench/results"
)

const resultsHelp = `Prints a campaign's episode results: one per episode its workspaces'
workbenches ended (graded, voided by a grading error, out of steps,
finished, replaced by a reset, closed), with the workspace, task, reward
and its parts, steps, how it ended (an error with its reason) and when.
They are what each workspace's workbench reported in its run directory,
which the daemon's user can write: checked, not proven. Results are kept in the campaign's state directory
(results.jsonl) and outlive the campaign: agentpen down collects the last
ones before it removes anything, and agentpen serve collects them about
once a second. This command first collects what the workspaces wrote
since (when the daemon answers; else it prints what is kept and says so
on stderr). Lines a workspace wrote that are not well-formed records of
its own task are refused, logged on stderr, and never kept.
--workspace N keeps one workspace's results.
Exit status: 0; 1 when the results cannot be read; 2 bad flags, or no
such campaign.`

func resultsCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := cli.NewFlagSet("agentpen", "results", "[flags] CAMPAIGN_ID", resultsHelp, stdout)
	var cf campaignFlags
	cf.register(fs, getenv)
	asJSON := fs.Bool("json", false, "print JSON: an array of results, oldest first")
	workspace := fs.Int("workspace", -1, "only this workspace's results (its index in the spec)")
	pos, err := fs.Parse(args, 1, 1)
	if err != nil {
		return err
	}
	root, c, err := cf.open(pos[0])
	if err != nil {
		return err
	}
	defer root.Close()
	defer c.Close()
	if a, err := cf.adapter(ctx, stderr, getenv); err != nil {
		if ue := (*cli.UsageError)(nil); errors.As(err, &ue) {
			return err
		}
		fmt.Fprintf(stderr, "agentpen results: not collecting (%v): what is kept follows\n", err)
	} else {
		defer a.Driver.Close()
		if _, err := a.NewResultsCollector().Collect(c); err != nil {
			fmt.Fprintf(stderr, "agentpen results: collecting: %v: what is kept follows\n", err)
		}
	}
	rs, err := c.Results()
	if err != nil {
		return err
	}
	out := []store.Result{}
	for _, r := range rs {
		if *workspace < 0 || r.Workspace == *workspace {
			out = append(out, r)
		}
	}
	if *asJSON {
		return cli.WriteJSON(stdout, out)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKSPACE\tTASK\tREWARD\tSTEPS\tEND\tCODE STOPPED\tENDED\tEPISODE")
	for _, r := range out {
		end := r.End
		if r.Reason != "" {
			end += " (" + r.Reason + ")"
		}
		// Why the last run that did not exit 0 stopped; "-" when every
		// run exited 0, or none ran.
		stopped := "-"
		if r.Stop != (results.RunStop{}) {
			stopped = r.Stop.String()
		}
		fmt.Fprintf(tw, "%d\t%s\t%.4g\t%d\t%s\t%s\t%s\t%s\n", r.Workspace, r.TaskID, r.Reward, r.Steps, end, stopped, r.EndedAt.Format("2006-01-02T15:04:05Z"), r.EpisodeID)
	}
	return tw.Flush()
}
