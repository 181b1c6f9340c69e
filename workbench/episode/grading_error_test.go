package episode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/workbench/results"
	"github.com/agentpen/agentpen/workbench/sandbox"
	"github.com/agentpen/agentpen/workbench/tasks"
)

// leakingSolution is a right median() that, called on arguments that are
// none of the task's examples (a hidden case), leaves them where the
// agent could read them after grading: in /tmp and /dev/shm, which the
// workspace's digest does not cover (the next case runs), and with wait
// in the workspace too; with wait it then names its process hidden-case
// (root sees it in /proc) and sleeps, for the test to act while it runs.
func leakingSolution(t *testing.T, task *tasks.Task, wait bool) string {
	t.Helper()
	var visible [][]any
	for _, c := range task.Visible {
		visible = append(visible, c.Args)
	}
	b, err := json.Marshal(visible)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`import ctypes, json, time
VISIBLE = json.loads(%[1]q)
def median(values):
    if [values] not in VISIBLE:
        text = "LEAK " + json.dumps(values)
        for path in ("/tmp/leak.txt", "/dev/shm/leak.txt") + (("leak.txt",) if %[2]s else ()):
            with open(path, "a") as f:
                f.write(text + "\n")
        if %[2]s:
            ctypes.CDLL(None).prctl(15, b"hidden-case", 0, 0, 0)
            time.sleep(60)
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) %% 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2
`, b, map[bool]string{true: "True", false: "False"}[wait])
}

// voidedEnv is an environment whose episodes' records the test keeps.
type voidedEnv struct {
	env *Environment
	mu  sync.Mutex
	rec []results.Record
}

func newVoidedEnv(t *testing.T) *voidedEnv {
	v := &voidedEnv{}
	v.env = newEnv(t, Config{OnEnd: func(r results.Record) {
		v.mu.Lock()
		defer v.mu.Unlock()
		v.rec = append(v.rec, r)
	}})
	return v
}

func (v *voidedEnv) records() []results.Record {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]results.Record(nil), v.rec...)
}

// checkVoided asserts what a grading error leaves: the submit's
// observation ends the episode without a reward, saying the reason and
// nothing of a hidden input; its record is EndError with that reason;
// nothing of its uid runs; a step after it is refused (and reads
// nothing); and the next reset works, in a workspace, /tmp and /dev/shm
// where nothing of the graded cases is.
func checkVoided(t *testing.T, v *voidedEnv, obs Observation, reason string, uid int) {
	t.Helper()
	if !obs.Done || obs.Reward != 0 || !strings.Contains(obs.Error, reason) || strings.Contains(obs.Output+obs.Error, "LEAK") {
		t.Fatalf("the submit's observation: %+v, want done, no reward, the reason %s and nothing hidden", obs, reason)
	}
	recs := v.records()
	if len(recs) != 1 {
		t.Fatalf("%d records, want the voided episode's: %+v", len(recs), recs)
	}
	r := recs[0]
	line, err := r.Marshal()
	if err != nil || r.End != results.EndError || r.Reason != reason || r.Reward != 0 || strings.Contains(string(line), "LEAK") {
		t.Fatalf("the record: %s (%v), want end error, reason %s, no reward", line, err, reason)
	}
	if pids, err := sandbox.Processes(uid); err != nil || len(pids) != 0 {
		t.Errorf("processes of the voided episode's uid %d: %v %v", uid, pids, err)
	}
	after := step(t, v.env, "run_python", map[string]any{"code": "print(open('/tmp/leak.txt').read(), open('leak.txt').read())"})
	if !after.Done || !strings.Contains(after.Error, "refused") || strings.Contains(after.Output, "LEAK") {
		t.Fatalf("a step after the void: %+v, want it refused", after)
	}
	if again := step(t, v.env, "submit", map[string]any{"answer": "done"}); !again.Done || !strings.Contains(again.Error, "refused") || len(v.records()) != 1 {
		t.Fatalf("a submit after the void: %+v (%d records), want it refused", again, len(v.records()))
	}
	reset(t, v.env, taskMedian)
	look := step(t, v.env, "run_python", map[string]any{"code": "import os; print(sorted(os.listdir('.')), os.listdir('/tmp'), os.listdir('/dev/shm'))"})
	if strings.Contains(look.Output, "leak") || !strings.Contains(look.Output, "solution.py") {
		t.Fatalf("the next episode finds: %s", look.Output)
	}
}

