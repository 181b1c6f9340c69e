package results

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Stop is why a run's code stopped: the one vocabulary the results file,
// the service's /metrics, its API and the campaign page use (each reads
// its words from here: StopTerms). A run is one program the episode ran
// in its sandbox: the agent's code, its tests, a graded case of its
// answer.
//
// Every stop but two is observed: the sandbox saw the program exit, the
// deadline fire, the output pass the limit, a signal end it, or itself
// fail. Memory and the process count are rlimits that make a call fail
// (ENOMEM, EAGAIN) and send no signal of their own: a run that ended on
// one is named from the evidence it left in its error output, and marked
// Inferred (Term.Inferred, RunStop.Inferred) with that evidence
// (RunStop.Evidence). Code that prints the same words is named the same:
// inferred is never proven.
type Stop uint8

// The stops, in StopTerms' order.
const (
	// StopExited: the program exited by itself (RunStop.Status).
	StopExited Stop = iota
	// StopTimeout: the run's deadline fired; the sandbox ended it.
	StopTimeout
	// StopOutputLimit: it printed past the output limit; the sandbox
	// ended it.
	StopOutputLimit
	// StopSignal: a signal ended the program (RunStop.Signal), and
	// nothing says more.
	StopSignal
	// StopCancelled: the episode ended while it ran.
	StopCancelled
	// StopInternal: the sandbox could not start the run or follow it.
	StopInternal
	// StopMemory (inferred): it failed for want of memory.
	StopMemory
	// StopProcesses (inferred): it failed at the process limit.
	StopProcesses
	numStops
)

// Evidence an inferred stop is named from (RunStop.Evidence): a word of
// this list, never text of the run's.
const (
	// EvidenceMemoryError: its error output holds Python's MemoryError.
	EvidenceMemoryError = "MemoryError"
	// EvidenceENOMEM: its error output holds a call that failed with
	// ENOMEM ("[Errno 12] Cannot allocate memory").
	EvidenceENOMEM = "ENOMEM"
	// EvidenceForkEAGAIN: its error output holds a fork that failed with
	// EAGAIN ("[Errno 11] Resource temporarily unavailable" in a fork).
	EvidenceForkEAGAIN = "fork_EAGAIN"
	// EvidenceThreadRefused: its error output holds a thread the process
	// limit refused ("can't start new thread").
	EvidenceThreadRefused = "thread_refused"
)

// Term is one word of the vocabulary and what it means.
type Term struct {
	// Word is how it is written (in the results file, the API, labels).
	Word string `json:"word"`
	// Inferred marks a stop named from evidence, not observed.
	Inferred bool `json:"inferred,omitempty"`
	// Evidence are the words of evidence an inferred stop is named from.
	Evidence []string `json:"evidence,omitempty"`
	// Means says what it means, for a person.
	Means string `json:"means"`
}

// StopTerms are the stops' words and meanings, by Stop.
var StopTerms = [numStops]Term{
	StopExited:      {Word: "exited", Means: "the program exited by itself, with the status given (0: success)"},
	StopTimeout:     {Word: "timeout", Means: "the run's deadline fired and the sandbox ended it, with every process of it"},
	StopOutputLimit: {Word: "output_limit", Means: "it printed more than the output limit and the sandbox ended it, with every process of it"},
	StopSignal:      {Word: "signal", Means: "a signal ended the program (the signal given), and nothing it left says more"},
	StopCancelled:   {Word: "cancelled", Means: "the episode ended while it ran (its session closed, the server stopped): the sandbox ended it"},
	StopInternal:    {Word: "internal_error", Means: "the sandbox could not start the run or follow it to its end: not the code's doing"},
	StopMemory: {Word: "memory", Inferred: true, Evidence: []string{EvidenceMemoryError, EvidenceENOMEM},
		Means: "inferred: it failed for want of memory (the address-space limit sends no signal; the evidence is in its error output)"},
	StopProcesses: {Word: "processes", Inferred: true, Evidence: []string{EvidenceForkEAGAIN, EvidenceThreadRefused},
		Means: "inferred: it failed at the process limit (a fork or thread refused; the limit sends no signal, the evidence is in its error output)"},
}

// Stops lists every stop's word, in StopTerms' order.
var Stops = func() []string {
	out := make([]string, 0, numStops)
	for _, t := range StopTerms {
		out = append(out, t.Word)
	}
	return out
}()

// String is the stop's word.
func (s Stop) String() string {
	if s >= numStops {
		return fmt.Sprintf("Stop(%d)", uint8(s))
	}
	return StopTerms[s].Word
}

// Inferred reports whether the stop is named from evidence.
func (s Stop) Inferred() bool { return s < numStops && StopTerms[s].Inferred }

// ParseStop reads a stop's word.
func ParseStop(word string) (Stop, error) {
	if i := slices.Index(Stops, word); i >= 0 {
		return Stop(i), nil
	}
	return 0, fmt.Errorf("stop %q: want one of %v", word, Stops)
}

// MarshalText writes the stop's word.
func (s Stop) MarshalText() ([]byte, error) {
	if s >= numStops {
		return nil, fmt.Errorf("stop %d: no such stop", uint8(s))
	}
	return []byte(s.String()), nil
}

// UnmarshalText reads a stop's word.
func (s *Stop) UnmarshalText(b []byte) error {
	v, err := ParseStop(string(b))
	if err == nil {
		*s = v
	}
	return err
}

