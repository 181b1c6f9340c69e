package episode

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/sandboxtest"
	"github.com/agentpen/agentpen/workbench/bind"
	"github.com/agentpen/agentpen/workbench/sandbox"
	"github.com/agentpen/agentpen/workbench/tasks"
)

// fakeCatalogue holds two small tasks so these tests do not depend on the
// real catalogue.
type fakeCatalogue struct{}

func (fakeCatalogue) IDs() []string { return []string{"t/code", "t/number"} }

func (fakeCatalogue) Build(id string) (*tasks.Task, error) {
	switch id {
	case "t/number":
		return &tasks.Task{
			Spec: tasks.Spec{ID: id, Domain: "t", Family: "number", Kind: tasks.KindNumber}, TaskID: id,
			Instruction: "What is the answer?",
			Files:       []tasks.File{{Path: "data.txt", Content: "l1\nl2\nl3\n"}, {Path: "empty.txt"}},
			Key:         tasks.Key{Answer: "42", Tolerance: 0.01},
		}, nil
	case "t/code":
		visible := []tasks.Case{{Args: []any{1, 2}, Want: 3}}
		return &tasks.Task{
			Spec: tasks.Spec{ID: id, Domain: "t", Family: "code", Kind: tasks.KindCode}, TaskID: id,
			Instruction: "Fix add.", Function: "add", Visible: visible,
			Files: []tasks.File{
				{Path: "solution.py", Content: "def add(a, b):\n    return a - b\n"},
				{Path: "test_solution.py", Content: tasks.TestFile("add", visible)},
			},
			Key: tasks.Key{Hidden: []tasks.Case{{Args: []any{2, 2}, Want: 4}, {Args: []any{5, 1}, Want: 6}}},
		}, nil
	}
	return nil, tasks.ErrUnknownTask
}

const fixedAdd = "def add(a, b):\n    return a + b\n"

func fakeEnv(t *testing.T, cfg Config, task string) *Environment {
	t.Helper()
	requireRoot(t)
	cfg.Catalogue = fakeCatalogue{}
	env := newEnv(t, cfg)
	reset(t, env, task)
	return env
}

type tc struct {
	tool string
	args map[string]any
}

func play(t *testing.T, env *Environment, calls []tc) Observation {
	t.Helper()
	var o Observation
	for _, c := range calls {
		o = step(t, env, c.tool, c.args)
	}
	return o
}

var (
	read   = tc{"read_file", map[string]any{"path": "data.txt"}}
	bad    = tc{"nope", nil}
	ans    = func(a any) map[string]any { return map[string]any{"answer": a} }
	writeF = tc{"write_file", map[string]any{"path": "solution.py", "content": fixedAdd}}
	tests  = tc{"run_tests", nil}
)

// TestRewardTerms: each term of the reward, on number and code tasks.
func TestRewardTerms(t *testing.T) {
	cases := []struct {
		name  string
		task  string
		calls []tc
		want  float64
	}{
		{"correct_only", "t/number", []tc{{"submit", ans("42")}}, 0.8},
		{"correct_number_as_json_number", "t/number", []tc{read, {"submit", ans(42)}}, 0.9},
		{"read_correct", "t/number", []tc{read, {"submit", ans("42")}}, 0.9},
		{"read_checked_correct", "t/number", []tc{read, {"check", ans("42")}, {"submit", ans(" 42 ")}}, 1.0},
		{"checked_other_answer", "t/number", []tc{read, {"check", ans("42")}, {"submit", ans("42.0")}}, 0.9},
		{"wrong", "t/number", []tc{read, {"check", ans("41")}, {"submit", ans("41")}}, 0.2},
		{"invalid_call_costs", "t/number", []tc{bad, read, {"check", ans("42")}, {"submit", ans("42")}}, 0.9},
		{"ran_code_counts_as_read", "t/number", []tc{{"run_python", map[string]any{"code": "print(1)"}}, {"submit", ans("42")}}, 0.9},
		{"list_files_is_not_reading", "t/number", []tc{{"list_files", nil}, {"submit", ans("42")}}, 0.8},
		{"finish_earns_nothing", "t/number", []tc{read, {"check", ans("42")}, {"finish", nil}}, 0},
		// run_tests is not reading: the seed counts only read_file and run_python.
		{"code_fixed_tested", "t/code", []tc{writeF, tests, {"submit", ans("fixed")}}, 0.9},
		{"code_read_fixed_tested", "t/code", []tc{{"read_file", map[string]any{"path": "solution.py"}}, writeF, tests, {"submit", ans("fixed")}}, 1.0},
		{"code_fixed_untested", "t/code", []tc{writeF, {"submit", ans("fixed")}}, 0.8},
		{"code_tests_then_changed", "t/code", []tc{writeF, tests, writeF, {"submit", ans("fixed")}}, 0.8},
		{"code_tests_then_run_python", "t/code", []tc{writeF, tests, {"run_python", map[string]any{"code": "print(1)"}}, {"submit", ans("x")}}, 0.9},
		{"code_buggy", "t/code", []tc{tests, {"submit", ans("x")}}, 0.1},
		{"code_hidden_partial", "t/code", []tc{{"write_file", map[string]any{"path": "solution.py",
			"content": "def add(a, b):\n    return 4 if a == 2 else a + b + (a == 5)\n"}}, {"submit", ans("x")}}, 0.7*0.5 + 0.1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			env := fakeEnv(t, Config{}, c.task)
			o := play(t, env, c.calls)
			if !o.Done || o.Reward != c.want {
				t.Fatalf("done=%v reward=%v, want %v (output %q, error %q, metadata %v)", o.Done, o.Reward, c.want, o.Output, o.Error, o.Metadata)
			}
			if _, ok := o.Metadata["correctness"]; !ok {
				t.Fatalf("final metadata without correctness: %v", o.Metadata)
			}
			if again := step(t, env, "list_files", nil); !again.Done || again.Output != "The episode has ended." || again.Reward != c.want {
				t.Fatalf("after the end: %+v", again)
			}
		})
	}
}

