package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/custody"
	"github.com/agentpen/agentpen/internal/cli"
	"github.com/agentpen/agentpen/store"
)

// errDiffers is diff's exit 1: the records differ (already printed).
var errDiffers = fmt.Errorf("the records differ: %w", cli.ErrReported)

// diffRecord is one side of agentpen diff --json: where its record was
// read, and which campaign it attests.
type diffRecord struct {
	// Source is what was named: "campaign ID" or "file PATH".
	Source string `json:"source"`
	// Path is the report file read.
	Path string `json:"path"`
	// CampaignID is the campaign the report attests.
	CampaignID string `json:"campaign_id"`
}

// diffReport is agentpen diff --json.
type diffReport struct {
	A diffRecord `json:"a"`
	B diffRecord `json:"b"`
	attest.Comparison
}

func diffCmd(_ context.Context, args []string, stdout, _ io.Writer, getenv func(string) string) error {
	fs := cli.NewFlagSet("agentpen", "diff", "[flags] A B",
		"Compares two campaigns' attestations field by field: each of A and B is a CAMPAIGN_ID (its latest\n"+
			"attestation, in the state root, as its journal names it and with the digest the journal\n"+
			"recorded) or a FILE (an attestation report, or its .dsse.json envelope's report beside it).\n"+
			"Compared: the agentpen build, the driver, the runtime (id, version, kernel, cgroups), the\n"+
			"limits' enforcement and, per subject (server, workspaces[N]), the image as requested and as\n"+
			"pinned, the image id the runtime ran, its configuration and repository digests, the workbench's\n"+
			"version and digest, the seccomp profile and each limit requested, recorded and enforced.\n"+
			"Printed: what differs; the limits only requested (the runtime does not enforce them); and the\n"+
			"ids and times ignored because the same image ran (a container's id where it ran the same image\n"+
			"id, the campaign's ids and times where every container did). diff reads, it does not verify the\n"+
			"signatures: run agentpen verify on each for that.\n"+
			"Exit status: 0 when nothing but ignored ids and times differs, 1 when something does, 2 on bad\n"+
			"input (a campaign without an attestation, a file that is not one, no such campaign or file).", stdout)
	stateRoot := fs.String("state-root", defaultStateRoot(getenv), "directory holding one state directory (journal, spec) per campaign")
	asJSON := fs.Bool("json", false, "print the comparison as JSON")
	pos, err := fs.Parse(args, 2, 2)
	if err != nil {
		return err
	}
	var root *store.Root
	defer func() {
		if root != nil {
			root.Close()
		}
	}()
	openRoot := func() (*store.Root, error) {
		if root == nil {
			r, err := store.OpenRoot(*stateRoot)
			if err != nil {
				return nil, err
			}
			root = r
		}
		return root, nil
	}
	var out diffReport
	var reps [2]*attest.Report
	for i, arg := range pos {
		rec, rep, err := readAttestation(openRoot, arg)
		if err != nil {
			return err
		}
		reps[i] = rep
		if i == 0 {
			out.A = rec
		} else {
			out.B = rec
		}
	}
	out.Comparison = attest.Compare(reps[0], reps[1])
	if *asJSON {
		if err := cli.WriteJSON(stdout, out); err != nil {
			return err
		}
	} else {
		printComparison(stdout, out)
	}
	if !out.Same {
		return errDiffers
	}
	return nil
}

// readAttestation reads the attestation arg names: a report file (or an
// envelope's report), or a campaign's latest.
func readAttestation(openRoot func() (*store.Root, error), arg string) (diffRecord, *attest.Report, error) {
	bad := func(format string, a ...any) error {
		return &cli.ExitError{Code: exitBadInput, Err: fmt.Errorf(format, a...)}
	}
	var rep attest.Report
	var rec diffRecord
	if isFileArg(arg) {
		dir, name, err := reportFile(arg)
		if err != nil {
			return rec, nil, err
		}
		if k, _ := custody.KindOf(name, ""); k.Name != custody.Attestation.Name {
			return rec, nil, bad("%s: a %s report, not an attestation", arg, k.Name)
		}
		rec.Source, rec.Path = "file "+arg, filepath.Join(dir, name)
		b, err := readReportFile(rec.Path)
		if err != nil {
			return rec, nil, bad("%s: %w", arg, err)
		}
		if err := json.Unmarshal(b, &rep); err != nil {
			return rec, nil, bad("%s: not an attestation report: %w", rec.Path, err)
		}
	} else {
		r, err := openRoot()
		if err != nil {
			return rec, nil, err
		}
		c, err := r.Open(arg)
		if err != nil {
			return rec, nil, err
		}
		defer c.Close()
		st, err := c.Read()
		if err != nil {
			return rec, nil, bad("campaign %s: %w", arg, err)
		}
		p, err := c.Attestation(st)
		if err != nil {
			return rec, nil, bad("campaign %s: %w", arg, err)
		}
		if p == nil {
			return rec, nil, bad("campaign %s has no attestation in its latest generation: nothing to compare (agentpen attest %s makes one)", arg, arg)
		}
		rec.Source, rec.Path, rep = "campaign "+arg, c.ReportPath(st.AttestationReport), *p
	}
	if rep.Schema != attest.Schema {
		return rec, nil, bad("%s: schema %q, not an attestation (%s)", rec.Path, rep.Schema, attest.Schema)
	}
	rec.CampaignID = rep.CampaignID
	return rec, &rep, nil
}

// readReportFile reads a report file, at most store.MaxReportBytes.
func readReportFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, store.MaxReportBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > store.MaxReportBytes {
		return nil, fmt.Errorf("more than %d bytes: not a report", store.MaxReportBytes)
	}
	return b, nil
}

// printComparison is diff's text: the records, what differs, what is
// only requested, what was ignored.
func printComparison(w io.Writer, d diffReport) {
	fmt.Fprintf(w, "A: campaign %s, %s\nB: campaign %s, %s\n", d.A.CampaignID, d.A.Path, d.B.CampaignID, d.B.Path)
	if d.Same {
		fmt.Fprintln(w, "same: nothing differs but the ids and times of the same images")
	} else {
		fmt.Fprintf(w, "DIFFERENT: %d fields differ\n", len(d.Differs))
		for _, f := range d.Differs {
			fmt.Fprintf(w, "  %s\n    A %s\n    B %s\n", f.Field, orNone(f.A), orNone(f.B))
		}
	}
	if len(d.OnlyRequested) > 0 {
		fmt.Fprintln(w, "only requested (the runtime does not enforce them):")
		for _, f := range d.OnlyRequested {
			fmt.Fprintf(w, "  %s\n    A %s\n    B %s\n", f.Field, f.A, f.B)
		}
	}
	if len(d.Ignored) > 0 {
		fmt.Fprintln(w, "ignored (ids and times where the same image ran):")
		for _, f := range d.Ignored {
			fmt.Fprintf(w, "  %s\n", f.Field)
		}
	}
}
