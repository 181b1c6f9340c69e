package episode

import (
	"regexp"

	"github.com/agentpen/agentpen/workbench/results"
	"github.com/agentpen/agentpen/workbench/sandbox"
)

// stopOf says why a run's code stopped (results.Stop) from what the
// sandbox observed: its error (internal_error), the episode ending under
// it (cancelled), the deadline (timeout), the output limit
// (output_limit), a signal (signal), or the program's exit (exited). A
// run that did not exit 0 is then named memory or processes when its
// error output holds the evidence those limits leave (they send no
// signal of their own): inferred, with the evidence, and never from a
// run that exited 0 (code that caught its MemoryError and went on).
func stopOf(res sandbox.Result, err error) results.RunStop {
	switch {
	case err != nil:
		return results.RunStop{Reason: results.StopInternal}
	case res.Cancelled:
		return results.RunStop{Reason: results.StopCancelled}
	case res.TimedOut:
		return results.RunStop{Reason: results.StopTimeout}
	case res.OutputLimited:
		return results.RunStop{Reason: results.StopOutputLimit}
	}
	s := results.RunStop{Reason: results.StopExited, Status: res.ExitCode}
	if res.ExitCode < 0 {
		s = results.RunStop{Reason: results.StopSignal, Signal: results.SignalName(-res.ExitCode)}
	}
	if s.Normal() {
		return s
	}
	if reason, ev, ok := evidence(res.Stderr); ok {
		s.Reason, s.Inferred, s.Evidence = reason, true, ev
	}
	return s
}

// evidenceOf are the marks each inferred stop leaves in a Python
// program's error output: the last line of a traceback, or an errno's
// words.
var evidenceOf = []struct {
	stop     results.Stop
	evidence string
	re       *regexp.Regexp
}{
	{results.StopMemory, results.EvidenceMemoryError, regexp.MustCompile(`(?m)^MemoryError\b`)},
	{results.StopMemory, results.EvidenceENOMEM, regexp.MustCompile(`\[Errno 12\] Cannot allocate memory`)},
	// A fork the process limit refused: the traceback's last line, with
	// a fork in the lines of the traceback just before it.
	{results.StopProcesses, results.EvidenceForkEAGAIN, regexp.MustCompile(`(?m)fork[^\n]*\n(?:[^\n]*\n){0,6}?[A-Za-z]*Error: \[Errno 11\] Resource temporarily unavailable`)},
	{results.StopProcesses, results.EvidenceThreadRefused, regexp.MustCompile(`(?m)^RuntimeError: can't start new thread`)},
}

// evidence finds in stderr the mark of an inferred stop; when several
// are there, the last one printed (the program's own end comes after
// what its children printed before).
func evidence(stderr []byte) (results.Stop, string, bool) {
	at, found := -1, -1
	for i, e := range evidenceOf {
		locs := e.re.FindAllIndex(stderr, -1)
		if len(locs) == 0 {
			continue
		}
		if end := locs[len(locs)-1][1]; end > at {
			at, found = end, i
		}
	}
	if found < 0 {
		return 0, "", false
	}
	return evidenceOf[found].stop, evidenceOf[found].evidence, true
}

// stopLog is the running episode's runs by why each stopped, and the
// last that did not exit 0: what its result records.
type stopLog struct {
	runs results.RunCounts
	last results.RunStop
}

// add counts one run.
func (l *stopLog) add(s results.RunStop) {
	l.runs.Add(s.Reason)
	if !s.Normal() {
		l.last = s
	}
}