func TestEpisodeEnds(t *testing.T) {
	t.Run("three_invalid_in_a_row", func(t *testing.T) {
		env := fakeEnv(t, Config{}, "t/number")
		o := play(t, env, []tc{read, bad, bad})
		if o.Done {
			t.Fatal("ended after two invalid calls")
		}
		o = step(t, env, "read_file", map[string]any{"path": "../x"})
		if !o.Done || o.Reward != 0 || !strings.Contains(o.Output, "Three invalid calls in a row end the episode.") {
			t.Fatalf("%+v", o)
		}
	})
	t.Run("invalid_run_resets", func(t *testing.T) {
		env := fakeEnv(t, Config{}, "t/number")
		if o := play(t, env, []tc{bad, bad, read, bad, bad}); o.Done {
			t.Fatalf("ended: %+v", o)
		}
	})
	t.Run("steps_exhausted", func(t *testing.T) {
		env := fakeEnv(t, Config{Limits: Limits{MaxSteps: 3}}, "t/number")
		o := play(t, env, []tc{read, read})
		if o.Done || o.StepsLeft != 1 {
			t.Fatalf("%+v", o)
		}
		o = step(t, env, "read_file", map[string]any{"path": "data.txt"})
		if !o.Done || o.Reward != 0 || o.Output != "No tool calls left; the episode ends without a submitted answer." {
			t.Fatalf("%+v", o)
		}
	})
	t.Run("steps_exhausted_on_refusal", func(t *testing.T) {
		env := fakeEnv(t, Config{Limits: Limits{MaxSteps: 2}}, "t/number")
		o := play(t, env, []tc{read, bad})
		if !o.Done || !strings.HasSuffix(o.Output, ". No tool calls left.") {
			t.Fatalf("%+v", o)
		}
	})
	t.Run("check_twice", func(t *testing.T) {
		env := fakeEnv(t, Config{}, "t/number")
		o := play(t, env, []tc{{"check", ans("1")}, {"check", ans("42")}})
		if o.Output != "check: correct (0 checks left)" {
			t.Fatalf("%+v", o)
		}
		o = step(t, env, "check", ans("42"))
		if o.Error != "check can be used at most 2 times" {
			t.Fatalf("%+v", o)
		}
	})
}

