package episode

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/workbench/tasks"
)

// probeCheck runs in Python: for each value, the probe's encoder must
// print what json.dumps prints (as a value: json.loads of both equal)
// exactly when json round-trips it to an equal value without NaN or
// infinity, and fail (ValueError) otherwise.
const probeCheck = `import json, sys
VALUES = [None, True, False, 0, -5, 2**100, 1.5, -0.0, 1e300, 1e-300, float("nan"), float("inf"),
    float("-inf"), "", 'a"b\\c', "\x00\x1f\x7f\x80", "é€😀", "\ud800", "\u2028", [], [1, [2, [3]]],
    [1, (2,)], (1, 2), {}, {"a": 1}, {1: "a"}, {"a": [1, {"b": None}]}, {1, 2}, b"x", [float("nan")],
    {"k": float("inf")}, {"": ""}, [True, 1, 1.0], {None: 1}, {"x": (1,)}]
bad = 0
for v in VALUES:
    try:
        want = json.dumps(v, allow_nan=False)
        expect_ok = json.loads(want) == v
    except (TypeError, ValueError):
        expect_ok = False
    try:
        got = _agentpen_json(v)
        got_ok = True
    except ValueError:
        got_ok = False
    if got_ok != expect_ok or (got_ok and (json.loads(got) != json.loads(want) or not got.isascii())):
        bad += 1
        print("MISMATCH", repr(v), got_ok, expect_ok, got if got_ok else "")
print("checked", len(VALUES), "bad", bad)
`

// TestProbeEncoderMatchesJSON: the probe's own encoder accepts and prints
// exactly what json would (see probeCheck).
func TestProbeEncoderMatchesJSON(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("/usr/bin/python3", "-E", "-s", "-c", probeEncoder+probeCheck).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(string(out), "bad 0") {
		t.Fatalf("the probe's encoder differs from json:\n%s", out)
	}
}

var argsLiteralCases = []string{
	`[[1, 2, 3]]`,
	`["a\nb", "é", "\u2028", "\u0000", "tab\there", "quote\"s", "back\\slash", "😀"]`,
	`[{"k": [true, false, null]}, {}]`,
	`[1.5e300, -0, 12345678901234567890, 0.1, 1E+5, -2.5e-7]`,
	`[[], [[]], {"nested": {"deep": [1, {"x": "y"}]}}]`,
}

// TestArgsLiteral: the Python literal of each argument list evaluates
// (with no builtins, as the probe does) to what json.loads gives.
func TestArgsLiteral(t *testing.T) {
	t.Parallel()
	var script strings.Builder
	script.WriteString("import json\nbad = 0\n")
	for _, c := range argsLiteralCases {
		var args []any
		dec := json.NewDecoder(strings.NewReader(c))
		dec.UseNumber()
		if err := dec.Decode(&args); err != nil {
			t.Fatal(err)
		}
		lit, err := argsLiteral(args)
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		js, _ := json.Marshal(c)
		script.WriteString("got = eval(" + strconvQuotePy(lit) + ", {'__builtins__': {}})\n")
		script.WriteString("want = json.loads(" + string(js) + ")\n")
		script.WriteString("if got != want or repr(got) != repr(want):\n    bad += 1\n    print('MISMATCH', repr(got), repr(want))\n")
	}
	script.WriteString("print('bad', bad)\n")
	out, err := exec.Command("/usr/bin/python3", "-E", "-s", "-c", script.String()).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(string(out), "bad 0") {
		t.Fatalf("literals differ from json.loads:\n%s", out)
	}
}

// strconvQuotePy quotes s for Python as a JSON string (valid Python).
func strconvQuotePy(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// FuzzArgsLiteral: any JSON argument list gives a literal without a
// panic, and one without a raw line break (strings are quoted).
func FuzzArgsLiteral(f *testing.F) {
	for _, c := range argsLiteralCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var args []any
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if dec.Decode(&args) != nil {
			return
		}
		lit, err := argsLiteral(args)
		if err != nil {
			return
		}
		if strings.ContainsAny(lit, "\n\r") || !strings.HasPrefix(lit, "[") {
			t.Fatalf("literal %q of %q", lit, data)
		}
	})
}

// TestTestFileAgreesWithProbe: the examples file an agent runs
// (tasks.TestFile) accepts a return value exactly when the grader's probe
// can print it (probeEncoder), so run_tests never says "ok" to a value
// grading then fails (a tuple, a set, a dict with int keys, NaN...).
func TestTestFileAgreesWithProbe(t *testing.T) {
	t.Parallel()
	file := tasks.TestFile("f", []tasks.Case{{Args: []any{1}, Want: 1}})
	start, end := strings.Index(file, "def plain("), strings.Index(file, "def short(")
	if start < 0 || end < start {
		t.Fatalf("the examples file has no plain():\n%s", file)
	}
	script := probeEncoder + file[start:end] + `
VALUES = [None, True, False, 0, -5, 2**100, 1.5, -0.0, 1e300, float("nan"), float("inf"), "", "é",
    [], [1, [2, [3]]], [1, (2,)], (1, 2), {}, {"a": 1}, {1: "a"}, {"a": [1, {"b": None}]}, {1, 2}, b"x",
    [float("nan")], {"k": float("inf")}, {None: 1}, {"x": (1,)}, frozenset(), range(2), 1j]
bad = 0
for v in VALUES:
    try:
        _agentpen_json(v)
        probe_ok = True
    except ValueError:
        probe_ok = False
    if plain(v) != probe_ok:
        bad += 1
        print("MISMATCH", repr(v), plain(v), probe_ok)
print("bad", bad)
`
	out, err := exec.Command("/usr/bin/python3", "-E", "-s", "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(string(out), "bad 0") {
		t.Fatalf("the examples file and the probe disagree:\n%s", out)
	}
}
