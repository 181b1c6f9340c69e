package episode

import (
	"strings"
	"testing"
	"time"

	"github.com/agentpen/agentpen/workbench/results"
	"github.com/agentpen/agentpen/workbench/sandbox"
)

// stopCases are agent code whose every way of stopping a result must
// name: each program, what the agent is told (a part of it), and the
// stop its episode's result records.
var stopCases = []struct {
	name, code, told string
	want             results.RunStop
}{
	{"normal_exit", "print('hello')", "[exit code 0]", results.RunStop{Reason: results.StopExited}},
	{"failing_exit", "import sys; sys.exit(3)", "[exit code 3]", results.RunStop{Reason: results.StopExited, Status: 3}},
	{"memory_bomb", "b = bytearray(4 << 30)", "MemoryError",
		results.RunStop{Reason: results.StopMemory, Inferred: true, Evidence: results.EvidenceMemoryError, Status: 1}},
	{"fork_flood", "import os\nwhile True:\n    os.fork()\n", "Traceback",
		results.RunStop{Reason: results.StopProcesses, Inferred: true, Evidence: results.EvidenceForkEAGAIN, Status: 1}},
	{"thread_flood", "import threading, time\nwhile True:\n    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n", "can't start new thread",
		results.RunStop{Reason: results.StopProcesses, Inferred: true, Evidence: results.EvidenceThreadRefused, Status: 1}},
	{"infinite_loop", "while True:\n    pass\n", "timed out after 1 s", results.RunStop{Reason: results.StopTimeout}},
	{"large_output", "while True:\n    print('y' * 1000)\n", "[stopped: it printed more than 16 MiB]", results.RunStop{Reason: results.StopOutputLimit}},
	{"killed_by_signal", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", "[exit code -11]",
		results.RunStop{Reason: results.StopSignal, Signal: "SIGSEGV"}},
	// Evidence is only evidence: caught, it names nothing (the code went
	// on and exited 0); printed by code that then fails, it is named,
	// and marked inferred.
	{"memory_caught", "try:\n    b = bytearray(4 << 30)\nexcept MemoryError:\n    print('caught')\n", "caught", results.RunStop{Reason: results.StopExited}},
	{"memory_claimed", "import sys\nprint('MemoryError', file=sys.stderr)\nsys.exit(2)", "[exit code 2]",
		results.RunStop{Reason: results.StopMemory, Inferred: true, Evidence: results.EvidenceMemoryError, Status: 2}},
}

// TestRunStops (root: the real sandbox): a memory bomb, a fork flood, a
// thread flood, an infinite loop, a large output, a signal, a failing and
// a normal exit each end an episode whose result counts its run by why
// its code stopped and, unless it exited 0, names that stop, the
// inferred ones marked with their evidence; an episode that ran no code
// records no runs.
func TestRunStops(t *testing.T) {
	for _, c := range stopCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var r collected
			// A second for the loop, which only its deadline ends; long
			// enough for the rest to meet their limits under load (a fork
			// flood took more than a second beside the package's tests).
			timeout := 60 * time.Second
			if c.name == "infinite_loop" {
				timeout = time.Second
			}
			env := fakeEnv(t, Config{OnEnd: r.add, Limits: Limits{PythonTimeout: timeout}}, "t/number")
			o := step(t, env, "run_python", map[string]any{"code": c.code})
			if !strings.Contains(o.Output, c.told) {
				t.Errorf("the agent is told %q, want %q in it", o.Output, c.told)
			}
			step(t, env, "finish", nil)
			got := r.all()
			if len(got) != 1 {
				t.Fatalf("%d results", len(got))
			}
			g := got[0]
			if err := g.Check(); err != nil {
				t.Fatalf("a result the results file would refuse: %v", err)
			}
			if n := g.Runs.Of(c.want.Reason); n != 1 {
				t.Errorf("runs %s: %d %s runs, want 1", jsonOf(t, g.Runs), n, c.want.Reason)
			}
			want := c.want
			if want.Normal() {
				want = results.RunStop{} // every run exited 0: no stop to tell
			}
			if g.Stop != want {
				t.Errorf("stop %+v (%s), want %+v", g.Stop, g.Stop, want)
			}
			if line, err := g.Marshal(); err != nil || len(line) >= results.MaxLine {
				t.Errorf("the result's line: %d bytes, %v", len(line), err)
			}
		})
	}
	t.Run("no_code", func(t *testing.T) {
		var r collected
		env := fakeEnv(t, Config{OnEnd: r.add}, "t/number")
		play(t, env, []tc{read, {"submit", ans("42")}})
		g := r.all()[0]
		if !g.Runs.IsZero() || g.Stop != (results.RunStop{}) {
			t.Fatalf("runs %s, stop %+v: want none", jsonOf(t, g.Runs), g.Stop)
		}
		if b, _ := g.Marshal(); strings.Contains(string(b), "runs") || strings.Contains(string(b), "stop") {
			t.Errorf("a record of no run says something of runs: %s", b)
		}
	})
}