// RunStop is why one run's code stopped, and what shows it.
type RunStop struct {
	// Reason is why it stopped. Its enum (for the API's document) is
	// Stops; TestStopVocabulary keeps the two alike.
	Reason Stop `json:"reason" enum:"exited,timeout,output_limit,signal,cancelled,internal_error,memory,processes"`
	// Inferred is Stop.Inferred(), written out so a reader needs no
	// table: the stop was named from Evidence, not observed.
	Inferred bool `json:"inferred,omitempty"`
	// Evidence is an inferred stop's evidence (a word of its Term's).
	Evidence string `json:"evidence,omitempty"`
	// Status is the exit status of a program that exited (StopExited, or
	// an inferred stop whose program exited): 0 to 255.
	Status int `json:"status,omitempty"`
	// Signal names the signal that ended the program (StopSignal, or an
	// inferred stop whose program a signal ended): "SIGKILL".
	Signal string `json:"signal,omitempty"`
}

// Check reports the first field of s out of its range.
func (s RunStop) Check() error {
	switch {
	case s.Reason >= numStops:
		return fmt.Errorf("stop %d: want one of %v", uint8(s.Reason), Stops)
	case s.Inferred != s.Reason.Inferred():
		return fmt.Errorf("stop %s: inferred %v, want %v", s.Reason, s.Inferred, s.Reason.Inferred())
	case s.Reason.Inferred() && !slices.Contains(StopTerms[s.Reason].Evidence, s.Evidence):
		return fmt.Errorf("stop %s: evidence %q, want one of %v", s.Reason, s.Evidence, StopTerms[s.Reason].Evidence)
	case !s.Reason.Inferred() && s.Evidence != "":
		return fmt.Errorf("stop %s: evidence %q: only an inferred stop has one", s.Reason, s.Evidence)
	case s.Status < 0 || s.Status > 255:
		return fmt.Errorf("stop %s: status %d, want 0 to 255", s.Reason, s.Status)
	case s.Signal != "" && !knownSignal(s.Signal):
		return fmt.Errorf("stop %s: signal %q is no signal's name", s.Reason, s.Signal)
	case s.Reason == StopSignal && s.Signal == "":
		return fmt.Errorf("stop %s: no signal", s.Reason)
	case s.Signal != "" && s.Status != 0:
		return fmt.Errorf("stop %s: a status and a signal", s.Reason)
	case s.Reason != StopExited && s.Reason != StopSignal && !s.Reason.Inferred() && (s.Status != 0 || s.Signal != ""):
		return fmt.Errorf("stop %s: the sandbox ended it, so it has no status or signal of its own", s.Reason)
	}
	return nil
}

// SignalName names signal n as RunStop.Signal does: "SIGKILL", or
// "SIG<n>" for one without a name (a real-time signal).
func SignalName(n int) string {
	if name := unix.SignalName(syscall.Signal(n)); name != "" {
		return name
	}
	return "SIG" + strconv.Itoa(n)
}

// knownSignal reports whether name is what SignalName gives for a
// signal.
func knownSignal(name string) bool {
	if unix.SignalNum(name) != 0 {
		return true
	}
	n, err := strconv.Atoi(strings.TrimPrefix(name, "SIG"))
	return err == nil && n >= 1 && n <= 64 && SignalName(n) == name
}

// String says it in words: "exited 1", "signal SIGKILL", "memory
// (inferred from MemoryError; exited 1)".
func (s RunStop) String() string {
	how := ""
	switch {
	case s.Signal != "":
		how = "signal " + s.Signal
	case s.Reason == StopExited || s.Reason.Inferred():
		how = fmt.Sprintf("exited %d", s.Status)
	}
	switch {
	case s.Reason.Inferred():
		return fmt.Sprintf("%s (inferred from %s; %s)", s.Reason, s.Evidence, how)
	case s.Reason == StopSignal:
		return how
	case s.Reason == StopExited:
		return how
	}
	return s.Reason.String()
}

// Normal reports whether the run ended as code that worked does: it
// exited 0.
func (s RunStop) Normal() bool { return s.Reason == StopExited && s.Status == 0 }

// MaxRuns bounds each count of RunCounts.
const MaxRuns = 1 << 24

// RunCounts counts an episode's runs by why their code stopped. Its JSON
// is an object of the non-zero counts by stop word.
type RunCounts struct {
	n [numStops]int
}

// Add counts one run that stopped for s.
func (c *RunCounts) Add(s Stop) {
	if s < numStops && c.n[s] < MaxRuns {
		c.n[s]++
	}
}

// Of is how many runs stopped for s.
func (c RunCounts) Of(s Stop) int {
	if s >= numStops {
		return 0
	}
	return c.n[s]
}

// IsZero reports whether no run was counted (omitzero leaves it out).
func (c RunCounts) IsZero() bool { return c.n == [numStops]int{} }

// Each calls fn for every stop counted, in StopTerms' order.
func (c RunCounts) Each(fn func(Stop, int)) {
	for i, n := range c.n {
		if n > 0 {
			fn(Stop(i), n)
		}
	}
}

// MarshalJSON writes the non-zero counts by word, in StopTerms' order.
func (c RunCounts) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	c.Each(func(s Stop, n int) {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:%d", s, n)
	})
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads counts by word, strictly: every word a stop's, each
// count 1 to MaxRuns.
func (c *RunCounts) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	if m == nil {
		return errors.New("runs: want an object")
	}
	var out RunCounts
	for k, v := range m {
		s, err := ParseStop(k)
		if err != nil {
			return fmt.Errorf("runs: %w", err)
		}
		var n int
		if err := json.Unmarshal(v, &n); err != nil || n < 1 || n > MaxRuns {
			return fmt.Errorf("runs: %s %s: want 1 to %d", k, v, MaxRuns)
		}
		out.n[s] = n
	}
	*c = out
	return nil
}