func TestRefusals(t *testing.T) {
	cases := []struct {
		name, task, tool string
		args             map[string]any
		want             string
	}{
		{"unknown_tool", "t/number", "rm", nil, "unknown tool 'rm'; use one of the tools listed at reset"},
		{"unexpected_arg", "t/number", "list_files", map[string]any{"x": 1, "a": 2}, "unexpected argument(s) ['a', 'x']; allowed: none"},
		{"unexpected_arg_read", "t/number", "read_file", map[string]any{"path": "a", "mode": 1}, "unexpected argument(s) ['mode']; allowed: ['end', 'path', 'start']"},
		{"path_missing", "t/number", "read_file", nil, "'path' must be a non-empty string without NUL characters"},
		{"path_number", "t/number", "read_file", map[string]any{"path": 3}, "'path' must be a non-empty string without NUL characters"},
		{"path_absolute", "t/number", "read_file", map[string]any{"path": "/etc/passwd"}, "paths must stay inside the workspace (relative, no '..')"},
		{"path_reserved", "t/number", "write_file", map[string]any{"path": ".run.py", "content": "x"}, "that file is reserved"},
		{"path_workspace", "t/number", "read_file", map[string]any{"path": "."}, "'path' must name a file, not the workspace itself"},
		{"no_such_file", "t/number", "read_file", map[string]any{"path": "nope.txt"}, "no such file: 'nope.txt'"},
		{"not_regular", "t/code", "read_file", map[string]any{"path": "solution.py/x"}, "cannot use the path 'solution.py/x': Not a directory"},
		{"start_float", "t/number", "read_file", map[string]any{"path": "data.txt", "start": 1.5}, "'start' must be an integer"},
		{"start_bool", "t/number", "read_file", map[string]any{"path": "data.txt", "start": true}, "'start' must be an integer"},
		{"end_string", "t/number", "read_file", map[string]any{"path": "data.txt", "end": "2"}, "'end' must be an integer"},
		{"code_empty", "t/number", "run_python", map[string]any{"code": "  \n"}, "run_python needs a non-empty string 'code'"},
		{"code_not_string", "t/number", "run_python", map[string]any{"code": 1}, "run_python needs a non-empty string 'code'"},
		{"code_lone_surrogate", "t/number", "run_python", map[string]any{"code": json.RawMessage(`"print('\ud800')"`)}, "cannot prepare .run.py: the text is not valid UTF-8"},
		{"content_too_long", "t/number", "write_file", map[string]any{"path": "a", "content": strings.Repeat("é", 20001)}, "write_file needs a string 'content' of at most 20000 characters"},
		{"content_lone_surrogate", "t/number", "write_file", map[string]any{"path": "a", "content": json.RawMessage(`"\udc00"`)}, "write_file 'content' must be text UTF-8 can encode"},
		{"run_tests_number_task", "t/number", "run_tests", nil, "run_tests is only for code tasks; use check to test an answer"},
		{"check_code_task", "t/code", "check", ans("x"), "for code tasks use run_tests"},
		{"answer_empty", "t/number", "submit", ans("  "), "'answer' must be a non-empty string"},
		{"answer_bool", "t/number", "submit", ans(true), "'answer' must be a non-empty string"},
		{"answer_missing", "t/number", "check", nil, "'answer' must be a non-empty string"},
		{"answer_list", "t/number", "submit", ans([]int{4}), "'answer' must be a non-empty string"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			env := fakeEnv(t, Config{}, c.task)
			o := step(t, env, c.tool, c.args)
			if o.Error != c.want || o.Done || o.Output != "" {
				t.Fatalf("error %q (output %q, done %v), want %q", o.Error, o.Output, o.Done, c.want)
			}
			if env.invalidTotal != 1 {
				t.Fatalf("invalid calls counted %d", env.invalidTotal)
			}
		})
	}
}

func TestReadFile(t *testing.T) {
	env := fakeEnv(t, Config{Limits: Limits{ReadLines: 2}}, "t/number")
	cases := []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"path": "data.txt"}, "   1 l1\n   2 l2\n[lines 1-2 of 3]"},
		{map[string]any{"path": "data.txt", "start": 2}, "   2 l2\n   3 l3\n[lines 2-3 of 3]"},
		{map[string]any{"path": "data.txt", "start": 3, "end": 99}, "   3 l3\n[lines 3-3 of 3]"},
		{map[string]any{"path": "data.txt", "start": -5}, "\n[lines 1--4 of 3]"},
		{map[string]any{"path": "data.txt", "start": 9}, "\n[lines 9-3 of 3]"},
		{map[string]any{"path": "./data.txt", "end": 1}, "   1 l1\n[lines 1-1 of 3]"},
		{map[string]any{"path": "empty.txt"}, "[empty file]"},
	}
	for _, c := range cases {
		if o := step(t, env, "read_file", c.args); o.Output != c.want || o.Error != "" {
			t.Errorf("read_file %v = %q (error %q), want %q", c.args, o.Output, o.Error, c.want)
		}
	}
}

