package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentpen/agentpen/internal/cli"
	"github.com/agentpen/agentpen/launcher"
)

const tasksHelp = `Lists the workbench's task catalogue: the task_ids a campaign's workspace may name, each
with its domain, answer kind and title (the ids workbench tasks --json lists). With a task id
(domain/family, or domain/family@N for variant N) it shows what an agent sees of that task at
reset: its prompt and its workspace's files; never its answer. --json prints what the launcher
API's GET /v1/tasks and GET /v1/tasks/{id} answer. Needs no daemon.
Exit status: 0, or 2 for an id the catalogue does not serve.`

func tasksCmd(_ context.Context, args []string, stdout, _ io.Writer, _ func(string) string) error {
	fs := cli.NewFlagSet("agentpen", "tasks", "[--json] [TASK_ID]", tasksHelp, stdout)
	asJSON := fs.Bool("json", false, "print JSON (the API's body) instead of a table or text")
	pos, err := fs.Parse(args, 0, 1)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		list := launcher.TaskList()
		if *asJSON {
			return cli.WriteJSON(stdout, struct {
				Tasks []launcher.TaskSummary `json:"tasks"`
			}{list})
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tDOMAIN\tANSWER\tTITLE")
		for _, s := range list {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.ID, s.Domain, s.AnswerKind, s.Title)
		}
		return tw.Flush()
	}
	t, err := launcher.LookupTask(pos[0])
	if errors.Is(err, launcher.ErrUnknownTask) {
		return &cli.ExitError{Code: exitBadInput, Err: fmt.Errorf("%w (agentpen tasks lists the catalogue)", err)}
	}
	if err != nil {
		return err
	}
	if *asJSON {
		return cli.WriteJSON(stdout, t)
	}
	fmt.Fprintf(stdout, "%s (%s, answer: %s)\n%s\n\nPrompt:\n%s\n\nFiles:\n", t.ID, t.Domain, t.AnswerKind, t.Title, t.Prompt)
	for _, f := range t.Files {
		fmt.Fprintf(stdout, "  %s (%d bytes)\n", f.Path, f.Bytes)
	}
	return nil
}

const imagesHelp = `Lists the rootless daemon's local images a campaign spec can name, newest first: the image
id, its tags, when it was built, and the workbench version it carries (its io.agentpen.workbench
label; an image without one cannot run the default grader or episode server). A spec names an
image by its id or by one of its tags; a tag is resolved to the image's id when the campaign is
created, and the campaign runs that id from then on. Images are never pulled. --json prints what
the launcher API's GET /v1/images answers.
Exit status: 0, 2 for a bad DOCKER_HOST, 3 when the daemon does not answer.`

func imagesCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := cli.NewFlagSet("agentpen", "images", "[--json]", imagesHelp, stdout)
	asJSON := fs.Bool("json", false, "print JSON (the API's body) instead of a table")
	var cf campaignFlags
	cf.runtimeFlags.register(fs, getenv)
	if _, err := fs.Parse(args, 0, 0); err != nil {
		return err
	}
	cf.logFormat = "text"
	a, err := cf.adapter(ctx, stderr, getenv)
	if err != nil {
		return err
	}
	defer a.Driver.Close()
	imgs, err := a.Images(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		out := struct {
			Images any `json:"images"`
		}{imgs}
		return cli.WriteJSON(stdout, out)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "IMAGE ID\tTAGS\tCREATED\tWORKBENCH")
	for _, img := range imgs {
		wb := img.Workbench
		if wb == "" {
			wb = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", shortID(strings.TrimPrefix(img.ID, "sha256:")), strings.Join(img.Tags, ","), img.Created.Local().Format(time.DateTime), wb)
	}
	return tw.Flush()
}
