package tasks

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

// oracleVariants are the variants every family's oracle is run on.
var oracleVariants = []int{0, 1, 7}

// oraclePath is the oracle of a family (see testdata/oracles/README.md).
func oraclePath(t *testing.T, familyID string) string {
	t.Helper()
	return filepath.Join("..", "..", "testdata", "oracles", familyID+".py")
}

// materialize writes a task's files into a fresh directory.
func materialize(t *testing.T, task *Task) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range task.Files {
		p := filepath.Join(dir, f.Path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f.Content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// sandboxPATH is the PATH an episode's Python runs with.
const sandboxPATH = "/usr/local/bin:/usr/bin:/bin"

// python3 is the interpreter an episode would run, looked up in sandboxPATH
// rather than the test process's PATH (exec looks a bare name up in the
// parent's PATH, not in cmd.Env, and a version manager's shim there costs a
// shell and a fifth of a second per run); "python3" when none is there.
var python3 = sync.OnceValue(func() string {
	for _, dir := range filepath.SplitList(sandboxPATH) {
		p := filepath.Join(dir, "python3")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return "python3"
})

func python(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(testenv.Context(t), python3(), append([]string{"-E", "-s", "-B"}, args...)...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + sandboxPATH, "LANG=C.UTF-8", "HOME=" + dir}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String() + errb.String(), err
	}
	return out.String(), nil
}

// OracleScript is what the harness runs for a non-code oracle: the
// instruction as a Python constant, then the oracle.
func oracleScript(instruction, oracle string) string {
	q, _ := json.Marshal(instruction)
	return "INSTRUCTION = " + string(q) + "\n" + oracle
}

// runCases calls fn of solution.py in dir on each case and reports which
// returned the wanted JSON value.
func runCases(t *testing.T, dir, fn string, cases []Case) []bool {
	t.Helper()
	// A case that raises is a failed case (as in the episode's grading),
	// not a failed run.
	probe := "import json, sys\nfrom solution import " + fn + "\nfor a in json.loads(sys.stdin.read()):\n" +
		"    try:\n        print(json.dumps(" + fn + "(*a)))\n    except Exception:\n        print('\"raised\"')\n"
	if err := os.WriteFile(filepath.Join(dir, "probe_cases.py"), []byte(probe), 0o644); err != nil {
		t.Fatal(err)
	}
	var args [][]any
	for _, c := range cases {
		args = append(args, c.Args)
	}
	in, _ := json.Marshal(args)
	cmd := exec.CommandContext(t.Context(), python3(), "-E", "-s", "-B", "probe_cases.py")
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	res := make([]bool, len(cases))
	for i, c := range cases {
		if i >= len(lines) {
			break
		}
		var got, want any
		wantJSON, _ := json.Marshal(c.Want)
		if json.Unmarshal([]byte(lines[i]), &got) != nil || json.Unmarshal(wantJSON, &want) != nil {
			continue
		}
		res[i] = reflect.DeepEqual(got, want)
	}
	return res
}

// TestOracles solves every family, on several variants, from the workspace
// files alone, and checks the key agrees. The episode-level oracle test (in
// package episode) does the same through real tool calls.
func TestOracles(t *testing.T) {
	for _, id := range IDs() {
		t.Run(strings.ReplaceAll(id, "/", "_"), func(t *testing.T) {
			t.Parallel()
			oracle, err := os.ReadFile(oraclePath(t, id))
			if err != nil {
				t.Fatalf("no oracle for %s: %v", id, err)
			}
			for _, v := range oracleVariants {
				task, err := Build(id + "@" + strconv.Itoa(v))
				if err != nil {
					t.Fatal(err)
				}
				dir := materialize(t, task)
				if task.Kind == KindCode {
					if got := runCases(t, dir, task.Function, append(task.Visible, task.Key.Hidden...)); allTrue(got) {
						t.Fatalf("%s: the buggy solution.py already passes every case; the planted bug is not exercised", task.TaskID)
					}
					if err := os.WriteFile(filepath.Join(dir, "solution.py"), oracle, 0o644); err != nil {
						t.Fatal(err)
					}
					if out, err := python(t, dir, "test_solution.py"); err != nil {
						t.Fatalf("%s: test_solution.py fails on the oracle: %v\n%s", task.TaskID, err, out)
					}
					c, why := ScoreCode(runCases(t, dir, task.Function, task.Visible), runCases(t, dir, task.Function, task.Key.Hidden))
					if c != 1 {
						t.Fatalf("%s: oracle scores %v (%s)", task.TaskID, c, why)
					}
					continue
				}
				if err := os.WriteFile(filepath.Join(dir, "oracle_run.py"), []byte(oracleScript(task.Instruction, string(oracle))), 0o644); err != nil {
					t.Fatal(err)
				}
				out, err := python(t, dir, "oracle_run.py")
				if err != nil {
					t.Fatalf("%s: oracle failed: %v\n%s", task.TaskID, err, out)
				}
				lines := strings.Split(strings.TrimSpace(out), "\n")
				answer := lines[len(lines)-1]
				if c, why := ScoreAnswer(task, answer); c != 1 {
					t.Fatalf("%s: oracle answer %q scores %v (%s)", task.TaskID, answer, c, why)
				}
			}
		})
	}
}

func allTrue(bs []bool) bool {
	for _, b := range bs {
		if !b {
			return false
		}
	}
	return len(bs) > 0
}
