package episode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"

	"github.com/agentpen/agentpen/workbench/results"
	"github.com/agentpen/agentpen/workbench/tasks"
)

// probe is the script one graded case runs. It imports nothing (json
// alone, through re and enum, made each case cost 70 % more than the
// interpreter's start): the arguments come on stdin (not argv, which other
// uids can read in /proc) as a Python literal (pyLiteral) evaluated with
// no builtins, and the value is printed by a JSON encoder of its own. So
// no module is looked up before the solution (no file of the agent's can
// stand in for one), and the workspace goes on sys.path only for it. The
// encoder prints exactly the values json.dumps prints and json.loads
// gives back equal (dicts with string keys, lists, strings, ints, finite
// floats, booleans, None); for anything else (a tuple, a dict with other
// keys, NaN, infinity, a set) it prints "not a JSON value", so such a
// value fails as it fails the test file's ==.
func probe(function string) string {
	return "import os, sys\n" +
		"args = eval(sys.stdin.read(), {'__builtins__': {}})\n" +
		"sys.path.insert(0, os.path.realpath(os.getcwd()))\n" +
		"from solution import " + function + "\n" +
		"value = " + function + "(*args)\n" +
		probeEncoder +
		"try:\n" +
		"    text = _agentpen_json(value)\n" +
		"except ValueError:\n" +
		"    text = 'not a JSON value'\n" +
		"print(text)\n"
}

// probeEncoder is the probe's JSON encoder (see probe); \uXXXX escapes
// keep the output ASCII, as json.dumps does, so a lone surrogate prints.
const probeEncoder = `def _agentpen_json(v):
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, str):
        out = []
        for c in v:
            o = ord(c)
            if c == '"' or c == "\\":
                out.append("\\" + c)
            elif 0x20 <= o < 0x7f:
                out.append(c)
            elif o > 0xffff:
                o -= 0x10000
                out.append("\\u%04x\\u%04x" % (0xd800 + (o >> 10), 0xdc00 + (o & 0x3ff)))
            else:
                out.append("\\u%04x" % o)
        return '"' + "".join(out) + '"'
    if isinstance(v, int):
        return int.__repr__(v)
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            raise ValueError
        return float.__repr__(v)
    if isinstance(v, list):
        return "[" + ", ".join([_agentpen_json(x) for x in v]) + "]"
    if isinstance(v, dict):
        if not all(isinstance(k, str) for k in v):
            raise ValueError
        return "{" + ", ".join([_agentpen_json(k) + ": " + _agentpen_json(x) for k, x in v.items()]) + "}"
    raise ValueError
`

// argsLiteral is a case's argument list as a Python literal
// (tasks.PyLiteral): exactly what json.loads of its JSON would give.
func argsLiteral(args []any) (string, error) {
	if args == nil {
		args = []any{} // no arguments, not None
	}
	return tasks.PyLiteral(args)
}

// runCases runs the task's function on each argument list, each case on
// its own: before it, no process of the agent's is left and nothing of it
// in the shared places, and it runs in a network namespace of its own
// (runGraded). It returns what each printed as
// JSON, nil for a case without a value. A case that leaves the workspace
// different is void, and so is every case after it, so no call can hand
// state to the next. The process runs the agent's code, so what it prints
// can be forged: the visible cases only gate the credit, and the credit
// comes from hidden cases whose expected values never enter the workspace.
//
// Any error is a *gradingError saying which part failed; what the cases
// run so far left is still in the episode (its workspace, /tmp): the
// caller voids the episode (Environment.void) or, for the visible cases
// alone, refuses the step.
func (e *Environment) runCases(ctx context.Context, cases [][]any) ([][]byte, error) {
	defer e.ws.gradedDone()
	before := e.ws.digest()
	tainted := before == ""
	out := make([][]byte, len(cases))
	for i, callArgs := range cases {
		if tainted {
			// Void whatever it would print; running it would only give the
			// agent's code more time.
			continue
		}
		reset, err := e.prepareCase(i)
		if err != nil {
			return nil, &gradingError{results.ReasonCasePrepare, fmt.Errorf("case %d: %w", i, err)}
		}
		lit, err := argsLiteral(callArgs)
		stdin := []byte(lit)
		if err != nil {
			// The grader's inputs are not argument lists.
			return nil, &gradingError{results.ReasonGrader, fmt.Errorf("case %d: arguments are not JSON: %w", i, err)}
		}
		res, err := e.ws.runGraded(ctx, []string{"-E", "-s", "-B", ".grade.py"}, stdin)
		e.stops.add(stopOf(res, err))
		if err != nil {
			return nil, &gradingError{results.ReasonCaseRun, fmt.Errorf("case %d: %w", i, err)}
		}
		if e.ws.digest() != before {
			tainted = true
		}
		if tainted || !reset || res.TimedOut || res.OutputLimited {
			// A case the sandbox ended gave no answer.
			continue
		}
		out[i] = lastJSONLine(res.Stdout)
	}
	return out, nil
}

