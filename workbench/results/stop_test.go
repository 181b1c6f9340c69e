package results

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestStopVocabulary: every stop has a word and a meaning; the inferred
// ones, and only they, have evidence; the words are distinct from each
// other and from the ends', so a label or a page can never read one for
// the other.
func TestStopVocabulary(t *testing.T) {
	seen := map[string]bool{}
	for _, term := range append(slices.Clone(StopTerms[:]), EndTerms...) {
		if term.Word == "" || term.Means == "" || seen[term.Word] {
			t.Errorf("term %+v: empty, or its word is taken", term)
		}
		seen[term.Word] = true
		if term.Inferred != (len(term.Evidence) > 0) {
			t.Errorf("term %s: inferred %v with evidence %v", term.Word, term.Inferred, term.Evidence)
		}
	}
	for i, w := range Stops {
		s, err := ParseStop(w)
		if err != nil || s != Stop(i) || s.String() != w {
			t.Errorf("stop %d %q: parsed %v %v", i, w, s, err)
		}
	}
	if f, _ := reflect.TypeFor[RunStop]().FieldByName("Reason"); f.Tag.Get("enum") != strings.Join(Stops, ",") {
		t.Errorf("RunStop.Reason's enum %q, want %q", f.Tag.Get("enum"), strings.Join(Stops, ","))
	}
	if _, err := ParseStop("oom"); err == nil {
		t.Error("a word of no stop parsed")
	}
	if !slices.Equal(Ends, []string{EndSubmitted, EndNoStepsLeft, EndInvalidCalls, EndFinished, EndAbandoned, EndClosed, EndError}) {
		t.Errorf("Ends %v", Ends)
	}
}

// TestRecordStops: a record's runs and stop round-trip through the file's
// line; a record without them writes neither; each lie about a stop is
// refused by the reader, naming the field.
func TestRecordStops(t *testing.T) {
	r := sample()
	r.Runs.Add(StopExited)
	r.Runs.Add(StopExited)
	r.Runs.Add(StopMemory)
	r.Stop = RunStop{Reason: StopMemory, Inferred: true, Evidence: EvidenceMemoryError, Status: 1}
	line, err := r.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(line), `"runs":{"exited":2,"memory":1},"stop":{"reason":"memory","inferred":true,"evidence":"MemoryError","status":1}`) {
		t.Errorf("line %s", line)
	}
	back, err := Parse(line[:len(line)-1])
	if err != nil || back != r {
		t.Fatalf("read back %+v, %v", back, err)
	}
	if b, _ := sample().Marshal(); strings.Contains(string(b), "runs") || strings.Contains(string(b), "stop") {
		t.Errorf("a record without runs: %s", b)
	}
	good := string(line[:len(line)-1])
	for name, c := range map[string]struct{ from, to, says string }{
		"unknown stop":           {`"reason":"memory"`, `"reason":"oom"`, "stop"},
		"not inferred":           {`"inferred":true,`, ``, "inferred"},
		"evidence of another":    {`"evidence":"MemoryError"`, `"evidence":"fork_EAGAIN"`, "evidence"},
		"free text evidence":     {`"evidence":"MemoryError"`, `"evidence":"hidden input [1, 2]"`, "evidence"},
		"observed with evidence": {`"reason":"memory","inferred":true`, `"reason":"exited"`, "evidence"},
		"status out of range":    {`"status":1`, `"status":300`, "status"},
		"a bad signal":           {`"status":1`, `"signal":"SIGNOPE"`, "signal"},
		"uncounted stop":         {`"memory":1`, `"timeout":1`, "runs count none"},
		"unknown run word":       {`"exited":2`, `"oom":2`, "runs"},
		"zero count":             {`"exited":2`, `"exited":0`, "runs"},
		"normal stop":            {`"reason":"memory","inferred":true,"evidence":"MemoryError","status":1`, `"reason":"exited"`, "exited 0"},
		"timeout with status":    {`"reason":"memory","inferred":true,"evidence":"MemoryError","status":1`, `"reason":"timeout","status":9`, "status"},
	} {
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			bad := strings.Replace(good, c.from, c.to, 1)
			if bad == good {
				t.Fatal("the case changes nothing")
			}
			if _, err := Parse([]byte(bad)); err == nil || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("Parse(%s): %v, want an error about %s", bad, err, c.says)
			}
		})
	}
}

// TestSignalNames: a signal is named as the kernel's tables name it, or
// by number when it has no name; nothing else is a signal.
func TestSignalNames(t *testing.T) {
	for n, want := range map[int]string{9: "SIGKILL", 11: "SIGSEGV", 25: "SIGXFSZ", 40: "SIG40"} {
		if got := SignalName(n); got != want || !knownSignal(got) {
			t.Errorf("SignalName(%d) = %q (known %v), want %q", n, got, knownSignal(got), want)
		}
	}
	for _, bad := range []string{"SIG9", "SIG0", "SIG65", "KILL", "SIGKILLX", ""} {
		if knownSignal(bad) {
			t.Errorf("%q taken for a signal", bad)
		}
	}
	var c RunCounts
	if err := json.Unmarshal([]byte(`null`), &c); err == nil {
		t.Error("runs: null accepted")
	}
}
