package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/internal/cli"
)

// errNotAttested is a report that is not ok under --strict (or from up);
// the command already printed why, and exits 1.
var errNotAttested = fmt.Errorf("attestation failed: %w", cli.ErrReported)

// attestFlags are the probe settings attest and up share.
type attestFlags struct {
	egressTarget   string
	probeTimeoutMS int64
}

func (a *attestFlags) register(fs *cli.FlagSet) {
	fs.StringVar(&a.egressTarget, "egress-target", "", "host:port that only outbound NAT reaches; probed from every workspace (reachable only under egress nat). Empty: egress is attested from the network's Internal flag alone")
	fs.Int64Var(&a.probeTimeoutMS, "probe-timeout-ms", attest.DefaultProbeTimeoutMS, "bound on each connectivity probe, in milliseconds")
}

func (a *attestFlags) options() (adapter.AttestOptions, error) {
	if a.probeTimeoutMS < 100 || a.probeTimeoutMS > 30000 {
		return adapter.AttestOptions{}, cli.Usagef("--probe-timeout-ms %d: want 100..30000", a.probeTimeoutMS)
	}
	return adapter.AttestOptions{EgressTarget: a.egressTarget, ProbeTimeout: durationMS(a.probeTimeoutMS)}, nil
}

func attestCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := cli.NewFlagSet("agentpen", "attest", "[flags] CAMPAIGN_ID",
		"Proves what a campaign is, from the daemon's own answers (the network, every journalled container\n"+
			"by id, /info) and from probes run inside the containers (docker exec of workbench probe), and\n"+
			"writes the secret-free report as a new file in the campaign's state directory\n"+
			"(attestation-<generation>-<n>.json; no report is ever rewritten) and its verdict in the journal.\n"+
			"Prints one line per failed check (or the report with --json). Only a campaign whose latest\n"+
			"generation is up (ready or attestation_failed) is attested: one that was removed, is being\n"+
			"removed, failed or never became ready is refused, saying why, and nothing is written.\n"+
			"Exit status: 0 once the report is written (with --strict: only when it is ok), 1 otherwise,\n"+
			"2 on bad flags, no such campaign, or a campaign that is not up.",
		stdout)
	var cf campaignFlags
	cf.register(fs, getenv)
	var af attestFlags
	af.register(fs)
	asJSON := fs.Bool("json", false, "print the report as JSON on stdout")
	strict := fs.Bool("strict", false, "exit 1 unless the attestation is ok")
	pos, err := fs.Parse(args, 1, 1)
	if err != nil {
		return err
	}
	opts, err := af.options()
	if err != nil {
		return err
	}
	cc, err := cf.openCampaign(ctx, stderr, getenv, pos[0], "")
	if err != nil {
		return err
	}
	defer cc.close()
	rep, path, err := cc.a.Attest(ctx, cc.c, opts)
	if err != nil {
		return err
	}
	if *asJSON {
		b, err := rep.Marshal()
		if err != nil {
			return err
		}
		if _, err := stdout.Write(b); err != nil {
			return err
		}
	} else {
		printAttestation(stdout, rep, path)
	}
	if *strict && !rep.OK {
		return errNotAttested
	}
	return nil
}

// printAttestation is the human summary: a verdict line, then one line per
// failed check.
func printAttestation(w io.Writer, rep *attest.Report, path string) {
	n := len(rep.Checks())
	if rep.OK {
		fmt.Fprintf(w, "attestation ok: %d checks passed (report %s)\n", n, path)
	} else {
		fmt.Fprintf(w, "attestation FAILED: %d of %d checks failed (report %s)\n", len(rep.FailedChecks), n, path)
	}
	if rep.Error != "" {
		fmt.Fprintf(w, "  %s\n", rep.Error)
	}
	for _, line := range rep.FailureLines() {
		fmt.Fprintf(w, "  %s\n", line)
	}
	fmt.Fprintf(w, "limits: %s\n", rep.Limits.Note)
	fmt.Fprintf(w, "egress: attested from %s\n", rep.Connectivity.Egress.AttestedFrom)
}

func durationMS(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