// prepareCase readies graded case i (workspace.prepareCase).
func (e *Environment) prepareCase(i int) (bool, error) {
	if testHookPrepareCase != nil {
		if err := testHookPrepareCase(i); err != nil {
			return false, err
		}
	}
	return e.ws.prepareCase(".grade.py", probe(e.task.Function))
}

// testHookPrepareCase, when set (tests), runs before graded case i is
// prepared; its error is the preparation's, before anything of it is
// done (what the case before left is not cleared).
var testHookPrepareCase func(i int) error

// gradingError is a failure inside grading a submitted answer: the
// episode is void (Environment.void), EndError with reason (one of
// results.Reasons), whatever err says.
type gradingError struct {
	reason string
	err    error
}

func (g *gradingError) Error() string { return "grading failed (" + g.reason + "): " + g.err.Error() }

func (g *gradingError) Unwrap() error { return g.err }

// graderFailed is a failed call of the Grader.
func graderFailed(err error) error { return &gradingError{results.ReasonGrader, err} }

// lastJSONLine returns the last non-blank line of out when it is one JSON
// value, else nil.
func lastJSONLine(out []byte) []byte {
	lines := splitLines(decodeReplace(out))
	for i := len(lines) - 1; i >= 0; i-- {
		if pyStrip(lines[i]) == "" {
			continue
		}
		line := []byte(pyStrip(lines[i]))
		if !json.Valid(line) {
			return nil
		}
		return line
	}
	return nil
}

// gradeVisible runs the visible cases and says which returned the expected
// value.
func (e *Environment) gradeVisible(ctx context.Context) ([]bool, error) {
	var argsList [][]any
	for _, c := range e.task.Visible {
		argsList = append(argsList, c.Args)
	}
	outs, err := e.runCases(ctx, argsList)
	if ge := (*gradingError)(nil); errors.As(err, &ge) {
		// The visible cases alone (run_tests): nothing hidden ran, and
		// the step is refused, or fails, as a run would.
		err = ge.err
	}
	if err != nil {
		return nil, err
	}
	passed := make([]bool, len(outs))
	for i, o := range outs {
		passed[i] = o != nil && jsonEqualValue(o, e.task.Visible[i].Want)
	}
	return passed, nil
}

// gradeCode grades a submitted code task: the visible cases here, then the
// hidden ones, in one sequence against one digest, judged by the Grader.
// Any error is a *gradingError.
func (e *Environment) gradeCode(ctx context.Context) (float64, string, error) {
	hidden, err := e.cfg.Grader.HiddenInputs(ctx, e.task.TaskID)
	if err != nil {
		return 0, "", graderFailed(err)
	}
	var argsList [][]any
	for _, c := range e.task.Visible {
		argsList = append(argsList, c.Args)
	}
	nv := len(argsList)
	argsList = append(argsList, hidden...)
	outs, err := e.runCases(ctx, argsList)
	if err != nil {
		return 0, "", err
	}
	visible := make([]bool, nv)
	for i := range nv {
		visible[i] = outs[i] != nil && jsonEqualValue(outs[i], e.task.Visible[i].Want)
	}
	hiddenOut := make([]Output, len(hidden))
	for i := range hidden {
		hiddenOut[i] = Output{Value: outs[nv+i]}
	}
	credit, why, err := e.cfg.Grader.Judge(ctx, e.task.TaskID, visible, hiddenOut)
	if err != nil {
		return 0, "", graderFailed(err)
	}
	return credit, why, nil
}

