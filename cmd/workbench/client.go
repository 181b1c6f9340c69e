package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/agentpen/agentpen/internal/cli"
	"github.com/agentpen/agentpen/workbench/client"
	"golang.org/x/sys/unix"
)

const clientHelp = `Connects to a workbench episode server (one WebSocket session, OpenEnv's
protocol) so a person can play an episode by hand: reset a task, call tools
with JSON arguments, see each observation. TARGET is an http(s):// or
ws(s):// URL (http://127.0.0.1:8000), unix:///path, or the path of a unix
socket: a workspace's episode server listens on <run dir>/wb.sock on the
host (agentpen up's summary and agentpen ls --json print each one).

Commands, one per line:
  reset [TASK]      start an episode of TASK (software/median@7; workbench
                    tasks lists them), or of the server's pick
  step TOOL [ARGS]  call a tool; ARGS is a JSON object (default {}), e.g.
                    step read_file {"path": "solution.py"}
  tools             the tools and their arguments (from the last reset)
  state             the episode's id and step count
  help              this list of commands
  quit              close the session (so does the end of the input)

On a terminal it prompts, and after an error goes on. From a pipe, or with
-c, it is a script: it echoes each command ("> step ..."), skips blank
lines and # comments, and stops at the first error. A tool's refusal is an
observation (shown as "error: ..."), not an error.
Exit status: 0; 1 a server error or a lost session; 2 a bad command line
or a bad command in a script.`

// clientOptions are workbench client's flags.
type clientOptions struct {
	commands cli.StringList
	asJSON   bool
}

func runClient(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var o clientOptions
	fs := cli.NewFlagSet(prog, "client", "[flags] TARGET", clientHelp, stdout)
	fs.Var(&o.commands, "c", "run this command instead of reading commands from stdin, repeatable (a script)")
	fs.BoolVar(&o.asJSON, "json", false, "print each reply's data as one JSON line (reset and step: {observation, reward, done, metadata})")
	pos, err := fs.Parse(args, 1, 1)
	if err != nil {
		return err
	}
	s, err := client.Dial(ctx, pos[0])
	if err != nil {
		return err
	}
	defer s.Close()
	p := &player{s: s, out: stdout, asJSON: o.asJSON}
	if len(o.commands) > 0 {
		return p.script(ctx, strings.NewReader(strings.Join(o.commands, "\n")))
	}
	if isTerminal(stdin) {
		return p.interactive(ctx, stdin, stderr)
	}
	return p.script(ctx, stdin)
}

// isTerminal reports whether r is a terminal.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// player runs a person's commands in one session.
type player struct {
	s      *client.Session
	out    io.Writer
	asJSON bool
	tools  string // the tools text of the last reset
}

// errQuit ends the command loop.
var errQuit = errors.New("quit")

// maxLine bounds one command line (a write_file of a whole file fits).
const maxLine = 16 << 20

// script runs one command per line and stops at the first error: a
// server error or lost session exits 1, a bad command 2.
func (p *player) script(ctx context.Context, in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if !p.asJSON {
			fmt.Fprintf(p.out, "> %s\n", line)
		}
		err := p.do(ctx, line)
		if errors.Is(err, errQuit) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("line %d: %w", n+1, err)
	}
	return nil
}

// interactive prompts for commands until quit or the end of the input;
// an error is shown and the session goes on, unless it is lost.
func (p *player) interactive(ctx context.Context, in io.Reader, stderr io.Writer) error {
	fmt.Fprintln(p.out, `connected; "help" lists the commands`)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for {
		fmt.Fprint(p.out, "wb> ")
		if !sc.Scan() {
			fmt.Fprintln(p.out)
			return sc.Err()
		}
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		err := p.do(ctx, line)
		switch {
		case errors.Is(err, errQuit):
			return nil
		case errors.Is(err, errLost):
			return err
		case err != nil:
			fmt.Fprintf(stderr, "error: %v\n", err)
		}
	}
}

// errLost marks a session that cannot go on (not a server's error frame).
var errLost = errors.New("session lost")

