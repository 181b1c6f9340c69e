package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/cli"
	"github.com/agentpen/agentpen/workbench/tasks"
)

// addResult is what agentpen add prints with --json.
type addResult struct {
	CampaignID string `json:"campaign_id"`
	Workspace  any    `json:"workspace"`
	Pool       string `json:"pool"`
	Slot       int    `json:"slot"`
	Refilled   int    `json:"refilled"`
}

func addCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := cli.NewFlagSet("agentpen", "add", "[flags] CAMPAIGN_ID TASK_ID",
		"Binds TASK_ID to a ready, attested, never-used workspace of the campaign's pool (its spec's\n"+
			"pool) and prints it: its opaque agent id and the workbench's unix socket on this host. When\n"+
			"the pool is drained a workspace is made, awaited and attested for the claim (\"cold\").\n"+
			"The claim is journalled (which task, which workspace, when) under the campaign's lock; a\n"+
			"workspace is claimed once and goes with its campaign (agentpen down). Then the pool is\n"+
			"refilled before add returns (agentpen serve refills in the background instead).\n"+
			"Exit status: 0 claimed; 1 failure; 2 bad input, no such campaign, a campaign that is not\n"+
			"ready or has no pool; 4 the task and attempt are claimed already, or the campaign is locked.",
		stdout)
	var cf campaignFlags
	cf.register(fs, getenv)
	var af attestFlags
	af.register(fs)
	attempt := fs.String("attempt", "", "an attempt id: tells two claims of one task apart")
	asJSON := fs.Bool("json", false, "print the claim as JSON")
	pos, err := fs.Parse(args, 2, 2)
	if err != nil {
		return err
	}
	opts, err := af.options()
	if err != nil {
		return err
	}
	if err := tasks.Known(pos[1]); err != nil {
		return &campaign.ValidationError{Field: "task_id", Value: pos[1], Msg: err.Error()}
	}
	cc, err := cf.openCampaign(ctx, stderr, getenv, pos[0], "")
	if err != nil {
		return err
	}
	defer cc.close()
	a, sc := cc.a, cc.c
	cl, err := a.Claim(ctx, sc, pos[1], *attempt, opts)
	if err != nil {
		return err
	}
	how := "cold"
	if cl.Warm {
		how = "warm"
	}
	made, rerr := a.Refill(ctx, sc, opts)
	if rerr != nil {
		fmt.Fprintf(stderr, "agentpen add: the claim stands; the pool's refill failed: %v\n", rerr)
	}
	if *asJSON {
		b, err := json.MarshalIndent(addResult{CampaignID: pos[0], Workspace: cl.Workspace, Pool: how, Slot: cl.Slot, Refilled: made}, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "%s\n", b)
		return err
	}
	fmt.Fprintf(stdout, "claimed %s (%s, pool slot %d) for task %s\nsocket: %s\nrefilled: %d\n", cl.Workspace.AgentID, how, cl.Slot, pos[1], cl.Workspace.Socket, made)
	return nil
}
