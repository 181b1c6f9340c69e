package episode

import (
	"os"
	"testing"
)

func TestSmokeMedian(t *testing.T) {
	requireRoot(t)
	env := newEnv(t, Config{})
	obs := reset(t, env, "software/median")
	t.Logf("reset: %+v", obs)
	o := step(t, env, "read_file", map[string]any{"path": "solution.py"})
	t.Logf("read: %+v", o)
	oracle, _ := os.ReadFile("../../testdata/oracles/software/median.py")
	o = step(t, env, "write_file", map[string]any{"path": "solution.py", "content": string(oracle)})
	t.Logf("write: %+v", o)
	o = step(t, env, "run_tests", nil)
	t.Logf("tests: %+v", o)
	o = step(t, env, "run_python", map[string]any{"code": "import os; print(os.getuid(), os.getcwd())"})
	t.Logf("run: %+v", o)
	o = step(t, env, "run_tests", nil)
	t.Logf("tests2: %+v %v %q", o, env.testedLastChange, env.testedDigest)
	o = step(t, env, "submit", map[string]any{"answer": "fixed"})
	t.Logf("submit: %+v", o)
	if o.Reward != 1 {
		t.Fatalf("reward %v", o.Reward)
	}
}
