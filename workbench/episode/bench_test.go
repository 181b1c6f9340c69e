package episode

import (
	"context"
	"os/exec"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/oracle"
	"github.com/agentpen/agentpen/internal/testkit/sandboxtest"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/internal/testkit/testlatency"
	"github.com/agentpen/agentpen/workbench/tasks"
)

// The benchmarks measure one tool call in-process, as root with the uid
// sandbox (the production path), and report median, p90 and n (package
// internal/testkit/testlatency); spawning ones measure the bare interpreter
// spawn interleaved as their raw limit. make bench (package bench) turns
// them into the target table.

func benchEnv(b *testing.B, taskID string) *Environment {
	b.Helper()
	testenv.RequireRoot(b)
	env, err := New(Config{Sandbox: sandboxtest.Shared(b)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { env.Close() })
	if _, err := env.Reset(context.Background(), ResetOptions{TaskID: taskID}); err != nil {
		b.Fatal(err)
	}
	return env
}

func benchStep(b *testing.B, env *Environment, tool string, args map[string]any) Observation {
	b.Helper()
	o, err := env.Step(context.Background(), call(b, tool, args))
	if err != nil {
		b.Fatal(err)
	}
	if o.Error != "" {
		b.Fatalf("%s refused: %s", tool, o.Error)
	}
	return o
}

func bareSpawn(b *testing.B) {
	if err := exec.Command("/usr/bin/python3", "-E", "-s", "-c", "pass").Run(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkReset: Reset of a text task, ending the previous episode.
func BenchmarkReset(b *testing.B) {
	env := benchEnv(b, taskCSV)
	var s testlatency.Samples
	for i := 0; i < b.N; i++ {
		s.Time(func() {
			if _, err := env.Reset(context.Background(), ResetOptions{TaskID: taskCSV}); err != nil {
				b.Fatal(err)
			}
		})
	}
	s.Report(b, "")
}

// BenchmarkResetAfterRun: Reset after an episode that ran code (no
// target: the trainer's usual reset; BenchmarkReset is the target's).
func BenchmarkResetAfterRun(b *testing.B) {
	env := benchEnv(b, taskCSV)
	var s testlatency.Samples
	for i := 0; i < b.N; i++ {
		benchStep(b, env, "run_python", map[string]any{"code": "pass"})
		s.Time(func() {
			if _, err := env.Reset(context.Background(), ResetOptions{TaskID: taskCSV}); err != nil {
				b.Fatal(err)
			}
		})
	}
	s.Report(b, "")
}

// BenchmarkTool: list_files, read_file, write_file and check of a text
// task. The episode is reset (untimed) whenever its steps run out.
func BenchmarkTool(b *testing.B) {
	task, err := tasks.Build(taskCSV)
	if err != nil {
		b.Fatal(err)
	}
	file := task.Files[0].Path
	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{"list_files", nil},
		{"read_file", map[string]any{"path": file}},
		{"write_file", map[string]any{"path": "notes.txt", "content": "a note\n"}},
		{"check", map[string]any{"answer": "not it"}},
	} {
		b.Run(tc.tool, func(b *testing.B) {
			env := benchEnv(b, taskCSV)
			var s testlatency.Samples
			limit := 18 // tool calls per episode, less the margin
			if tc.tool == "check" {
				limit = 2 // checks per episode
			}
			steps := 0
			for i := 0; i < b.N; i++ {
				if steps == limit {
					env.Reset(context.Background(), ResetOptions{TaskID: taskCSV})
					steps = 0
				}
				s.Time(func() { benchStep(b, env, tc.tool, tc.args) })
				steps++
			}
			s.Report(b, "")
		})
	}
}

// BenchmarkSubmitText: submit of a text task's answer (after an untimed
// reset and read).
func BenchmarkSubmitText(b *testing.B) {
	task, err := tasks.Build(taskCSV)
	if err != nil {
		b.Fatal(err)
	}
	env := benchEnv(b, taskCSV)
	var s testlatency.Samples
	for i := 0; i < b.N; i++ {
		env.Reset(context.Background(), ResetOptions{TaskID: taskCSV})
		s.Time(func() { benchStep(b, env, "submit", map[string]any{"answer": task.Key.Answer}) })
	}
	s.Report(b, "")
}

// BenchmarkRunPython: run_python of print(1), against the bare spawn.
func BenchmarkRunPython(b *testing.B) {
	env := benchEnv(b, taskCSV)
	var s, raw testlatency.Samples
	steps := 0
	for i := 0; i < b.N; i++ {
		if steps == 19 {
			env.Reset(context.Background(), ResetOptions{TaskID: taskCSV})
			steps = 0
		}
		raw.Time(func() { bareSpawn(b) })
		s.Time(func() { benchStep(b, env, "run_python", map[string]any{"code": "print(1)"}) })
		steps++
	}
	s.Report(b, "")
	raw.Report(b, "raw-")
}

// codeEnv resets env on the median task with the oracle's solution
// written (untimed).
func codeEnv(b *testing.B, env *Environment, solution string) {
	if _, err := env.Reset(context.Background(), ResetOptions{TaskID: taskMedian}); err != nil {
		b.Fatal(err)
	}
	benchStep(b, env, "write_file", map[string]any{"path": "solution.py", "content": solution})
}

// BenchmarkRunTests: run_tests of a code task (the test file once, then
// its 3 examples graded one by one), against the bare spawn.
func BenchmarkRunTests(b *testing.B) {
	solution, err := oracle.Load(taskMedian)
	if err != nil {
		b.Fatal(err)
	}
	env := benchEnv(b, taskMedian)
	var s, raw testlatency.Samples
	for i := 0; i < b.N; i++ {
		codeEnv(b, env, solution)
		raw.Time(func() { bareSpawn(b) })
		s.Time(func() { benchStep(b, env, "run_tests", nil) })
	}
	s.Report(b, "")
	raw.Report(b, "raw-")
}

// BenchmarkSubmitCode: submit of a code task (3 visible and 6 hidden
// cases, each on its own), against the bare spawn.
func BenchmarkSubmitCode(b *testing.B) {
	solution, err := oracle.Load(taskMedian)
	if err != nil {
		b.Fatal(err)
	}
	env := benchEnv(b, taskMedian)
	var s, raw testlatency.Samples
	for i := 0; i < b.N; i++ {
		codeEnv(b, env, solution)
		raw.Time(func() { bareSpawn(b) })
		s.Time(func() {
			o := benchStep(b, env, "submit", map[string]any{"answer": "fixed"})
			if o.Metadata["correctness"] != 1.0 {
				b.Fatalf("submit: correctness %v (%s)", o.Metadata["correctness"], o.Output)
			}
		})
	}
	s.Report(b, "")
	raw.Report(b, "raw-")
}
