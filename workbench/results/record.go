package results

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// How an episode ended (Record.End).
const (
	// EndSubmitted: the agent submitted an answer, which was graded.
	EndSubmitted = "submitted"
	// EndNoStepsLeft: the episode ran out of tool calls.
	EndNoStepsLeft = "no_steps_left"
	// EndInvalidCalls: too many invalid calls in a row ended it.
	EndInvalidCalls = "invalid_calls"
	// EndFinished: the trainer closed it with the finish tool.
	EndFinished = "finished"
	// EndAbandoned: a reset replaced it before it ended.
	EndAbandoned = "abandoned"
	// EndClosed: its environment was closed before it ended (the session
	// went away, the server stopped).
	EndClosed = "closed"
	// EndError: grading its submitted answer failed, and the episode was
	// void: it earned nothing, and what grading left went with it.
	// Record.Reason says which part failed.
	EndError = "error"
)

// EndTerms are the ends' words and meanings: with StopTerms, the one
// vocabulary of how episodes ended and why their code stopped.
var EndTerms = []Term{
	{Word: EndSubmitted, Means: "the agent submitted an answer, which was graded (reward: its grade and parts)"},
	{Word: EndNoStepsLeft, Means: "the episode ran out of tool calls without a submitted answer"},
	{Word: EndInvalidCalls, Means: "too many invalid calls in a row ended it"},
	{Word: EndFinished, Means: "the trainer closed it with the finish tool"},
	{Word: EndAbandoned, Means: "a reset replaced it before it ended"},
	{Word: EndClosed, Means: "its environment was closed before it ended (the session went away, the server stopped)"},
	{Word: EndError, Means: "grading its submitted answer failed: the episode is void, reward 0, and reason says which part failed"},
}

// Ends lists every End value, in EndTerms' order.
var Ends = func() []string {
	out := make([]string, len(EndTerms))
	for i, t := range EndTerms {
		out[i] = t.Word
	}
	return out
}()

// Why grading failed (Record.Reason of an EndError record): a word from
// this list, never text from the grader, the task or the agent's code.
const (
	// ReasonGrader: the grader could not be asked, or did not answer
	// (no reply, a timeout, an error status), or answered something that
	// is not an answer (a reply that is no verdict, inputs that are not
	// argument lists).
	ReasonGrader = "grader_failed"
	// ReasonCasePrepare: a graded case could not be prepared (what the
	// case before it left could not be cleared, its script not written).
	ReasonCasePrepare = "case_prepare_failed"
	// ReasonCaseRun: a graded case could not be run to its end (its fork
	// server died during it, it could not be launched).
	ReasonCaseRun = "case_run_failed"
	// ReasonGrading: any other failure inside grading.
	ReasonGrading = "grading_failed"
)

// Reasons lists every Reason value.
var Reasons = []string{ReasonGrader, ReasonCasePrepare, ReasonCaseRun, ReasonGrading}

// Version is the Record format this package writes and reads.
const Version = 1

// Record is what one episode left: its identity, its reward and the
// reward's parts, how many tool calls it made, how it ended and when.
type Record struct {
	// V is the format's version (Version).
	V int `json:"v"`
	// EpisodeID is the episode's id (a reset's episode_id, or a uuid).
	EpisodeID string `json:"episode_id"`
	// TaskID is the task played, variant included (family@variant).
	TaskID string `json:"task_id"`
	// Domain is the task's domain.
	Domain string `json:"domain"`
	// Reward is the episode's reward in [0, 1]; 0 when it ended without
	// an answer.
	Reward float64 `json:"reward"`
	// Parts are the reward's terms.
	Parts Parts `json:"parts"`
	// Steps is how many tool calls the episode made.
	Steps int `json:"steps"`
	// End is how it ended: one of Ends.
	End string `json:"end"`
	// StartedAt is when its reset was served.
	StartedAt time.Time `json:"started_at"`
	// EndedAt is when it ended.
	EndedAt time.Time `json:"ended_at"`
	// Reason is why grading failed, on an EndError record only (one of
	// Reasons); absent on every other.
	Reason string `json:"reason,omitempty"`
	// Runs counts the runs of its code (the agent's, its tests', the
	// graded cases of its answer) by why each stopped; absent when it ran
	// none (or an older workbench wrote the record).
	Runs RunCounts `json:"runs,omitzero"`
	// Stop is why the code of its last run that did not exit 0 stopped,
	// and what shows it; absent when every run exited 0 (or none ran).
	Stop RunStop `json:"stop,omitzero"`
}

