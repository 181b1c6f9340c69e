package episode

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/agentpen/agentpen/workbench/results"
	"github.com/agentpen/agentpen/workbench/sandbox"
	"github.com/agentpen/agentpen/workbench/tasks"
)

type tool func(ctx context.Context, a args) (Observation, error)

// tools maps tool names to handlers; finish is the trainer's, not listed
// in the tools text.
func (e *Environment) tools() map[string]tool {
	return map[string]tool{
		"list_files": e.listFiles,
		"read_file":  e.readFile,
		"run_python": e.runPython,
		"write_file": e.writeFile,
		"run_tests":  e.runTests,
		"check":      e.check,
		"submit":     e.submit,
		"finish":     e.finishTool,
	}
}

func (e *Environment) listing() (string, error) {
	return e.ws.listing(e.cfg.Limits.OutputChars)
}

func (e *Environment) listFiles(_ context.Context, a args) (Observation, error) {
	// Reset already shows the listing, so listing again is not reading the
	// inputs.
	if err := a.only(); err != nil {
		return Observation{}, err
	}
	text, err := e.listing()
	if err != nil {
		return Observation{}, err
	}
	return e.obs(text, false, nil), nil
}

// pathArg checks the "path" argument and splits it.
func pathArg(a args) (string, []string, error) {
	rel, isString, lone := a.str("path")
	if !isString {
		return "", nil, refusef("%s", sandbox.ReasonPathEmpty)
	}
	if lone {
		return "", nil, refusef("cannot use the path %s: it is not valid UTF-8", pyRepr(rel))
	}
	parts, err := sandbox.SplitPath(rel)
	if err != nil {
		return "", nil, refusef("%s", err.Error())
	}
	return rel, parts, nil
}

func (e *Environment) readFile(_ context.Context, a args) (Observation, error) {
	if err := a.only("path", "start", "end"); err != nil {
		return Observation{}, err
	}
	rel, parts, err := pathArg(a)
	if err != nil {
		return Observation{}, err
	}
	start, err := a.intArg("start", 1)
	if err != nil {
		return Observation{}, err
	}
	data, err := e.ws.readFile(parts, rel)
	if err != nil {
		return Observation{}, err
	}
	lines := splitLines(decodeReplace(normalizeNewlines(data)))
	readLines := int64(e.cfg.Limits.ReadLines)
	end, err := a.intArg("end", start+readLines-1)
	if err != nil {
		return Observation{}, err
	}
	n := int64(len(lines))
	start, end = max(1, start), min(n, end, start+readLines-1)
	var body strings.Builder
	for i := start; i <= end; i++ {
		if i > start {
			body.WriteByte('\n')
		}
		fmt.Fprintf(&body, "%4d %s", i, lines[i-1])
	}
	e.inspected = true
	tail := "[empty file]"
	if n > 0 {
		tail = fmt.Sprintf("\n[lines %d-%d of %d]", start, end, n)
	}
	return e.obs(clip(body.String()+tail, e.cfg.Limits.OutputChars, 0), false, nil), nil
}

// normalizeNewlines turns \r\n and \r into \n, as Python's text mode does.
func normalizeNewlines(b []byte) []byte {
	s := strings.ReplaceAll(string(b), "\r\n", "\n")
	return []byte(strings.ReplaceAll(s, "\r", "\n"))
}

func (e *Environment) runPython(ctx context.Context, a args) (Observation, error) {
	if err := a.only("code"); err != nil {
		return Observation{}, err
	}
	code, isString, lone := a.str("code")
	if !isString || pyStrip(code) == "" {
		return Observation{}, refusef("run_python needs a non-empty string 'code'")
	}
	if lone {
		return Observation{}, refusef("cannot prepare .run.py: the text is not valid UTF-8")
	}
	if err := e.ws.writePrivate(".run.py", code); err != nil {
		return Observation{}, err
	}
	e.inspected = true
	e.testedLastChange = false // the script may have changed the files
	out, err := e.runShown(ctx, []string{"-E", "-s", ".run.py"})
	if err != nil {
		return Observation{}, err
	}
	return e.obs(out, false, nil), nil
}

// runShown runs Python and words the result as the seed: output, then
// errors, then the exit code, clipped; or the timeout.
func (e *Environment) runShown(ctx context.Context, argv []string) (string, error) {
	res, err := e.ws.run(ctx, argv, nil)
	e.stops.add(stopOf(res, err))
	if err != nil {
		return "", err
	}
	if res.TimedOut {
		return fmt.Sprintf("timed out after %s s", seconds(e.cfg.Limits.PythonTimeout.Seconds())), nil
	}
	out := decodeReplace(res.Stdout)
	if len(res.Stderr) > 0 || res.StderrDropped > 0 {
		out += "\n" + decodeReplace(res.Stderr)
	}
	dropped := res.StdoutDropped + res.StderrDropped
	out = pyStrip(out)
	if out == "" && dropped == 0 {
		out = "(no output)"
	}
	if res.OutputLimited {
		// No exit code: the sandbox ended it, and says why.
		return clip(out, e.cfg.Limits.OutputChars, dropped) + fmt.Sprintf("\n[stopped: it printed more than %d MiB]", sandbox.DefaultOutputLimit>>20), nil
	}
	return clip(fmt.Sprintf("%s\n[exit code %d]", out, res.ExitCode), e.cfg.Limits.OutputChars, dropped), nil
}

