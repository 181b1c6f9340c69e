// Package oracle is the one oracle player of the tests: it plays a task's
// oracle (testdata/oracles) through any episode transport, as an agent
// would. The tests of the episode environment, the grader, the workbench
// binary, the campaign adapter, the launcher's proxy and the benchmarks
// all prove reward 1.0 with it, each over its own wire (a Stepper; over a
// workbench/client session, workbenchtest.Stepper). It does not connect
// to anything itself.
package oracle

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/agentpen/agentpen/workbench/tasks"
)

// Result is what one step returned.
type Result struct {
	Output string
	Error  string
	Done   bool
	Reward float64
}

// Stepper sends one tool call and returns what came back.
type Stepper func(tool string, args map[string]any) (Result, error)

// Dir returns the repository's testdata/oracles directory.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "testdata", "oracles")
}

// Load returns the oracle of the family a task id names.
func Load(taskID string) (string, error) {
	family, _, err := tasks.ParseID(taskID)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(filepath.Join(Dir(), family+".py"))
	if err != nil {
		return "", fmt.Errorf("oracle of %s: %w", family, err)
	}
	return string(b), nil
}

// Play plays one episode after its reset, which showed instruction: for a
// code task it reads solution.py, writes the oracle over it, runs the tests
// and submits; otherwise it runs the oracle with run_python (the
// instruction prepended as INSTRUCTION), reads a file, checks the last line
// printed and submits it. It returns the final step's Result.
func Play(kind tasks.Kind, instruction, oracle, someFile string, step Stepper) (Result, error) {
	do := func(tool string, args map[string]any) (Result, error) {
		r, err := step(tool, args)
		if err != nil {
			return r, fmt.Errorf("%s: %w", tool, err)
		}
		if r.Error != "" {
			return r, fmt.Errorf("%s refused: %s", tool, r.Error)
		}
		return r, nil
	}
	if kind == tasks.KindCode {
		if _, err := do("read_file", map[string]any{"path": "solution.py"}); err != nil {
			return Result{}, err
		}
		if _, err := do("write_file", map[string]any{"path": "solution.py", "content": oracle}); err != nil {
			return Result{}, err
		}
		if _, err := do("run_tests", map[string]any{}); err != nil {
			return Result{}, err
		}
		return do("submit", map[string]any{"answer": "fixed"})
	}
	q, _ := json.Marshal(instruction)
	r, err := do("run_python", map[string]any{"code": "INSTRUCTION = " + string(q) + "\n" + oracle})
	if err != nil {
		return r, err
	}
	answer := LastLine(r.Output)
	if answer == "" {
		return r, fmt.Errorf("oracle printed nothing: %q", r.Output)
	}
	if _, err := do("read_file", map[string]any{"path": someFile}); err != nil {
		return Result{}, err
	}
	if r, err := do("check", map[string]any{"answer": answer}); err != nil || !strings.Contains(r.Output, "check: correct") {
		return r, fmt.Errorf("check of %q: %v %q", answer, err, r.Output)
	}
	return do("submit", map[string]any{"answer": answer})
}

// PlayTask plays the oracle of taskID after a reset that showed
// instruction (Play, with the task's kind and first file), and fails
// unless the episode ended with reward 1.0.
func PlayTask(taskID, instruction string, step Stepper) (Result, error) {
	task, err := tasks.Build(taskID)
	if err != nil {
		return Result{}, err
	}
	code, err := Load(taskID)
	if err != nil {
		return Result{}, err
	}
	r, err := Play(task.Kind, instruction, code, task.Files[0].Path, step)
	if err != nil {
		return r, fmt.Errorf("%s: %w", taskID, err)
	}
	if !r.Done || r.Reward != 1 {
		return r, fmt.Errorf("%s: the oracle's episode ended done=%v with reward %v, want done with 1.0 (output %q, error %q)", taskID, r.Done, r.Reward, r.Output, r.Error)
	}
	return r, nil
}

// LastLine returns the last non-blank line a run_python output printed,
// without the "[exit code N]" trailer.
func LastLine(output string) string {
	lines := strings.Split(strings.TrimSpace(output), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "[exit code ") {
			continue
		}
		return l
	}
	return ""
}