// Parts are a reward's terms: 0.7 of the graded correctness and 0.1 for
// each of inspecting the files, verifying the answer (checking it, or
// passing the tests on the files submitted) and making no invalid call,
// the last three earned only with a submitted answer.
type Parts struct {
	// Correctness is the graded correctness in [0, 1].
	Correctness float64 `json:"correctness"`
	// Inspected is true when the agent read a file or ran code first.
	Inspected bool `json:"inspected"`
	// Verified is true when the answer was checked or the submitted
	// files passed the tests.
	Verified bool `json:"verified"`
	// NoInvalid is true when the episode made no invalid call.
	NoInvalid bool `json:"no_invalid"`
}

// Bounds of a record.
const (
	// MaxLine is the longest line a reader accepts, newline included.
	MaxLine = 2048
	// MaxSteps bounds Record.Steps.
	MaxSteps = 1 << 20
	maxID    = 128
)

// Marshal returns r as one line of the file, newline included.
func (r Record) Marshal() ([]byte, error) {
	r.V = Version
	if err := r.Check(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Parse reads one line (without its newline) strictly: every field
// present, no other, each in its range (Check).
func Parse(line []byte) (Record, error) {
	if len(line) >= MaxLine {
		return Record{}, fmt.Errorf("a line of %d bytes: at most %d", len(line), MaxLine-1)
	}
	var present map[string]json.RawMessage
	if err := json.Unmarshal(line, &present); err != nil {
		return Record{}, fmt.Errorf("not a JSON object: %w", err)
	}
	for _, k := range []string{"v", "episode_id", "task_id", "domain", "reward", "parts", "steps", "end", "started_at", "ended_at"} {
		if _, ok := present[k]; !ok {
			return Record{}, fmt.Errorf("no %s", k)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	var r Record
	if err := dec.Decode(&r); err != nil {
		return Record{}, err
	}
	if dec.More() {
		return Record{}, errors.New("more than one JSON value")
	}
	// Written only when they say something: present, they must.
	if _, ok := present["stop"]; ok && r.Stop == (RunStop{}) {
		return Record{}, errors.New("stop: a run that exited 0 is no stop to tell")
	}
	if _, ok := present["runs"]; ok && r.Runs.IsZero() {
		return Record{}, errors.New("runs: none counted")
	}
	return r, r.Check()
}

// Check reports the first field of r out of its range.
func (r Record) Check() error {
	switch {
	case r.V != Version:
		return fmt.Errorf("v %d: this reader knows %d", r.V, Version)
	case !token(r.EpisodeID):
		return fmt.Errorf("episode_id %q: want 1 to %d printable ASCII bytes without spaces", r.EpisodeID, maxID)
	case !token(r.TaskID):
		return fmt.Errorf("task_id %q: want 1 to %d printable ASCII bytes without spaces", r.TaskID, maxID)
	case !token(r.Domain):
		return fmt.Errorf("domain %q: want 1 to %d printable ASCII bytes without spaces", r.Domain, maxID)
	case !unit(r.Reward):
		return fmt.Errorf("reward %v: want 0 to 1", r.Reward)
	case !unit(r.Parts.Correctness):
		return fmt.Errorf("parts.correctness %v: want 0 to 1", r.Parts.Correctness)
	case r.Steps < 0 || r.Steps > MaxSteps:
		return fmt.Errorf("steps %d: want 0 to %d", r.Steps, MaxSteps)
	case !known(r.End):
		return fmt.Errorf("end %q: want one of %v", r.End, Ends)
	case r.End == EndError && !slices.Contains(Reasons, r.Reason):
		return fmt.Errorf("reason %q: an end %q wants one of %v", r.Reason, EndError, Reasons)
	case r.End != EndError && r.Reason != "":
		return fmt.Errorf("reason %q: only an end %q has one", r.Reason, EndError)
	case r.StartedAt.IsZero() || r.EndedAt.Before(r.StartedAt):
		return fmt.Errorf("started_at %s, ended_at %s: want a start, and an end not before it", r.StartedAt, r.EndedAt)
	}
	if r.Stop == (RunStop{}) {
		return nil
	}
	if err := r.Stop.Check(); err != nil {
		return err
	}
	switch {
	case r.Stop.Normal():
		return errors.New("stop: a run that exited 0 is no stop to tell")
	case r.Runs.Of(r.Stop.Reason) == 0:
		return fmt.Errorf("stop %s: runs count none that stopped so", r.Stop.Reason)
	}
	return nil
}

func unit(f float64) bool { return !math.IsNaN(f) && f >= 0 && f <= 1 }

func known(end string) bool { return slices.Contains(Ends, end) }

// token reports whether s is 1 to maxID bytes of printable ASCII
// without spaces.
func token(s string) bool {
	if s == "" || len(s) > maxID {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}
