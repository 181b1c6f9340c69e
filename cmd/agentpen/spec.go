package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/cli"
	"github.com/agentpen/agentpen/launcher"
	"github.com/agentpen/agentpen/workbench/tasks"
)

const specUsage = `Usage:
  agentpen spec schema              print the campaign spec's JSON Schema (draft 2020-12)
  agentpen spec check [--json] SPEC.json|-
                                    validate a spec as up and the API do, without a daemon

The schema comes from the same generator as the API's OpenAPI document
(GET /v1/openapi.json), so the two never drift. docs/spec.md describes every
field, its default and its limit. Exit status: 0 valid, 2 invalid or a bad
command line.
`

// spec is "agentpen spec": the campaign spec's schema, and its check.
func spec(_ context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, specUsage)
		return &cli.UsageError{Msg: "want a subcommand: schema or check", Hint: "agentpen spec --help"}
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, specUsage)
		return nil
	case "schema":
		fs := cli.NewFlagSet("agentpen", "spec schema", "", "Prints the campaign spec's JSON Schema (draft 2020-12) on stdout.", stdout)
		if _, err := fs.Parse(args[1:], 0, 0); err != nil {
			return err
		}
		b, err := launcher.SpecSchema()
		if err != nil {
			return err
		}
		_, err = stdout.Write(b)
		return err
	case "check":
		return cli.InCommand("agentpen spec check", specCheck(args[1:], stdout))
	}
	return &cli.UsageError{Msg: fmt.Sprintf("unknown subcommand %q", args[0]), Hint: "agentpen spec --help"}
}

// specCheckResult is spec check's --json answer.
type specCheckResult struct {
	OK         bool               `json:"ok"`
	CampaignID string             `json:"campaign_id,omitempty"`
	Workspaces int                `json:"workspaces,omitempty"`
	Topology   string             `json:"topology,omitempty"`
	Egress     string             `json:"egress,omitempty"`
	Errors     []specCheckProblem `json:"errors,omitempty"`
}

// specCheckProblem is one thing wrong with a spec: the field's path ("" for
// malformed JSON), the line and column when the JSON decoder knows them.
type specCheckProblem struct {
	Field   string `json:"field,omitempty"`
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
	Message string `json:"message"`
}

func specCheck(args []string, stdout io.Writer) error {
	fs := cli.NewFlagSet("agentpen", "spec check", "[--json] SPEC.json|-",
		"Validates a campaign spec exactly as agentpen up and POST /v1/campaigns do (the JSON, every\n"+
			"unknown field, every value, every task id against the workbench catalogue), without a\n"+
			"daemon. Prints a one-line summary, or every problem with its field's path.\n"+
			"Exit status: 0 valid, 2 invalid.", stdout)
	asJSON := fs.Bool("json", false, "print the result as JSON on stdout")
	pos, err := fs.Parse(args, 1, 1)
	if err != nil {
		return err
	}
	in, err := readSpecFile(pos[0], os.Stdin)
	if err != nil {
		return err
	}
	p, verr := campaign.ParseSpec(in, tasks.Known, campaign.PlanOptions{})
	if verr == nil {
		res := specCheckResult{OK: true, CampaignID: p.CampaignID, Workspaces: len(p.Agents), Topology: string(p.Topology), Egress: string(p.Egress)}
		if *asJSON {
			return cli.WriteJSON(stdout, res)
		}
		_, err := fmt.Fprintf(stdout, "%s: valid: campaign %s, %d workspace(s), topology %s, egress %s\n",
			pos[0], res.CampaignID, res.Workspaces, res.Topology, res.Egress)
		return err
	}
	if !errors.Is(verr, campaign.ErrInvalid) {
		// Could not read it (a directory, an I/O error): still bad input.
		return &cli.ExitError{Code: exitBadInput, Err: fmt.Errorf("spec %s: %w", pos[0], verr)}
	}
	if *asJSON {
		if err := cli.WriteJSON(stdout, specCheckResult{Errors: problems(verr)}); err != nil {
			return err
		}
	}
	return &cli.ExitError{Code: exitBadInput, Err: fmt.Errorf("spec %s: %w", pos[0], verr)}
}

// readSpecFile reads the spec a command line names ("-" for stdin), at
// most one byte more than campaign.MaxSpecBytes (DecodeSpec refuses that
// much). A spec that cannot be read (missing, a directory, unreadable) is
// bad input: exit 2, naming the file and why once.
func readSpecFile(name string, stdin io.Reader) (io.Reader, error) {
	in := stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, badSpecFile(name, err)
		}
		defer f.Close()
		if fi, err := f.Stat(); err == nil && fi.IsDir() {
			return nil, badSpecFile(name, errors.New("is a directory, not a spec file"))
		}
		in = f
	}
	b, err := io.ReadAll(io.LimitReader(in, campaign.MaxSpecBytes+1))
	if err != nil {
		return nil, badSpecFile(name, err)
	}
	return bytes.NewReader(b), nil
}

// badSpecFile is the exit-2 error of a spec file that cannot be read: the
// file once, then the system's reason without the path it repeats.
func badSpecFile(name string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return &cli.ExitError{Code: exitBadInput, Err: fmt.Errorf("spec %s: %w", name, err)}
}

// problems lists what is wrong with a spec, one entry per field error.
func problems(err error) []specCheckProblem {
	var out []specCheckProblem
	var walk func(error)
	walk = func(err error) {
		var se *campaign.SyntaxError
		var ve *campaign.ValidationError
		var ves campaign.ValidationErrors
		switch {
		case errors.As(err, &ves):
			for _, e := range ves {
				walk(e)
			}
		case errors.As(err, &se):
			out = append(out, specCheckProblem{Field: se.Field, Line: se.Line, Column: se.Column, Message: se.Err.Error()})
		case errors.As(err, &ve):
			out = append(out, specCheckProblem{Field: ve.Field, Message: ve.Msg})
		default:
			out = append(out, specCheckProblem{Message: err.Error()})
		}
	}
	walk(err)
	return out
}
