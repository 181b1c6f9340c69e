package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/agentpen/agentpen/workbench/tasks"
)

const tasksSynopsis = `Usage:
  workbench tasks [--json]          list every task family: id, domain, answer kind, summary
  workbench tasks show [--json] ID  show what an agent sees of a task at reset: its instruction
                                    and its files' names and sizes, never the answer

An ID is "domain/family", optionally "@N" for variant N (0..99999).

Flags:
`

func runTasks(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tasks", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	if err := parseFlags(fs, args, stdout, stderr, tasksSynopsis); err != nil {
		return err
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return listTasks(stdout, *asJSON)
	}
	if rest[0] != "show" {
		return fmt.Errorf("%w: tasks: unknown subcommand %q (want show)", errUsage, rest[0])
	}
	show := flag.NewFlagSet("tasks show", flag.ContinueOnError)
	showJSON := show.Bool("json", *asJSON, "print JSON instead of text")
	if err := parseFlags(show, rest[1:], stdout, stderr, tasksSynopsis); err != nil {
		return err
	}
	if show.NArg() != 1 {
		return fmt.Errorf("%w: tasks show takes exactly one task id, got %d", errUsage, show.NArg())
	}
	return showTask(stdout, show.Arg(0), *showJSON)
}

func listTasks(w io.Writer, asJSON bool) error {
	specs := tasks.Specs()
	if asJSON {
		return writeJSONTo(w, specs)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tDOMAIN\tANSWER\tSUMMARY")
	for _, s := range specs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.ID, s.Domain, s.Kind, s.Summary)
	}
	return tw.Flush()
}

// shownFile is a workspace file as `tasks show` lists it.
type shownFile struct {
	Path  string `json:"path"`
	Bytes int    `json:"bytes"`
}

// shownTask is what `tasks show` prints: what the agent sees, nothing of
// the key.
type shownTask struct {
	ID          string      `json:"id"`
	Domain      string      `json:"domain"`
	Kind        tasks.Kind  `json:"answer_kind"`
	Summary     string      `json:"summary"`
	Instruction string      `json:"instruction"`
	Files       []shownFile `json:"files"`
}

func showTask(w io.Writer, id string, asJSON bool) error {
	t, err := tasks.Build(id)
	if err != nil {
		return fmt.Errorf("tasks show: %w", err)
	}
	st := shownTask{ID: t.TaskID, Domain: t.Domain, Kind: t.Kind, Summary: t.Summary, Instruction: t.Instruction}
	for _, f := range t.Files {
		st.Files = append(st.Files, shownFile{Path: f.Path, Bytes: len(f.Content)})
	}
	if asJSON {
		return writeJSONTo(w, st)
	}
	fmt.Fprintf(w, "%s (%s, answer: %s)\n%s\n\nInstruction:\n%s\n\nFiles:\n", st.ID, st.Domain, st.Kind, st.Summary, st.Instruction)
	for _, f := range st.Files {
		fmt.Fprintf(w, "  %s (%d bytes)\n", f.Path, f.Bytes)
	}
	return nil
}

func writeJSONTo(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
