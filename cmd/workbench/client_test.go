package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/internal/cli"
	"github.com/agentpen/agentpen/internal/testkit/oracle"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/workbench/client"
)

// TestClientScript: the exact text a person sees playing from a pipe
// against a live `workbench serve`: each command echoed, the observation,
// a tool's refusal as an observation, and the session's end; then the
// exact message and exit status of each way a script stops.
func TestClientScript(t *testing.T) {
	s := startServe(t)
	script := `# a comment, then a blank line

reset software/median@7
step read_file {"path": "solution.py"}
step bogus
step submit {"answer": "nothing fixed"}
quit
step never_run
`
	var out bytes.Buffer
	if err := runClient(t.Context(), []string{s.Socket}, strings.NewReader(script), &out, io.Discard); err != nil {
		t.Fatalf("client: %v\n%s", err, out.String())
	}
	want := `> reset software/median@7
task software/median@7 (software)
solution.py defines median(values). It should return the median of a non-empty list of integers (the mean of the two middle values when the length is even). It is wrong for some inputs. Fix solution.py (keep the function's name and arguments) so the examples in test_solution.py (run: python3 test_solution.py) and the hidden cases pass, then submit a one-line note on what you fixed as your answer.

Workspace files:
solution.py (168 bytes)
test_solution.py (1487 bytes)
(20 steps left)
> step read_file {"path": "solution.py"}
   1 def median(values):
   2     """Return the median of a non-empty list of integers."""
   3     ordered = sorted(values)
   4     middle = len(ordered) // 2
   5     return ordered[middle]
[lines 1-5 of 5]
(19 steps left)
> step bogus
error: unknown tool 'bogus'; use one of the tools listed at reset
(18 steps left)
> step submit {"answer": "nothing fixed"}
`
	if got := out.String(); !strings.HasPrefix(got, want) || !strings.HasSuffix(got, "> quit\n") || !strings.Contains(got, "(done: reward ") {
		t.Fatalf("got\n%s\nwant it to start with\n%s", got, want)
	}

	for _, tt := range []struct {
		name, script, want string
		code               int
	}{
		{"server_error", "reset nope/x\nstate\n", `workbench client: line 1: server error: reset: task id "nope/x": unknown task (code: EXECUTION_ERROR)`, 1},
		{"bad_args", "reset\nstep read_file [1]\n", `workbench client: line 2: step read_file: ARGS must be a JSON object, e.g. {"path": "a.txt"}`, 2},
		{"unknown_command", "look around\n", `workbench client: line 1: unknown command "look" (try help)`, 2},
		{"tools_before_reset", "tools\n", `workbench client: line 1: tools: no episode yet; reset first`, 2},
		{"reset_two_ids", "reset a b\n", `workbench client: line 1: reset takes at most one task id, got "a b"`, 2},
		{"step_no_tool", "step\n", `workbench client: line 1: step needs a tool: step TOOL [ARGS], e.g. step read_file {"path": "a.txt"}`, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := run(t.Context(), []string{"client", "-c", "help", s.Socket}, io.Discard, io.Discard, func(string) string { return "" })
			if err != nil {
				t.Fatal(err)
			}
			err = cli.InCommand("workbench client", runClient(t.Context(), []string{s.URL}, strings.NewReader(tt.script), io.Discard, io.Discard))
			if got := cli.Message(prog, err); got != tt.want || cli.ExitCode(err) != tt.code {
				t.Fatalf("got %q (exit %d), want %q (exit %d)", got, cli.ExitCode(err), tt.want, tt.code)
			}
		})
	}
	t.Run("interactive", func(t *testing.T) {
		// On a terminal: a prompt per command, an error shown on stderr
		// and the session going on.
		sess, err := client.Dial(t.Context(), s.Socket)
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		var out, errb bytes.Buffer
		p := &player{s: sess, out: &out}
		if err := p.interactive(t.Context(), strings.NewReader("reset nope/x\nreset software/median@7\nstate\n"), &errb); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(out.String(), "connected; \"help\" lists the commands\nwb> wb> task software/median@7 (software)\n") ||
			!strings.Contains(out.String(), "(20 steps left)\nwb> episode ") || !strings.HasSuffix(out.String(), ", 0 steps taken\nwb> \n") {
			t.Fatalf("stdout\n%s", out.String())
		}
		if want := "error: server error: reset: task id \"nope/x\": unknown task (code: EXECUTION_ERROR)\n"; errb.String() != want {
			t.Fatalf("stderr %q, want %q", errb.String(), want)
		}
	})
	t.Run("no_server", func(t *testing.T) {
		err := run(t.Context(), []string{"client", s.Socket + ".none"}, io.Discard, io.Discard, func(string) string { return "" })
		if got, want := cli.Message(prog, err), "workbench client: connect to "+s.Socket+".none: no such file or directory"; got != want || cli.ExitCode(err) != 1 {
			t.Fatalf("got %q (exit %d), want %q", got, cli.ExitCode(err), want)
		}
	})
}

// TestClientOracle: the workbench client binary, driven line by line
// through a pipe with --json, plays the oracle of a code task and of a
// non-code task over the server's unix socket and over HTTP, as a person
// would: reward 1.0 each.
func TestClientOracle(t *testing.T) {
	s := startServe(t)
	for _, tt := range []struct{ target, task string }{
		{s.Socket, "software/median@3"},
		{"unix://" + s.Socket, "sql/top_customer@3"},
		{s.URL, "logs/error_count@1"},
	} {
		t.Run(strings.ReplaceAll(tt.task, "/", "_"), func(t *testing.T) {
			ctx := testenv.Context(t)
			p := startClient(t, ctx, "--json", tt.target)
			first, err := p.send("reset " + tt.task)
			if err != nil {
				t.Fatal(err)
			}
			step := func(tool string, args map[string]any) (oracle.Result, error) {
				b, _ := json.Marshal(args)
				r, err := p.send("step " + tool + " " + string(b))
				if err != nil {
					return oracle.Result{}, err
				}
				return oracle.Result{Output: r.Observation.Output, Error: r.Observation.Error, Done: r.Done, Reward: r.Reward}, nil
			}
			if _, err := oracle.PlayTask(tt.task, first.Observation.Task, step); err != nil {
				t.Fatal(err)
			}
			if err := p.quit(); err != nil {
				t.Fatalf("quit: %v", err)
			}
		})
	}
}

// clientProc is a running `workbench client`, one command in, one JSON
// reply out.
type clientProc struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	errb *bytes.Buffer
}

func startClient(t *testing.T, ctx context.Context, args ...string) *clientProc {
	t.Helper()
	cmd := exec.CommandContext(ctx, binary(t), append([]string{"client"}, args...)...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Wait() })
	return &clientProc{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20), errb: &errb}
}

type clientReply struct {
	Observation struct {
		Task, Output, Error string
	} `json:"observation"`
	Reward float64 `json:"reward"`
	Done   bool    `json:"done"`
}

func (p *clientProc) send(line string) (clientReply, error) {
	var r clientReply
	if _, err := fmt.Fprintln(p.in, line); err != nil {
		return r, err
	}
	b, err := p.out.ReadBytes('\n')
	if err != nil {
		return r, fmt.Errorf("%q: %v (stderr %q)", line, err, p.errb.String())
	}
	return r, json.Unmarshal(b, &r)
}

func (p *clientProc) quit() error {
	fmt.Fprintln(p.in, "quit")
	p.in.Close()
	return p.cmd.Wait()
}
