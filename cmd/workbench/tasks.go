package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/agentpen/agentpen/internal/cli"
	"github.com/agentpen/agentpen/workbench/tasks"
)

const tasksHelp = `  workbench tasks [--json]          list every task family: id, domain, answer kind, summary
  workbench tasks show [--json] ID  show what an agent sees of a task at reset: its instruction
                                    and its files' names and sizes, never the answer

An ID is "domain/family", optionally "@N" for variant N (0..99999).`

func runTasks(_ context.Context, args []string, stdout io.Writer) error {
	fs := cli.NewFlagSet(prog, "tasks", "[show] [--json] [ID]", tasksHelp, stdout)
	asJSON := fs.Bool("json", false, "print JSON instead of a table or text")
	pos, err := fs.Parse(args, 0, 2)
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 0:
		return listTasks(stdout, *asJSON)
	case pos[0] != "show":
		return &cli.UsageError{Msg: fmt.Sprintf("unknown subcommand %q (want show)", pos[0]), Hint: "workbench tasks --help"}
	case len(pos) != 2:
		return &cli.UsageError{Msg: "show takes exactly one task id", Hint: "workbench tasks --help"}
	}
	return showTask(stdout, pos[1], *asJSON)
}

func listTasks(w io.Writer, asJSON bool) error {
	specs := tasks.Specs()
	if asJSON {
		return cli.WriteJSON(w, specs)
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
		// An id not in the catalogue is bad input, as any other.
		return &cli.ExitError{Code: 2, Err: fmt.Errorf("%w (workbench tasks lists the catalogue)", err)}
	}
	st := shownTask{ID: t.TaskID, Domain: t.Domain, Kind: t.Kind, Summary: t.Summary, Instruction: t.Instruction}
	for _, f := range t.Files {
		st.Files = append(st.Files, shownFile{Path: f.Path, Bytes: len(f.Content)})
	}
	if asJSON {
		return cli.WriteJSON(w, st)
	}
	fmt.Fprintf(w, "%s (%s, answer: %s)\n%s\n\nInstruction:\n%s\n\nFiles:\n", st.ID, st.Domain, st.Kind, st.Summary, st.Instruction)
	for _, f := range st.Files {
		fmt.Fprintf(w, "  %s (%d bytes)\n", f.Path, f.Bytes)
	}
	return nil
}