// TestGradingErrorVoids: an error inside grading a submitted code answer
// (its fork server killed during a hidden case; a hidden case's
// preparation failing, with what the case before it wrote still in /tmp
// and /dev/shm) ends the episode as error: what the cases wrote goes
// with its workspace, every later step is refused, and the next reset
// works. It used to be a refusal that kept the episode running, with the
// hidden inputs the cases wrote readable by its next run_python.
func TestGradingErrorVoids(t *testing.T) {
	requireRoot(t)
	task, err := tasks.Build(taskMedian)
	if err != nil {
		t.Fatal(err)
	}
	nv := len(task.Visible)

	t.Run("fork_server_killed", func(t *testing.T) {
		v := newVoidedEnv(t)
		reset(t, v.env, taskMedian)
		fs, uid := v.env.ws.fs, v.env.ws.uid
		if fs == nil || !fs.WaitReady(testenv.Context(t)) {
			t.Fatalf("no fork server here: %v", fs.Err())
		}
		step(t, v.env, "write_file", map[string]any{"path": "solution.py", "content": leakingSolution(t, task, true)})
		// Killed from outside (nothing of the episode can) while the first
		// hidden case runs, after it wrote its arguments.
		killed := make(chan error, 1)
		go func() { killed <- killDuringHiddenCase(testenv.Context(t), fs, uid) }()
		obs := step(t, v.env, "submit", map[string]any{"answer": "done"})
		if err := <-killed; err != nil {
			t.Fatal(err)
		}
		t.Logf("the submit while its fork server was killed: %+v", obs)
		checkVoided(t, v, obs, results.ReasonCaseRun, uid)
	})

	t.Run("case_prepare_failed", func(t *testing.T) {
		v := newVoidedEnv(t)
		reset(t, v.env, taskMedian)
		uid := v.env.ws.uid
		step(t, v.env, "write_file", map[string]any{"path": "solution.py", "content": leakingSolution(t, task, false)})
		// The first hidden case wrote its arguments to the workspace, /tmp
		// and /dev/shm; the second's preparation fails before it clears
		// them.
		testHookPrepareCase = func(i int) error {
			if i == nv+1 {
				return errors.New("injected: the scratch directories could not be emptied")
			}
			return nil
		}
		defer func() { testHookPrepareCase = nil }()
		obs := step(t, v.env, "submit", map[string]any{"answer": "done"})
		testHookPrepareCase = nil
		t.Logf("the submit whose case's preparation failed: %+v", obs)
		checkVoided(t, v, obs, results.ReasonCasePrepare, uid)
	})
}

// killDuringHiddenCase waits until a process of uid names itself
// hidden-case (leakingSolution), then kills the fork server's template
// (its PID namespace, and the case with it) and waits until it is gone.
func killDuringHiddenCase(ctx context.Context, fs *sandbox.ForkServer, uid int) error {
	for {
		pids, err := sandbox.Processes(uid)
		if err != nil {
			return err
		}
		for _, pid := range pids {
			if comm, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm")); strings.TrimSpace(string(comm)) == "hidden-case" {
				tmpl, err := templateOf(fs)
				if err != nil {
					return err
				}
				if err := syscall.Kill(tmpl, syscall.SIGKILL); err != nil {
					return fmt.Errorf("kill the template %d: %w", tmpl, err)
				}
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return errors.New("no hidden case ran")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// templateOf is the pid of the fork server's template (the outermost of
// its processes in its own PID namespace).
func templateOf(fs *sandbox.ForkServer) (int, error) {
	pids, err := fs.Processes()
	if err != nil {
		return 0, err
	}
	for _, pid := range pids {
		status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		for _, l := range strings.Split(string(status), "\n") {
			if f := strings.Fields(l); len(f) == 3 && f[0] == "NSpid:" && f[2] == "2" {
				return pid, nil
			}
		}
	}
	return 0, errors.New("no fork server template")
}
