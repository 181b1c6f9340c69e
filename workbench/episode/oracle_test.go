package episode

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentpen/agentpen/internal/testkit/oracle"
	"github.com/agentpen/agentpen/workbench/tasks"
)

// TestOracleEpisodes plays every family of the catalogue, on variants 0, 1
// and 7, through internal/testkit/oracle's driver (the one the server,
// grader and adapter tests use), in-process: each must earn reward 1.0. As
// root every run_python, run_tests and graded case runs under the uid
// sandbox and its syscall filter, so this is also the proof that the filter
// takes nothing an oracle needs.
func TestOracleEpisodes(t *testing.T) {
	requireRoot(t)
	start := time.Now()
	t.Cleanup(func() { t.Logf("all oracle episodes took %v", time.Since(start)) })
	for _, id := range tasks.IDs() {
		t.Run(strings.ReplaceAll(id, "/", "_"), func(t *testing.T) {
			t.Parallel()
			for _, v := range []int{0, 1, 7} {
				playInProcess(t, id+"@"+strconv.Itoa(v))
			}
		})
	}
}

// playInProcess plays taskID's oracle (oracle.PlayTask) on an
// environment of this process, and checks what the first and last
// observations say of the task and its grade.
func playInProcess(t *testing.T, taskID string) {
	t.Helper()
	task, err := tasks.Build(taskID)
	if err != nil {
		t.Fatal(err)
	}
	env := newEnv(t, Config{})
	first := reset(t, env, taskID)
	if first.Metadata["task_id"] != task.TaskID {
		t.Fatalf("%s: reset metadata task_id = %v", taskID, first.Metadata["task_id"])
	}
	var last Observation
	stepper := func(tool string, args map[string]any) (oracle.Result, error) {
		a := Action{Tool: tool, Args: map[string]json.RawMessage{}}
		for k, v := range args {
			b, err := json.Marshal(v)
			if err != nil {
				return oracle.Result{}, err
			}
			a.Args[k] = b
		}
		o, err := env.Step(context.Background(), a)
		last = o
		return oracle.Result{Output: o.Output, Error: o.Error, Done: o.Done, Reward: o.Reward}, err
	}
	if _, err := oracle.PlayTask(taskID, task.Instruction, stepper); err != nil {
		t.Fatal(err)
	}
	if last.Metadata["correctness"] != 1.0 {
		t.Fatalf("%s: the last observation's metadata %v, want correctness 1", taskID, last.Metadata)
	}
}