func TestWriteListRun(t *testing.T) {
	env := fakeEnv(t, Config{Limits: Limits{OutputChars: 100}}, "t/number")
	if o := step(t, env, "write_file", map[string]any{"path": "./new//dir/f.txt", "content": "héllo"}); o.Output != "wrote new/dir/f.txt (5 characters)" {
		t.Fatalf("%+v", o)
	}
	if o := step(t, env, "list_files", nil); o.Output != "data.txt (9 bytes)\nempty.txt (0 bytes)\nnew/dir/f.txt (6 bytes)" {
		t.Fatalf("%q", o.Output)
	}
	if o := step(t, env, "run_python", map[string]any{"code": "import sys\nprint(open('new/dir/f.txt').read())\nsys.exit(3)"}); o.Output != "héllo\n[exit code 3]" {
		t.Fatalf("%q", o.Output)
	}
	if o := step(t, env, "run_python", map[string]any{"code": "pass"}); o.Output != "(no output)\n[exit code 0]" {
		t.Fatalf("%q", o.Output)
	}
	o := step(t, env, "run_python", map[string]any{"code": "print('x' * 150)"})
	if o.Output != strings.Repeat("x", 100)+"\n[... 64 more characters not shown]" {
		t.Fatalf("%q", o.Output)
	}
}