func (e *Environment) digest() string {
	if e.ws == nil {
		return ""
	}
	return e.ws.digest()
}

// localGrader grades in this process from the catalogue's answer keys.
type localGrader struct{ cat Catalogue }

// LocalGrader returns the in-process Grader: it builds each task from cat
// (nil means package tasks) and grades against its answer key. It is what
// a nil Config.Grader means, and what the remote grader service (package
// grader) serves, so both grade alike.
func LocalGrader(cat Catalogue) Grader {
	if cat == nil {
		cat = taskCatalogue{}
	}
	return localGrader{cat}
}

var _ Grader = localGrader{}

func (g localGrader) task(taskID string) (*tasks.Task, error) {
	t, err := g.cat.Build(taskID)
	if err != nil {
		return nil, fmt.Errorf("grade %s: %w", taskID, err)
	}
	return t, nil
}

func (g localGrader) ScoreAnswer(_ context.Context, taskID, answer string) (float64, string, error) {
	t, err := g.task(taskID)
	if err != nil {
		return 0, "", err
	}
	c, why := tasks.ScoreAnswer(t, answer)
	return c, why, nil
}

func (g localGrader) HiddenInputs(_ context.Context, taskID string) ([][]any, error) {
	t, err := g.task(taskID)
	if err != nil {
		return nil, err
	}
	out := make([][]any, len(t.Key.Hidden))
	for i, c := range t.Key.Hidden {
		out[i] = c.Args
	}
	return out, nil
}

func (g localGrader) Judge(_ context.Context, taskID string, visible []bool, hidden []Output) (float64, string, error) {
	t, err := g.task(taskID)
	if err != nil {
		return 0, "", err
	}
	if len(hidden) != len(t.Key.Hidden) {
		return 0, "", fmt.Errorf("judge %s: %d outputs for %d hidden cases", taskID, len(hidden), len(t.Key.Hidden))
	}
	passed := make([]bool, len(hidden))
	for i, o := range hidden {
		passed[i] = o.Value != nil && jsonEqualValue(o.Value, t.Key.Hidden[i].Want)
	}
	c, why := tasks.ScoreCode(visible, passed)
	return c, why, nil
}

// jsonEqualValue compares a printed JSON value with an expected Go value
// as Python's == compares json.loads of both.
func jsonEqualValue(got []byte, want any) bool {
	wantJSON, err := json.Marshal(want)
	if err != nil {
		return false
	}
	a, okA := decodeJSON(got)
	b, okB := decodeJSON(wantJSON)
	return okA && okB && pyEqual(a, b)
}

func decodeJSON(b []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil || dec.More() {
		return nil, false
	}
	return v, true
}

// pyEqual is Python's == on values json.loads makes: numbers compare by
// value (1 == 1.0), and True == 1, False == 0.
func pyEqual(a, b any) bool {
	if ra, ok := pyNumeric(a); ok {
		rb, ok := pyNumeric(b)
		return ok && ra.Cmp(rb) == 0
	}
	switch x := a.(type) {
	case nil:
		return b == nil
	case string:
		y, ok := b.(string)
		return ok && x == y
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !pyEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !pyEqual(v, w) {
				return false
			}
		}
		return true
	}
	return false
}

func pyNumeric(v any) (*big.Rat, bool) {
	switch x := v.(type) {
	case bool:
		if x {
			return big.NewRat(1, 1), true
		}
		return new(big.Rat), true
	case json.Number:
		r, ok := new(big.Rat).SetString(strings.TrimSpace(string(x)))
		return r, ok
	}
	return nil, false
}
