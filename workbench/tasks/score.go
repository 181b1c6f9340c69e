package tasks

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
)

// Reasons shown with a submitted answer's result. They are fixed strings so
// callers and tests can compare them.
const (
	ReasonCorrect       = "correct"
	ReasonNotANumber    = "the answer is not a number"
	ReasonWrongNumber   = "the number is not within the tolerance"
	ReasonWrongText     = "the answer does not match"
	ReasonMissing       = "some items are missing"
	ReasonExtra         = "some items are not expected"
	ReasonMissingExtra  = "some items are missing and some are not expected"
	ReasonOrder         = "the items are in the wrong order"
	ReasonWrongItems    = "some items are wrong"
	ReasonExamplesFail  = "not every example passes"
	ReasonHiddenPartial = "some hidden cases fail"
	ReasonNoCases       = "the task has no hidden cases"
	ReasonCodeKind      = "code tasks are graded by running their cases"
)

// ScoreAnswer grades a non-code answer against t's key: a credit in [0, 1]
// and a short reason. A code task gets 0 and ReasonCodeKind; use ScoreCode.
func ScoreAnswer(t *Task, answer string) (float64, string) {
	switch t.Kind {
	case KindNumber:
		return scoreNumber(t.Key, answer)
	case KindText:
		if NormalizeText(answer) == NormalizeText(t.Key.Answer) {
			return 1, ReasonCorrect
		}
		return 0, ReasonWrongText
	case KindSet:
		return scoreSet(t.Key.Items, SplitItems(answer))
	case KindList:
		return scoreList(t.Key.Items, SplitItems(answer))
	}
	return 0, ReasonCodeKind
}

// ScoreCode grades a code task from which visible and hidden cases passed:
// 0 unless every visible case passes, else the fraction of hidden cases that
// pass.
func ScoreCode(visible, hidden []bool) (float64, string) {
	for _, ok := range visible {
		if !ok {
			return 0, ReasonExamplesFail
		}
	}
	if len(hidden) == 0 {
		return 0, ReasonNoCases
	}
	n := 0
	for _, ok := range hidden {
		if ok {
			n++
		}
	}
	if n == len(hidden) {
		return 1, ReasonCorrect
	}
	return round4(float64(n) / float64(len(hidden))), ReasonHiddenPartial
}

func scoreNumber(k Key, answer string) (float64, string) {
	got, ok := ParseNumber(answer)
	if !ok {
		return 0, ReasonNotANumber
	}
	want, ok := ParseNumber(k.Answer)
	if !ok {
		return 0, ReasonWrongNumber
	}
	// A small relative slack absorbs float formatting of exact values.
	if math.Abs(got-want) <= k.Tolerance+1e-9*math.Max(1, math.Abs(want)) {
		return 1, ReasonCorrect
	}
	return 0, ReasonWrongNumber
}

// ParseNumber reads a number an agent might write: surrounding whitespace,
// a currency sign, thousands separators, a trailing percent sign or one unit
// word are ignored ("$1,234.50", "12 %", "42 ms", "-€3"). Hex, NaN and
// infinities are not numbers.
func ParseNumber(s string) (float64, bool) {
	s = strings.TrimSpace(s)
	if f, ok := plainFloat(s); ok {
		return f, true
	}
	if i := strings.LastIndexByte(s, ' '); i > 0 && !strings.ContainsAny(s[i+1:], "0123456789") {
		s = strings.TrimSpace(s[:i])
	}
	s = strings.TrimSpace(strings.TrimSuffix(s, "%"))
	neg := false
	if strings.HasPrefix(s, "-") {
		neg, s = true, s[1:]
	}
	for _, sign := range []string{"$", "€", "£", "¥"} {
		s = strings.TrimPrefix(s, sign)
	}
	if !neg && strings.HasPrefix(s, "-") {
		neg, s = true, s[1:]
	}
	intPart, frac, hasFrac := strings.Cut(s, ".")
	if strings.Contains(intPart, ",") {
		groups := strings.Split(intPart, ",")
		for i, g := range groups {
			if (i == 0 && (len(g) < 1 || len(g) > 3)) || (i > 0 && len(g) != 3) {
				return 0, false
			}
		}
		intPart = strings.Join(groups, "")
	}
	s = intPart
	if hasFrac {
		s += "." + frac
	}
	if s == "" || strings.Trim(s, "0123456789.") != "" {
		return 0, false
	}
	f, ok := plainFloat(s)
	if !ok {
		return 0, false
	}
	if neg {
		f = -f
	}
	return f, true
}