func TestResetAndState(t *testing.T) {
	env := fakeEnv(t, Config{}, "t/number")
	step(t, env, "read_file", map[string]any{"path": "data.txt"})
	ws := env.ws.dir
	_, err := env.Reset(context.Background(), ResetOptions{TaskID: "t/missing"})
	if !errors.Is(err, tasks.ErrUnknownTask) {
		t.Fatalf("Reset(unknown) = %v, want ErrUnknownTask", err)
	}
	if env.ws == nil || env.ws.dir != ws || env.State().StepCount != 1 {
		t.Fatal("the refused reset touched the running episode")
	}
	seed := int64(3)
	o, err := env.Reset(context.Background(), ResetOptions{Seed: &seed, EpisodeID: "ep-1"})
	if err != nil || o.Metadata["task_id"] != "t/number" || env.State() != (State{EpisodeID: "ep-1"}) {
		t.Fatalf("seeded reset: %v %v %+v", err, o.Metadata, env.State())
	}
	if !strings.Contains(o.Tools, "You have 20 tool calls.") || !strings.HasPrefix(o.Output, "Workspace files:\n") {
		t.Fatalf("%+v", o)
	}
	if err := env.Close(); err != nil {
		t.Fatal(err)
	}
	if err := env.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := env.Step(context.Background(), Action{Tool: "list_files"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Step after Close: %v", err)
	}
}

func TestStepBeforeReset(t *testing.T) {
	requireRoot(t)
	env := newEnv(t, Config{Catalogue: fakeCatalogue{}})
	o := step(t, env, "list_files", nil)
	if o.Metadata["task_id"] != "t/code" || env.State().StepCount != 1 {
		t.Fatalf("%+v %+v", o, env.State())
	}
}

// errGrader fails every call, as a remote grader that is down.
type errGrader struct{}

func (errGrader) ScoreAnswer(context.Context, string, string) (float64, string, error) {
	return 0, "", errors.New("grader unreachable")
}
func (errGrader) HiddenInputs(context.Context, string) ([][]any, error) {
	return nil, errors.New("grader unreachable")
}
func (errGrader) Judge(context.Context, string, []bool, []Output) (float64, string, error) {
	return 0, "", errors.New("grader unreachable")
}

// TestGraderErrorVoids: a grader that fails a submit's grading ends the
// episode without a reward, saying grading failed and why in a word
// (never the grader's own text), and a step after it is refused. It was
// a refusal that kept the episode running.
func TestGraderErrorVoids(t *testing.T) {
	for _, task := range []string{"t/number", "t/code"} {
		env := fakeEnv(t, Config{Grader: errGrader{}}, task)
		o := step(t, env, "submit", ans("42"))
		if !o.Done || o.Reward != 0 || !strings.Contains(o.Error, "grading failed (grader_failed)") || strings.Contains(o.Error, "grader unreachable") {
			t.Fatalf("%s: %+v", task, o)
		}
		if o := step(t, env, "list_files", nil); !o.Done || !strings.Contains(o.Error, "refused") {
			t.Fatalf("%s: a step after the void: %+v", task, o)
		}
	}
}

func TestPyFormatting(t *testing.T) {
	for lit, want := range map[string]string{"42": "42", "-0": "0", "1.0": "1.0", "1e16": "1e+16",
		"1e15": "1000000000000000.0", "0.0001": "0.0001", "0.00001": "1e-05", "-2.50": "-2.5", "1E400": "inf"} {
		if got, ok := pyNumber(lit); !ok || got != want {
			t.Errorf("pyNumber(%s) = %q, %v; want %q", lit, got, ok, want)
		}
	}
	for in, want := range map[string]string{"a": "'a'", "it's": `"it's"`, "a\nb": `'a\nb'`, "x\x00": `'x\x00'`} {
		if got := pyRepr(in); got != want {
			t.Errorf("pyRepr(%q) = %s, want %s", in, got, want)
		}
	}
	if got := splitLines("a\r\nb\rc\x0cd\n"); strings.Join(got, "|") != "a|b|c|d" {
		t.Errorf("splitLines = %q", got)
	}
	if !pyEqual(json.Number("1"), json.Number("1.0")) || !pyEqual(true, json.Number("1")) || pyEqual("1", json.Number("1")) {
		t.Error("pyEqual disagrees with Python")
	}
}

func TestConfigMetadata(t *testing.T) {
	m := Config{Limits: Limits{MaxSteps: 7}, Sandbox: sandboxtest.Shared(t)}.Metadata()
	want := "unsandboxed"
	if sandbox.Available() {
		want = "namespaces"
	}
	limits, _ := m["limits"].(map[string]any)
	run, _ := m["run_limits"].(sandbox.Limits)
	if m["sandbox"] != want || limits["max_steps"] != 7 || limits["max_checks"] != 2 || run.Processes != sandbox.DefaultLimits.Processes {
		t.Fatalf("Metadata() = %v", m)
	}
	if _, err := json.Marshal(m); err != nil {
		t.Fatal(err)
	}
}

// TestBoundReset: with a binding, a reset naming no task plays the bound
// one (whatever the seed), one naming another is refused with the
// binding's error and leaves the running episode untouched, a step
// before any reset plays the bound task, and an unbound binding refuses
// every reset and every first step.
func TestBoundReset(t *testing.T) {
	requireRoot(t)
	b, err := bind.Fixed("t/number")
	if err != nil {
		t.Fatal(err)
	}
	env := newEnv(t, Config{Catalogue: fakeCatalogue{}, Binding: b})
	// Before any reset: the default would be t/code; the bound task plays.
	if o := step(t, env, "list_files", nil); o.Metadata["task_id"] != "t/number" {
		t.Fatalf("a step before any reset played %v", o.Metadata["task_id"])
	}
	seed := int64(0) // ids[0] is t/code
	if o, err := env.Reset(context.Background(), ResetOptions{Seed: &seed}); err != nil || o.Metadata["task_id"] != "t/number" {
		t.Fatalf("seeded reset: %v, %v", err, o.Metadata)
	}
	step(t, env, "read_file", map[string]any{"path": "data.txt"})
	ws := env.ws.dir
	if _, err := env.Reset(context.Background(), ResetOptions{TaskID: "t/code"}); !errors.Is(err, bind.ErrOtherTask) {
		t.Fatalf("Reset(other task) = %v, want bind.ErrOtherTask", err)
	}
	if env.ws == nil || env.ws.dir != ws || env.State().StepCount != 1 {
		t.Fatal("the refused reset touched the running episode")
	}
	if o := reset(t, env, "t/number"); o.Metadata["task_id"] != "t/number" {
		t.Fatalf("reset naming the bound task: %v", o.Metadata)
	}

	unbound, err := bind.File(filepath.Join(t.TempDir(), bind.FileName))
	if err != nil {
		t.Fatal(err)
	}
	env2 := newEnv(t, Config{Catalogue: fakeCatalogue{}, Binding: unbound})
	if _, err := env2.Reset(context.Background(), ResetOptions{}); !errors.Is(err, bind.ErrUnbound) {
		t.Fatalf("reset without the bind file: %v, want bind.ErrUnbound", err)
	}
	if _, err := env2.Step(context.Background(), Action{Tool: "list_files"}); !errors.Is(err, bind.ErrUnbound) {
		t.Fatalf("step without the bind file: %v, want bind.ErrUnbound", err)
	}
}