const commandsHelp = `reset [TASK]      start an episode (of TASK, or of the server's pick)
step TOOL [ARGS]  call a tool with a JSON object of arguments (default {})
tools             the tools and their arguments (from the last reset)
state             the episode's id and step count
help              this list
quit              close the session`

// do runs one command line. A *cli.UsageError is a bad command; a
// *client.ServerError the server's refusal; errLost (wrapped) a session
// that is gone.
func (p *player) do(ctx context.Context, line string) error {
	verb, rest, _ := strings.Cut(line, " ")
	rest = strings.TrimSpace(rest)
	switch verb {
	case "help", "?":
		fmt.Fprintln(p.out, commandsHelp)
		return nil
	case "quit", "exit":
		return errQuit
	case "tools":
		if p.tools == "" {
			return cli.Usagef("tools: no episode yet; reset first")
		}
		if p.asJSON {
			return json.NewEncoder(p.out).Encode(p.tools)
		}
		fmt.Fprintln(p.out, strings.TrimRight(p.tools, "\n"))
		return nil
	case "state":
		st, err := p.s.State(ctx)
		if err != nil {
			return lost(err)
		}
		if p.asJSON {
			return json.NewEncoder(p.out).Encode(map[string]any{"episode_id": st.EpisodeID, "step_count": st.StepCount})
		}
		fmt.Fprintf(p.out, "episode %s, %d steps taken\n", st.EpisodeID, st.StepCount)
		return nil
	case "reset":
		if strings.ContainsAny(rest, " \t") {
			return cli.Usagef("reset takes at most one task id, got %q", rest)
		}
		r, err := p.s.Reset(ctx, client.ResetOptions{TaskID: rest})
		if err != nil {
			return lost(err)
		}
		p.tools = r.Observation.Tools
		return p.show(r, true)
	case "step":
		tool, args, _ := strings.Cut(rest, " ")
		if tool == "" {
			return cli.Usagef(`step needs a tool: step TOOL [ARGS], e.g. step read_file {"path": "a.txt"}`)
		}
		raw := json.RawMessage(strings.TrimSpace(args))
		if len(raw) > 0 {
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
				return cli.Usagef("step %s: ARGS must be a JSON object, e.g. {\"path\": \"a.txt\"}", tool)
			}
		}
		r, err := p.s.Step(ctx, tool, raw)
		if err != nil {
			return lost(err)
		}
		return p.show(r, false)
	}
	return cli.Usagef("unknown command %q (try help)", verb)
}

// lost marks an error that is not the server's answer (a *ServerError) as
// a lost session.
func lost(err error) error {
	var se *client.ServerError
	if errors.As(err, &se) {
		return err
	}
	return fmt.Errorf("%w: %w", errLost, err)
}

// show prints one observation: as its JSON, or for a person.
func (p *player) show(r *client.Result, reset bool) error {
	if p.asJSON {
		_, err := fmt.Fprintf(p.out, "%s\n", compact(r.Raw))
		return err
	}
	o := r.Observation
	if reset {
		fmt.Fprintf(p.out, "task %v (%v)\n%s\n\n", r.Metadata["task_id"], r.Metadata["domain"], strings.TrimRight(o.Task, "\n"))
	}
	if o.Output != "" {
		fmt.Fprintln(p.out, strings.TrimRight(o.Output, "\n"))
	}
	if o.Error != "" {
		fmt.Fprintf(p.out, "error: %s\n", strings.TrimRight(o.Error, "\n"))
	}
	if !r.Done {
		fmt.Fprintf(p.out, "(%d steps left)\n", o.StepsLeft)
		return nil
	}
	extra := ""
	keys := make([]string, 0, len(r.Metadata))
	for k := range r.Metadata {
		if k != "task_id" && k != "domain" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		extra += fmt.Sprintf(", %s %v", k, r.Metadata[k])
	}
	fmt.Fprintf(p.out, "(done: reward %s%s, %d steps left)\n", reward(r.Reward), extra, o.StepsLeft)
	return nil
}

// reward renders a reward as the wire does: 1.0, 0.9.
func reward(f float64) string {
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

func compact(raw json.RawMessage) []byte {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}
