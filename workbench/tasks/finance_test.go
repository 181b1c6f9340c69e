package tasks

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// trapVariants are the variants the trap tests build.
var trapVariants = []int{0, 1, 2, 7, 42}

// trapCase is a family and the reason its planted mistake must score.
type trapCase struct {
	family string
	reason string
}

// checkTraps proves, for every family of a domain and several variants, that
// the catalogue builds what the family's generator builds, that the answer a
// classic mistake gives scores below 1 with the expected reason, that a set
// answer missing one item earns partial credit, and that variants differ.
func checkTraps(t *testing.T, domain string, traps []trapFamily, table []trapCase) {
	t.Helper()
	byName := map[string]trapFamily{}
	for _, tf := range traps {
		byName[tf.name] = tf
	}
	if len(table) != len(traps) {
		t.Fatalf("%s: the table has %d families, the domain %d", domain, len(table), len(traps))
	}
	if len(traps) < 6 {
		t.Fatalf("%s: %d families, want at least 6", domain, len(traps))
	}
	for _, tc := range table {
		t.Run(tc.family, func(t *testing.T) {
			t.Parallel()
			tf, ok := byName[tc.family]
			if !ok {
				t.Fatalf("no family %q in %s", tc.family, domain)
			}
			id := domain + "/" + tf.name
			keys := map[string]bool{}
			for _, v := range trapVariants {
				task, err := Build(fmt.Sprintf("%s@%d", id, v))
				if err != nil {
					t.Fatal(err)
				}
				b, mistake := tf.gen(newRand(id, v), v)
				if fmt.Sprint(b.Key) != fmt.Sprint(task.Key) {
					t.Fatalf("@%d: the generator and Build disagree on the key", v)
				}
				keys[fmt.Sprint(task.Key)] = true
				checkNoAnswerInFiles(t, task)
				if task.Kind == KindCode {
					if v <= 1 { // python runs are slow; two variants prove the point
						checkCodeTrap(t, task, mistake, tc.reason)
					}
					continue
				}
				if c, why := ScoreAnswer(task, mistake); c >= 1 || why != tc.reason {
					t.Errorf("@%d: mistake %q scores %v (%s), want < 1 (%s)", v, mistake, c, why, tc.reason)
				}
				checkPartial(t, task, v)
			}
			if len(keys) < len(trapVariants)-1 {
				t.Errorf("only %d distinct answers over %d variants", len(keys), len(trapVariants))
			}
		})
	}
}

// checkCodeTrap runs a plausible but incomplete fix of a code task on its
// visible and hidden cases and checks it scores below 1 with reason (that
// the shipped solution.py fails is TestOracles' check).
func checkCodeTrap(t *testing.T, task *Task, mistake, reason string) {
	t.Helper()
	dir := materialize(t, task)
	if err := os.WriteFile(filepath.Join(dir, "solution.py"), []byte(mistake), 0o644); err != nil {
		t.Fatal(err)
	}
	c, why := ScoreCode(runCases(t, dir, task.Function, task.Visible), runCases(t, dir, task.Function, task.Key.Hidden))
	if c >= 1 || why != reason {
		t.Errorf("%s: the incomplete fix scores %v (%s), want < 1 (%s)", task.TaskID, c, why, reason)
	}
}

// checkPartial checks the credit of answers near a set or list key.
func checkPartial(t *testing.T, task *Task, v int) {
	t.Helper()
	items := task.Key.Items
	switch task.Kind {
	case KindSet:
		if len(items) < 2 {
			t.Fatalf("@%d: a set of %d items cannot show partial credit", v, len(items))
		}
		full := strings.Join(items, ", ")
		if c, why := ScoreAnswer(task, full); c != 1 {
			t.Errorf("@%d: the key itself scores %v (%s)", v, c, why)
		}
		shuffled := slices.Clone(items)
		slices.Reverse(shuffled)
		if c, _ := ScoreAnswer(task, strings.ToUpper(strings.Join(shuffled, "\n"))); c != 1 {
			t.Errorf("@%d: the key reversed and upper-cased scores %v, want 1", v, c)
		}
		want := round4(float64(len(items)-1) / float64(len(items)))
		if c, why := ScoreAnswer(task, strings.Join(items[1:], ", ")); c != want || why != ReasonMissing {
			t.Errorf("@%d: one item missing scores %v (%s), want %v (%s)", v, c, why, want, ReasonMissing)
		}
		want = round4(float64(len(items)) / float64(len(items)+1))
		if c, why := ScoreAnswer(task, full+", not-an-item-0"); c != want || why != ReasonExtra {
			t.Errorf("@%d: one extra item scores %v (%s), want %v (%s)", v, c, why, want, ReasonExtra)
		}
	case KindList:
		if len(items) < 2 {
			t.Fatalf("@%d: a list of %d items cannot be out of order", v, len(items))
		}
		if c, why := ScoreAnswer(task, strings.Join(items, ", ")); c != 1 {
			t.Errorf("@%d: the key itself scores %v (%s)", v, c, why)
		}
		swapped := slices.Clone(items)
		swapped[0], swapped[1] = swapped[1], swapped[0]
		if c, why := ScoreAnswer(task, strings.Join(swapped, ", ")); c >= 1 || why != ReasonOrder {
			t.Errorf("@%d: first two swapped scores %v (%s), want < 1 (%s)", v, c, why, ReasonOrder)
		}
	case KindNumber, KindText:
		if c, why := ScoreAnswer(task, task.Key.Answer); c != 1 {
			t.Errorf("@%d: the key itself scores %v (%s)", v, c, why)
		}
	}
}

// checkNoAnswerInFiles fails when a text key appears verbatim in a file whose
// content could only hold it as a leak. Text keys are names that the files
// must contain (the agent finds them there), so only numbers are checked.
func checkNoAnswerInFiles(t *testing.T, task *Task) {
	t.Helper()
	if task.Kind != KindNumber {
		return
	}
	for _, f := range task.Files {
		for _, line := range strings.Split(f.Content, "\n") {
			for _, field := range strings.FieldsFunc(line, func(r rune) bool { return r == ',' || r == ' ' || r == '|' }) {
				if field == task.Key.Answer && len(field) > 4 {
					t.Errorf("%s: the answer %s appears in %s: %q", task.TaskID, field, f.Path, line)
				}
			}
		}
	}
}

func TestFinanceTraps(t *testing.T) {
	checkTraps(t, "finance", financeTraps, []trapCase{
		{family: "bank_reconcile", reason: ReasonMissing},      // amount mismatches overlooked
		{family: "invoice_tax", reason: ReasonWrongNumber},     // discounts ignored
		{family: "budget_variance", reason: ReasonOrder},       // sorted smallest overspend first
		{family: "fx_conversion", reason: ReasonWrongNumber},   // first month's rate for everything
		{family: "duplicate_payments", reason: ReasonExtra},    // vendor ignored: decoy flagged
		{family: "journal_imbalance", reason: ReasonWrongText}, // unsorted groupby flags the split entry
		{family: "ar_aging", reason: ReasonWrongNumber},        // boundary day counted
	})
}

func TestTransposeDigits(t *testing.T) {
	r := newRand("test/transpose", 0)
	for _, c := range []int64{12, 100, 1234567, -45120, 7, 11, 1000} {
		got := transposeDigits(r, c)
		if got == c || (got < 0) != (c < 0) {
			t.Errorf("transposeDigits(%d) = %d, want a different amount of the same sign", c, got)
		}
	}
}