func (e *Environment) writeFile(_ context.Context, a args) (Observation, error) {
	if err := a.only("path", "content"); err != nil {
		return Observation{}, err
	}
	content, isString, lone := a.str("content")
	chars := utf8.RuneCountInString(content)
	if !isString || chars > e.cfg.Limits.WriteChars {
		return Observation{}, refusef("write_file needs a string 'content' of at most %d characters", e.cfg.Limits.WriteChars)
	}
	if lone {
		return Observation{}, refusef("write_file 'content' must be text UTF-8 can encode")
	}
	rel, parts, err := pathArg(a)
	if err != nil {
		return Observation{}, err
	}
	if err := e.ws.writeFile(parts, rel, []byte(content)); err != nil {
		return Observation{}, err
	}
	e.testedLastChange = false
	return e.obs(fmt.Sprintf("wrote %s (%d characters)", strings.Join(parts, "/"), chars), false, nil), nil
}

func (e *Environment) runTests(ctx context.Context, a args) (Observation, error) {
	if err := a.only(); err != nil {
		return Observation{}, err
	}
	if e.task.Kind != tasks.KindCode {
		return Observation{}, refusef("run_tests is only for code tasks; use check to test an answer")
	}
	testFile, ok := e.task.File("test_solution.py")
	if !ok {
		return Observation{}, refusef("this task has no test_solution.py")
	}
	// The examples as the task gave them, whatever the workspace's copy
	// now says.
	before := e.ws.digest()
	if err := e.ws.writePrivate(".grade_tests.py", testFile); err != nil {
		return Observation{}, err
	}
	output, err := e.runShown(ctx, []string{"-E", "-s", "-B", ".grade_tests.py"})
	if err != nil {
		return Observation{}, err
	}
	if err := e.ws.clearAgentState(); err != nil {
		return Observation{}, err
	}
	// A run that changed the files tested something other than what the
	// examples then grade.
	unchanged := before != "" && e.ws.digest() == before
	if !unchanged {
		output += "\nthe test run changed the workspace, so it verifies nothing"
	}
	results, err := e.gradeVisible(ctx)
	if err != nil {
		return Observation{}, err
	}
	passed := unchanged
	n := 0
	for _, ok := range results {
		passed = passed && ok
		if ok {
			n++
		}
	}
	// Verified only while the files stay as the tests passed on them.
	e.testedDigest = ""
	if passed {
		e.testedDigest = before
	}
	e.testedLastChange = e.testedDigest != ""
	// The grader's own verdict on the same examples, so what the agent is
	// shown is what counts.
	return e.obs(fmt.Sprintf("%s\ngraded: %d of %d examples pass", output, n, len(results)), false, nil), nil
}

func (e *Environment) check(ctx context.Context, a args) (Observation, error) {
	if err := a.only("answer"); err != nil {
		return Observation{}, err
	}
	if e.task.Kind == tasks.KindCode {
		return Observation{}, refusef("for code tasks use run_tests")
	}
	if e.checks >= e.cfg.Limits.MaxChecks {
		return Observation{}, refusef("check can be used at most %d times", e.cfg.Limits.MaxChecks)
	}
	answer, err := a.answer()
	if err != nil {
		return Observation{}, err
	}
	credit, _, err := e.cfg.Grader.ScoreAnswer(ctx, e.task.TaskID, answer)
	if err != nil {
		return Observation{}, refusef("the answer cannot be checked now: %v", err)
	}
	e.checks++
	// The reason is withheld: "some items are missing" against a single
	// candidate would say whether that candidate belongs, and two checks
	// would then score items without solving.
	verdict := "not correct"
	if credit >= 1 {
		e.checked[pyStrip(answer)] = true
		verdict = "correct"
	}
	return e.obs(fmt.Sprintf("check: %s (%d checks left)", verdict, e.cfg.Limits.MaxChecks-e.checks), false, nil), nil
}

func (e *Environment) submit(ctx context.Context, a args) (Observation, error) {
	if err := a.only("answer"); err != nil {
		return Observation{}, err
	}
	answer, err := a.answer()
	if err != nil {
		return Observation{}, err
	}
	return e.finish(ctx, &answer, results.EndSubmitted, "")
}

// finishTool is not offered to the agent: the trainer sends it to close an
// episode that did not end itself, and such an episode earns nothing.
func (e *Environment) finishTool(ctx context.Context, a args) (Observation, error) {
	if err := a.only(); err != nil {
		return Observation{}, err
	}
	return e.finish(ctx, nil, results.EndFinished, "The episode ended without a submitted answer.")
}