// plainFloat parses decimal notation only (digits, sign, point, exponent).
func plainFloat(s string) (float64, bool) {
	if s == "" || strings.Trim(s, "0123456789.eE+-") != "" {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// NormalizeText folds case, collapses whitespace and strips surrounding
// punctuation and quotes, so "  The Answer. " equals "the answer".
func NormalizeText(s string) string {
	s = strings.Join(strings.Fields(strings.ToLower(s)), " ")
	return strings.TrimFunc(s, func(r rune) bool {
		return unicode.IsPunct(r) && r != '/' && r != '_' && r != '-' && r != '%' && r != '#' || unicode.IsSpace(r)
	})
}

// SplitItems splits a set or list answer on commas, semicolons and newlines
// and normalises each item; empty items are dropped.
func SplitItems(s string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ';' || r == '\n' }) {
		if n := NormalizeText(f); n != "" {
			out = append(out, n)
		}
	}
	return out
}

func scoreSet(want, got []string) (float64, string) {
	wantSet := map[string]bool{}
	for _, w := range want {
		wantSet[NormalizeText(w)] = true
	}
	seen := map[string]bool{}
	hits, extras := 0, 0
	for _, g := range got {
		if seen[g] {
			continue
		}
		seen[g] = true
		if wantSet[g] {
			hits++
		} else {
			extras++
		}
	}
	if len(wantSet) == 0 {
		return 0, ReasonWrongItems
	}
	missing := hits < len(wantSet)
	switch {
	case !missing && extras == 0:
		return 1, ReasonCorrect
	case missing && extras > 0:
		return round4(float64(hits) / float64(len(wantSet)+extras)), ReasonMissingExtra
	case missing:
		return round4(float64(hits) / float64(len(wantSet))), ReasonMissing
	default:
		return round4(float64(hits) / float64(len(wantSet)+extras)), ReasonExtra
	}
}

func scoreList(want, got []string) (float64, string) {
	n := max(len(want), len(got))
	if n == 0 {
		return 0, ReasonWrongItems
	}
	right := 0
	for i := range min(len(want), len(got)) {
		if NormalizeText(want[i]) == got[i] {
			right++
		}
	}
	if right == len(want) && len(got) == len(want) {
		return 1, ReasonCorrect
	}
	credit := round4(float64(right) / float64(n))
	if c, _ := scoreSet(want, got); c == 1 {
		return credit, ReasonOrder
	}
	return credit, ReasonWrongItems
}

func round4(f float64) float64 { return math.Round(f*10000) / 10000 }

// TestFile renders the test_solution.py of a code task: it runs fn on the
// visible cases and prints one line per example. Runnable as a script.
//
// It imports nothing but the solution (json alone cost about 7.5 ms of
// every run_tests here): the cases are a Python literal (PyLiteral), and an
// example passes when the value is a JSON value that JSON gives back
// unchanged (dicts with string keys, lists, strings, numbers but NaN and
// infinities, booleans, None) and equals the expected one, which is
// exactly what the grader's probe accepts: a tuple or a set fails here as
// it fails there.
func TestFile(fn string, cases []Case) string {
	var lit strings.Builder
	for _, c := range cases {
		if c.Args == nil {
			c.Args = []any{}
		}
		l, err := PyLiteral(c)
		if err != nil {
			panic(fmt.Sprintf("tasks: cases of %s are not JSON: %v", fn, err))
		}
		lit.WriteString("    " + l + ",\n")
	}
	return fmt.Sprintf(`"""Examples for solution.%[1]s. Run: python3 test_solution.py"""
from solution import %[1]s

CASES = [
%[2]s]


def plain(value):
    """Whether value is a JSON value that JSON gives back unchanged."""
    if value is None or isinstance(value, (bool, int, str)):
        return True
    if isinstance(value, float):
        return value == value and value not in (float("inf"), float("-inf"))
    if isinstance(value, list):
        return all(plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and plain(v) for k, v in value.items())
    return False


def short(value, limit=200):
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def main():
    failed = 0
    for i, case in enumerate(CASES, 1):
        try:
            got = %[1]s(*case["args"])
            ok = plain(got) and got == case["want"]
        except Exception as exc:  # an example that raises fails
            got, ok = f"raised {type(exc).__name__}: {exc}", False
        if not ok:
            failed += 1
        print(f"example {i}: {'ok' if ok else 'FAIL'}: %[1]s(*{short(case['args'])}) -> {short(got)}, want {short(case['want'])}")
    print(f"{len(CASES) - failed} of {len(CASES)} examples pass")
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
`, fn, lit.String())
}
