package episode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

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
	return benchEnvWith(b, Config{}, taskID)
}

// spawnEvery is the configuration of the control benchmarks: every run
// spawned, as without a fork server.
var spawnEvery = Config{NoForkServer: true}

func benchEnvWith(b *testing.B, cfg Config, taskID string) *Environment {
	b.Helper()
	testenv.RequireRoot(b)
	cfg.Sandbox = sandboxtest.Shared(b)
	env, err := New(cfg)
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

// BenchmarkReset: Reset of a text task after an episode that ran code
// and ended (submitted), once the workspace made ahead for the next one
// is ready (its fork server up: the machine was idle between the answer
// and the reset), against the bare spawn, interleaved (raw-). The b2b-
// family (no target) is the same reset right after the answer, with no
// time for the making ahead.
func BenchmarkReset(b *testing.B) {
	env := benchEnv(b, taskCSV)
	var s, raw, b2b testlatency.Samples
	for i := 0; i < b.N; i++ {
		endEpisode(b, env)
		b2b.Time(func() {
			if _, err := env.Reset(context.Background(), ResetOptions{TaskID: taskCSV}); err != nil {
				b.Fatal(err)
			}
		})
		endEpisode(b, env)
		aheadUp(b, env)
		raw.Time(func() { bareSpawn(b) })
		s.Time(func() {
			if _, err := env.Reset(context.Background(), ResetOptions{TaskID: taskCSV}); err != nil {
				b.Fatal(err)
			}
		})
	}
	s.Report(b, "")
	raw.Report(b, "raw-")
	b2b.Report(b, "b2b-")
}

// endEpisode runs code in env's text episode and submits its answer (the
// episode ends).
func endEpisode(b *testing.B, env *Environment) {
	b.Helper()
	benchStep(b, env, "run_python", map[string]any{"code": "pass"})
	benchStep(b, env, "submit", map[string]any{"answer": "0"})
}

// aheadUp waits (untimed) until the workspace env makes ahead for its
// next episode is made and its fork server is up.
func aheadUp(b *testing.B, env *Environment) {
	b.Helper()
	ws := prepared(env)
	if ws == nil {
		b.Fatal("no workspace made ahead")
	}
	if ws.fs != nil && !ws.fs.WaitReady(context.Background()) {
		b.Fatalf("the fork server made ahead is not up: %v", ws.fs.Err())
	}
}

// BenchmarkResetAfterRun: Reset that replaces an episode that ran code
// and did not end (no target: nothing was made ahead for it; the
// replaced episode is torn down after the answer).
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

// BenchmarkSubmitTextAfterRun: submit of a text task's answer after a
// code run, its fork server up (after an untimed reset, the server up, a
// run_python of print(1)).
func BenchmarkSubmitTextAfterRun(b *testing.B) {
	task, err := tasks.Build(taskCSV)
	if err != nil {
		b.Fatal(err)
	}
	env := benchEnv(b, taskCSV)
	var s testlatency.Samples
	for i := 0; i < b.N; i++ {
		env.Reset(context.Background(), ResetOptions{TaskID: taskCSV})
		serverUp(b, env)
		benchStep(b, env, "run_python", map[string]any{"code": "print(1)"})
		s.Time(func() { benchStep(b, env, "submit", map[string]any{"answer": task.Key.Answer}) })
	}
	s.Report(b, "")
}

// BenchmarkRunPython: run_python of print(1), every run spawned (the
// control), against the bare spawn.
func BenchmarkRunPython(b *testing.B) { benchRunPython(b, spawnEvery) }

// BenchmarkForkRunPython: run_python of print(1) through the episode's
// fork server, against the bare spawn.
func BenchmarkForkRunPython(b *testing.B) { benchRunPython(b, Config{}) }

func benchRunPython(b *testing.B, cfg Config) {
	env := benchEnvWith(b, cfg, taskCSV)
	serverUp(b, env)
	var s, raw testlatency.Samples
	steps := 0
	for i := 0; i < b.N; i++ {
		if steps == 19 {
			env.Reset(context.Background(), ResetOptions{TaskID: taskCSV})
			serverUp(b, env)
			steps = 0
		}
		raw.Time(func() { bareSpawn(b) })
		s.Time(func() { benchStep(b, env, "run_python", map[string]any{"code": "print(1)"}) })
		steps++
	}
	s.Report(b, "")
	raw.Report(b, "raw-")
}

// serverUp waits (untimed) until the episode's fork server is up, and
// then agentThinks, as it is long before an agent has read the task and
// written a solution (it starts at reset, is up tens of milliseconds
// later, and its servers make their first runs' processes then); a run
// before is spawned, which BenchmarkForkFirstRun measures. No-op without
// one.
func serverUp(b *testing.B, env *Environment) {
	b.Helper()
	if env.ws.fs == nil {
		return
	}
	if !env.ws.fs.WaitReady(context.Background()) {
		b.Fatalf("the fork server is not up: %v", env.ws.fs.Err())
	}
	time.Sleep(agentThinks)
}

// agentThinks is the least time an agent takes between a reset and its
// first run (reading the task, writing a solution: a model's answer takes
// seconds); the benchmarks give it, untimed, to the fork server's
// servers, which make their first runs' processes once the template is
// up.
const agentThinks = 100 * time.Millisecond

// codeEnv resets env on the median task with the oracle's solution
// written (untimed).
func codeEnv(b *testing.B, env *Environment, solution string) {
	if _, err := env.Reset(context.Background(), ResetOptions{TaskID: taskMedian}); err != nil {
		b.Fatal(err)
	}
	serverUp(b, env)
	benchStep(b, env, "write_file", map[string]any{"path": "solution.py", "content": solution})
}

// BenchmarkRunTests: run_tests of a code task (the test file once, then
// its 3 examples graded one by one), every run spawned (the control),
// against the bare spawn.
func BenchmarkRunTests(b *testing.B) { benchRunTests(b, spawnEvery) }

// BenchmarkForkRunTests: run_tests through the episode's fork server (the
// test file from the runs' server, the examples from a grading server),
// against the bare spawn.
func BenchmarkForkRunTests(b *testing.B) { benchRunTests(b, Config{}) }

func benchRunTests(b *testing.B, cfg Config) {
	solution, err := oracle.Load(taskMedian)
	if err != nil {
		b.Fatal(err)
	}
	env := benchEnvWith(b, cfg, taskMedian)
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
// cases, each on its own), every run spawned (the control), against the
// bare spawn.
func BenchmarkSubmitCode(b *testing.B) { benchSubmitCode(b, spawnEvery) }

// BenchmarkForkSubmitCode: submit of a code task, its cases forked from a
// grading server, against the bare spawn.
func BenchmarkForkSubmitCode(b *testing.B) { benchSubmitCode(b, Config{}) }

func benchSubmitCode(b *testing.B, cfg Config) {
	solution, err := oracle.Load(taskMedian)
	if err != nil {
		b.Fatal(err)
	}
	env := benchEnvWith(b, cfg, taskMedian)
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

// BenchmarkForkFirstRunTests: the first run_tests of a code episode,
// back to back after its reset (and the solution written), against the
// bare spawn, interleaved: the reset after an episode that ended, once
// the workspace made ahead is ready (as BenchmarkReset). The b2b- family
// (no target) waits for nothing: the previous episode's end (finish),
// the reset, the write and run_tests back to back, the template made ahead
// starting meanwhile.
func BenchmarkForkFirstRunTests(b *testing.B) {
	solution, err := oracle.Load(taskMedian)
	if err != nil {
		b.Fatal(err)
	}
	env := benchEnvWith(b, Config{}, taskMedian)
	var s, raw, b2b testlatency.Samples
	runTests := func(s *testlatency.Samples, wait bool) {
		benchStep(b, env, "finish", nil)
		if wait {
			aheadUp(b, env)
		}
		if _, err := env.Reset(context.Background(), ResetOptions{TaskID: taskMedian}); err != nil {
			b.Fatal(err)
		}
		benchStep(b, env, "write_file", map[string]any{"path": "solution.py", "content": solution})
		s.Time(func() { benchStep(b, env, "run_tests", nil) })
	}
	for i := 0; i < b.N; i++ {
		runTests(&b2b, false)
		raw.Time(func() { bareSpawn(b) })
		runTests(&s, true)
	}
	s.Report(b, "")
	raw.Report(b, "raw-")
	b2b.Report(b, "b2b-")
	raw.Report(b, "raw-b2b-")
}

// BenchmarkForkFirstRun: run_python of print(1) right after a reset that
// replaced an episode (nothing made ahead: the fork server's template
// starts at the reset; the run waits for it or is spawned), against the
// bare spawn (no target: what a first run pays when it comes at once).
func BenchmarkForkFirstRun(b *testing.B) {
	env := benchEnv(b, taskCSV)
	var s, raw testlatency.Samples
	for i := 0; i < b.N; i++ {
		raw.Time(func() { bareSpawn(b) })
		if _, err := env.Reset(context.Background(), ResetOptions{TaskID: taskCSV}); err != nil {
			b.Fatal(err)
		}
		s.Time(func() { benchStep(b, env, "run_python", map[string]any{"code": "print(1)"}) })
	}
	s.Report(b, "")
	raw.Report(b, "raw-")
}

// BenchmarkForkServerMemory: what a live code episode's fork server holds
// (its template's RSS, and the pages its servers have of their own: the
// runs' server's after a run, the grading server's after run_tests)
// beyond one idle interpreter's RSS, measured in the same run
// (beyond-idle-bytes; server-bytes and idle-bytes beside it). The loop
// only repeats the measure.
func BenchmarkForkServerMemory(b *testing.B) {
	solution, err := oracle.Load(taskMedian)
	if err != nil {
		b.Fatal(err)
	}
	env := benchEnv(b, taskMedian)
	benchStep(b, env, "write_file", map[string]any{"path": "solution.py", "content": solution})
	benchStep(b, env, "run_python", map[string]any{"code": "print(1)"})
	benchStep(b, env, "run_tests", nil)
	idle := exec.Command("/usr/bin/python3", "-E", "-s", "-c", "import sys; print('ready', flush=True); sys.stdin.read()")
	stdin, err := idle.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := idle.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := idle.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { stdin.Close(); idle.Wait() }()
	if _, err := out.Read(make([]byte, 6)); err != nil {
		b.Fatal(err)
	}
	var server, idleRSS int64
	for i := 0; i < b.N; i++ {
		idleRSS = smapsRollup(b, idle.Process.Pid)["Rss"]
		server = 0
		pids, err := env.ws.fs.Processes()
		if err != nil || len(pids) < 3 {
			b.Fatalf("the fork server's processes: %v %v", pids, err)
		}
		for _, pid := range pids {
			m := smapsRollup(b, pid)
			if isTemplate(pid) {
				server += m["Rss"]
			} else {
				server += m["Private_Clean"] + m["Private_Dirty"]
			}
		}
	}
	b.ReportMetric(float64(server-idleRSS), "beyond-idle-bytes")
	b.ReportMetric(float64(server), "server-bytes")
	b.ReportMetric(float64(idleRSS), "idle-bytes")
}

// smapsRollup reads /proc/<pid>/smaps_rollup's fields, in bytes (none
// for a process gone).
func smapsRollup(b *testing.B, pid int) map[string]int64 {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return nil // it ended since the listing (a run's child)
	}
	m := map[string]int64{}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[2] == "kB" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			m[strings.TrimSuffix(f[0], ":")] = n << 10
		}
	}
	return m
}

// isTemplate: pid is pid 2 of its PID namespace, one below this
// process's (a fork server's template; a run's program is pid 2 one
// further down).
func isTemplate(pid int) bool {
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(status), "\n") {
		if f := strings.Fields(l); len(f) > 2 && f[0] == "NSpid:" {
			return len(f) == 3 && f[2] == "2" // the server's outermost namespace
		}
	}
	return false
}
