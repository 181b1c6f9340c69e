package episode

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentpen/agentpen/workbench/tasks"
)

// TestOracleEpisodes plays every family of the catalogue, on variants 0, 1
// and 7, as an agent would, from testdata/oracles (see its README): a
// non-code oracle runs through run_python with the instruction prepended,
// a file is read, and the last printed line is submitted; a code oracle
// replaces solution.py with write_file after reading it, the tests run,
// and it is submitted. Each must earn reward 1.0.
func TestOracleEpisodes(t *testing.T) {
	requireRoot(t)
	start := time.Now()
	t.Cleanup(func() { t.Logf("all oracle episodes took %v", time.Since(start)) })
	for _, id := range tasks.IDs() {
		t.Run(strings.ReplaceAll(id, "/", "_"), func(t *testing.T) {
			t.Parallel()
			oracle, err := os.ReadFile(filepath.Join("..", "..", "testdata", "oracles", id+".py"))
			if err != nil {
				t.Fatalf("no oracle for family %s: %v", id, err)
			}
			for _, v := range []int{0, 1, 7} {
				taskID := id + "@" + strconv.Itoa(v)
				playOracle(t, taskID, string(oracle))
			}
		})
	}
}

func playOracle(t *testing.T, taskID, oracle string) {
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
	var final Observation
	if task.Kind == tasks.KindCode {
		if o := step(t, env, "read_file", map[string]any{"path": "solution.py"}); o.Error != "" {
			t.Fatalf("%s: read_file: %s", taskID, o.Error)
		}
		if o := step(t, env, "write_file", map[string]any{"path": "solution.py", "content": oracle}); o.Error != "" {
			t.Fatalf("%s: write_file: %s", taskID, o.Error)
		}
		o := step(t, env, "run_tests", nil)
		if o.Error != "" || !strings.Contains(o.Output, "graded: "+strconv.Itoa(len(task.Visible))+" of") {
			t.Fatalf("%s: run_tests: %s %s", taskID, o.Error, o.Output)
		}
		final = step(t, env, "submit", map[string]any{"answer": "fixed the planted bug"})
	} else {
		instruction, _ := json.Marshal(task.Instruction)
		o := step(t, env, "run_python", map[string]any{"code": "INSTRUCTION = " + string(instruction) + "\n" + oracle})
		if o.Error != "" || !strings.Contains(o.Output, "[exit code 0]") {
			t.Fatalf("%s: oracle run: %s %s", taskID, o.Error, o.Output)
		}
		out := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(o.Output), "[exit code 0]"))
		lines := strings.Split(out, "\n")
		answer := strings.TrimSpace(lines[len(lines)-1])
		if o := step(t, env, "read_file", map[string]any{"path": task.Files[0].Path}); o.Error != "" {
			t.Fatalf("%s: read_file: %s", taskID, o.Error)
		}
		if o := step(t, env, "check", map[string]any{"answer": answer}); !strings.HasPrefix(o.Output, "check: correct") {
			t.Fatalf("%s: check(%q): %s %s", taskID, answer, o.Output, o.Error)
		}
		final = step(t, env, "submit", map[string]any{"answer": answer})
	}
	if !final.Done || final.Reward != 1 || final.Metadata["correctness"] != 1.0 {
		t.Fatalf("%s: final observation done=%v reward=%v metadata=%v output=%q error=%q",
			taskID, final.Done, final.Reward, final.Metadata, final.Output, final.Error)
	}
}