// TestGradedRunStops (root): the graded cases of a submitted answer are
// runs too: a solution that blows its memory on every case (the visible
// one and the two hidden) is counted once per case, named memory, and
// earns nothing.
func TestGradedRunStops(t *testing.T) {
	var r collected
	env := fakeEnv(t, Config{OnEnd: r.add}, "t/code")
	play(t, env, []tc{
		{"write_file", map[string]any{"path": "solution.py", "content": "def add(a, b):\n    return bytearray(4 << 30)\n"}},
		{"submit", ans("fixed")},
	})
	g := r.all()[0]
	if g.End != results.EndSubmitted || g.Parts.Correctness != 0 {
		t.Errorf("end %s, correctness %v", g.End, g.Parts.Correctness)
	}
	if n := g.Runs.Of(results.StopMemory); n != 3 || g.Stop.Reason != results.StopMemory || !g.Stop.Inferred {
		t.Fatalf("runs %s, stop %+v: want the 3 cases named memory", jsonOf(t, g.Runs), g.Stop)
	}
}

// TestStopOf: what the sandbox observed decides, in order: its error,
// the episode ending, the deadline, the output limit; only then the
// program's end, and the evidence of an inferred stop only for a program
// that did not exit 0.
func TestStopOf(t *testing.T) {
	mem := []byte("Traceback (most recent call last):\n  File \"x\", line 1\nMemoryError\n")
	for _, c := range []struct {
		res  sandbox.Result
		err  error
		want results.RunStop
	}{
		{sandbox.Result{}, sandbox.ErrLaunch, results.RunStop{Reason: results.StopInternal}},
		{sandbox.Result{TimedOut: true, Cancelled: true, Stderr: mem}, nil, results.RunStop{Reason: results.StopCancelled}},
		{sandbox.Result{TimedOut: true, ExitCode: -9, Stderr: mem}, nil, results.RunStop{Reason: results.StopTimeout}},
		{sandbox.Result{OutputLimited: true, ExitCode: -9}, nil, results.RunStop{Reason: results.StopOutputLimit}},
		{sandbox.Result{ExitCode: -9}, nil, results.RunStop{Reason: results.StopSignal, Signal: "SIGKILL"}},
		{sandbox.Result{ExitCode: -40}, nil, results.RunStop{Reason: results.StopSignal, Signal: "SIG40"}},
		{sandbox.Result{ExitCode: -6, Stderr: mem}, nil, results.RunStop{Reason: results.StopMemory, Inferred: true, Evidence: results.EvidenceMemoryError, Signal: "SIGABRT"}},
		{sandbox.Result{ExitCode: 0, Stderr: mem}, nil, results.RunStop{Reason: results.StopExited}},
		{sandbox.Result{ExitCode: 1, Stderr: []byte("OSError: [Errno 12] Cannot allocate memory\n")}, nil,
			results.RunStop{Reason: results.StopMemory, Inferred: true, Evidence: results.EvidenceENOMEM, Status: 1}},
		// EAGAIN without a fork is not the process limit.
		{sandbox.Result{ExitCode: 1, Stderr: []byte("Traceback:\n  File \"x\", line 3, in <module>\n    s.recv(1)\nBlockingIOError: [Errno 11] Resource temporarily unavailable\n")}, nil,
			results.RunStop{Reason: results.StopExited, Status: 1}},
		// The last mark printed names it.
		{sandbox.Result{ExitCode: 1, Stderr: append([]byte("RuntimeError: can't start new thread\n"), mem...)}, nil,
			results.RunStop{Reason: results.StopMemory, Inferred: true, Evidence: results.EvidenceMemoryError, Status: 1}},
	} {
		got := stopOf(c.res, c.err)
		if got != c.want {
			t.Errorf("stopOf(%+v, %v) = %+v, want %+v", c.res, c.err, got, c.want)
		}
		if err := got.Check(); err != nil {
			t.Errorf("stopOf gave a stop the results file refuses: %+v: %v", got, err)
		}
	}
}

func jsonOf(t *testing.T, v interface{ MarshalJSON() ([]byte, error) }) string {
	t.Helper()
	b, err := v.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
