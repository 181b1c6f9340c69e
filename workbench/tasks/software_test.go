package tasks

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// TestSoftwarePlantedBug runs every software family's shipped solution.py
// (the planted bug) on its cases: at least one visible and one hidden case
// must fail, so the buggy file scores below 1 with the examples reason.
func TestSoftwarePlantedBug(t *testing.T) {
	for _, id := range IDs() {
		if !strings.HasPrefix(id, "software/") {
			continue
		}
		t.Run(strings.TrimPrefix(id, "software/"), func(t *testing.T) {
			t.Parallel()
			for _, v := range []int{0, 3} {
				task, err := Build(id + "@" + strconv.Itoa(v))
				if err != nil {
					t.Fatal(err)
				}
				dir := materialize(t, task)
				res := runCases(t, dir, task.Function, append(append([]Case(nil), task.Visible...), task.Key.Hidden...))
				visible, hidden := res[:len(task.Visible)], res[len(task.Visible):]
				if allTrue(visible) {
					t.Errorf("%s: every visible case passes on the buggy solution.py", task.TaskID)
				}
				if allTrue(hidden) {
					t.Errorf("%s: every hidden case passes on the buggy solution.py", task.TaskID)
				}
				if c, why := ScoreCode(visible, hidden); c >= 1 || why != ReasonExamplesFail {
					t.Errorf("%s: buggy solution scores %v (%q), want < 1 (%q)", task.TaskID, c, why, ReasonExamplesFail)
				}
			}
		})
	}
}

// TestSoftwareSpec checks what every code family promises without running
// Python: a fixed function name, 5 to 10 hidden cases, JSON-able cases that
// survive a round trip unchanged, a test file naming the function, and no
// hidden case in the workspace.
func TestSoftwareSpec(t *testing.T) {
	t.Parallel()
	for _, id := range IDs() {
		if !strings.HasPrefix(id, "software/") {
			continue
		}
		var function string
		for _, v := range []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9} {
			task, err := Build(id + "@" + strconv.Itoa(v))
			if err != nil {
				t.Fatal(err)
			}
			if task.Kind != KindCode {
				t.Fatalf("%s: kind %q, want code", id, task.Kind)
			}
			if function == "" {
				function = task.Function
			}
			if task.Function != function || function == "" {
				t.Errorf("%s: function %q differs from variant 0's %q", task.TaskID, task.Function, function)
			}
			if n := len(task.Key.Hidden); n < 5 || n > 10 {
				t.Errorf("%s: %d hidden cases, want 5..10", task.TaskID, n)
			}
			if len(task.Visible) == 0 {
				t.Errorf("%s: no visible cases", task.TaskID)
			}
			src, ok := task.File("solution.py")
			if !ok || !strings.Contains(src, "def "+task.Function+"(") {
				t.Errorf("%s: solution.py does not define %s", task.TaskID, task.Function)
			}
			if !strings.Contains(task.Instruction, task.Function+"(") {
				t.Errorf("%s: the instruction does not name %s", task.TaskID, task.Function)
			}
			testFile, _ := task.File("test_solution.py")
			for _, c := range append(append([]Case(nil), task.Visible...), task.Key.Hidden...) {
				data, err := json.Marshal(c)
				if err != nil {
					t.Fatalf("%s: case %v is not JSON: %v", task.TaskID, c, err)
				}
				var back Case
				if err := json.Unmarshal(data, &back); err != nil {
					t.Fatal(err)
				}
				again, _ := json.Marshal(back)
				if string(again) != string(data) {
					t.Errorf("%s: case does not survive a JSON round trip: %s -> %s", task.TaskID, data, again)
				}
			}
			for _, h := range task.Key.Hidden {
				args, _ := json.Marshal(h.Args)
				// Short argument lists (like ["45s"]) may well also be an example.
				if len(args) > 24 && strings.Contains(testFile, string(args)) && !visibleHas(task.Visible, h) {
					t.Errorf("%s: hidden case %s appears in test_solution.py", task.TaskID, args)
				}
			}
		}
	}
}

func visibleHas(visible []Case, c Case) bool {
	for _, v := range visible {
		if jsonEqual(v.Args, c.Args) {
			return true
		}
	}
	return false
}
