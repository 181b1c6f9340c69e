package episode

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentpen/agentpen/workbench/results"
	"github.com/agentpen/agentpen/workbench/sandbox"
	"github.com/agentpen/agentpen/workbench/tasks"
)

// Environment is one episode at a time of the workbench: a task, a private
// workspace, and the tool calls of an agent. Its methods are safe for
// concurrent use; calls are served one at a time.
type Environment struct {
	cfg Config

	mu     sync.Mutex
	closed bool
	state  State
	task   *tasks.Task
	ws     *workspace // nil once cleaned up
	done   bool
	reward float64
	// started is when the running episode was reset; recorded is set
	// once its result went to Config.OnEnd; unrecorded keeps it from
	// there unless it ends on its own (Unrecorded).
	started              time.Time
	recorded, unrecorded bool
	// stops are the running episode's runs by why each stopped.
	stops stopLog
	// void is why grading the running episode's answer failed (one of
	// results.Reasons; "" while it did not): it ended, EndError, and
	// every later step is refused.
	void string

	invalidTotal, invalidRun int
	inspected                bool
	checked                  map[string]bool
	checks                   int
	testedLastChange         bool
	testedDigest             string // "" when the tests did not pass on a readable workspace

	// next is the next episode's workspace, made ahead once an episode
	// ended (retire), or being made; nil when none is. oneEpisode: none
	// is ever made ahead (OneEpisode).
	next       *preparation
	oneEpisode bool
	// oneCall: it answers one call (OneCall).
	oneCall bool
	// bg is the background work: episodes torn down after the answer that
	// ended them, and the next one's workspace made (retire); Close waits
	// for it. stopping tells it that Close has begun; bgErrs are the
	// teardowns' errors, which Close returns.
	bg       sync.WaitGroup
	stopping atomic.Bool
	bgMu     sync.Mutex
	bgErrs   []error

	// testHookBeforeRelease, when set (tests), runs after the episode's
	// processes and files are gone, just before its uid is released.
	testHookBeforeRelease func(uid int)
}

// preparation is a workspace made in the background (prepareWorkspace):
// ws or err are set once done is closed.
type preparation struct {
	done chan struct{}
	ws   *workspace
	err  error
}

// ErrClosed is returned (wrapped) by Reset and Step after Close.
var ErrClosed = errors.New("environment closed")

// New returns an environment with cfg (zero fields take their defaults).
// It holds nothing until the first Reset.
func New(cfg Config) (*Environment, error) {
	r := cfg.resolved()
	if len(r.Catalogue.IDs()) == 0 {
		return nil, errors.New("episode: config.Catalogue: has no tasks")
	}
	if !strings.HasPrefix(r.Python, "/") {
		return nil, fmt.Errorf("episode: config.Python %q: must be an absolute path", r.Python)
	}
	if r.Sandbox == nil {
		return nil, errors.New("episode: config.Sandbox is required (sandbox.New)")
	}
	return &Environment{cfg: r}, nil
}

// Reset ends the running episode, if any, and starts one on opts.TaskID
// (default: ids[seed % len(ids)] of the sorted catalogue), or on the task
// of Config.Binding. An unknown task id, and a reset the binding refuses,
// are refused with an error wrapping tasks.ErrUnknownTask or the
// binding's error before anything of the running episode is touched.
func (e *Environment) Reset(ctx context.Context, opts ResetOptions) (Observation, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return Observation{}, fmt.Errorf("reset: %w", ErrClosed)
	}
	return e.reset(ctx, opts)
}

func (e *Environment) reset(ctx context.Context, opts ResetOptions) (Observation, error) {
	taskID := opts.TaskID
	if e.cfg.Binding != nil {
		// Refused before anything is torn down, as an unknown task is.
		bound, err := e.cfg.Binding.Resolve(taskID)
		if err != nil {
			return Observation{}, fmt.Errorf("reset: %w", err)
		}
		taskID = bound
	}
	if taskID == "" {
		ids := append([]string(nil), e.cfg.Catalogue.IDs()...)
		sort.Strings(ids)
		var seed int64
		if opts.Seed != nil {
			seed = *opts.Seed
		}
		// Python's % is never negative for a positive divisor.
		i := seed % int64(len(ids))
		if i < 0 {
			i += int64(len(ids))
		}
		taskID = ids[i]
	}
	task, err := e.cfg.Catalogue.Build(taskID)
	if err != nil {
		// Refused before anything is torn down.
		// The catalogue's error names the id.
		return Observation{}, fmt.Errorf("reset: %w", err)
	}
	if _, local := e.cfg.Grader.(localGrader); !local {
		// Another process grades: the key is dropped here, on a copy (the
		// catalogue may share its tasks), and nothing of this environment
		// ever reads it.
		keyless := *task
		keyless.Key = tasks.Key{}
		task = &keyless
	}
	if !e.done {
		e.record(results.EndAbandoned, results.Parts{})
	}
	// The running episode, if any, is torn down after this answer; the
	// new one's workspace is the one made ahead when there is one.
	old := e.ws
	e.ws = nil
	e.task = task
	episodeID := opts.EpisodeID
	if episodeID == "" {
		episodeID = newUUID()
	}
	e.state = State{EpisodeID: episodeID}
	e.done, e.reward, e.void = false, 0, ""
	e.started, e.recorded, e.unrecorded = e.cfg.now(), false, false
	e.stops = stopLog{}
	e.invalidTotal, e.invalidRun = 0, 0
	e.inspected = false
	e.checked = map[string]bool{}
	e.checks = 0
	e.testedLastChange, e.testedDigest = false, ""
	ws, err := e.nextWorkspace()
	if errors.Is(err, sandbox.ErrNoFreeUID) && old != nil {
		// Every uid is held: the running episode goes first, as it did
		// before anything was made ahead.
		e.keepErr(old.destroy(e.testHookBeforeRelease))
		old = nil
		ws, err = prepareWorkspace(e.cfg, e.oneCall)
	}
	if old != nil {
		e.background(old, nil)
	}
	if err == nil {
		err = ws.fill(task.Files, task.Kind == tasks.KindCode)
	}
	if err != nil {
		e.task = nil
		return Observation{}, fmt.Errorf("reset %s: %w", taskID, err)
	}
	e.ws = ws
	listing, err := e.listing()
	if err != nil {
		listing = "(empty)"
	}
	return Observation{
		Task:      task.Instruction,
		Tools:     toolsText(e.cfg.Limits),
		Output:    sendable("Workspace files:\n" + listing),
		StepsLeft: e.cfg.Limits.MaxSteps,
		Metadata:  map[string]any{"task_id": task.TaskID, "domain": task.Domain},
	}, nil
}

// Step runs one tool call. Before any Reset it resets to the default task
// (the bound one, with Config.Binding) first (a stateless HTTP /step). After the episode ended it returns the
// final state again. Refusals are observations with Error set, not errors;
// an error means the environment itself failed.
func (e *Environment) Step(ctx context.Context, a Action) (Observation, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return Observation{}, fmt.Errorf("step: %w", ErrClosed)
	}
	if e.task == nil {
		if _, err := e.reset(ctx, ResetOptions{}); err != nil {
			return Observation{}, fmt.Errorf("step: %w", err)
		}
	}
	if e.done && e.void != "" {
		obs := e.obs("", true, nil)
		obs.Error = fmt.Sprintf("refused: the episode ended when grading failed (%s); reset to start another", e.void)
		return obs, nil
	}
	if e.done {
		return e.obs("The episode has ended.", true, nil), nil
	}
	e.state.StepCount++
	handler, ok := e.tools()[a.Tool]
	if !ok {
		return e.refuse(fmt.Sprintf("unknown tool %s; use one of the tools listed at reset", pyRepr(a.Tool))), nil
	}
	obs, err := handler(ctx, a.Args)
	var r *refusal
	if errors.As(err, &r) {
		return e.refuse(r.reason), nil
	}
	if err != nil {
		return Observation{}, fmt.Errorf("step %s: %w", a.Tool, err)
	}
	e.invalidRun = 0
	if e.done {
		return obs, nil
	}
	if e.state.StepCount >= e.cfg.Limits.MaxSteps {
		return e.finish(ctx, nil, results.EndNoStepsLeft, "No tool calls left; the episode ends without a submitted answer.")
	}
	return obs, nil
}

// State returns the episode id and how many tool calls it has made.
func (e *Environment) State() State {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.state
}

// Close ends the running episode and the one made ahead: their
// processes, files and uids are freed, and so are those of every episode
// still being torn down; it returns once they are, with any error of
// theirs. It is idempotent; Reset and Step fail after it.
func (e *Environment) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	e.stopping.Store(true)
	if !e.done {
		e.record(results.EndClosed, results.Parts{})
	}
	// Episodes in the order they ended: those being torn down first.
	e.bg.Wait()
	errs := []error{e.cleanup()}
	if p := e.next; p != nil {
		e.next = nil
		if p.ws != nil {
			errs = append(errs, p.ws.destroy(e.testHookBeforeRelease))
		}
	}
	e.bgMu.Lock()
	errs = append(errs, e.bgErrs...)
	e.bgErrs = nil
	e.bgMu.Unlock()
	return errors.Join(errs...)
}

// OneEpisode says the environment plays one episode at most (a stateless
// HTTP call's, a standard MCP session's), so none is made ahead when it
// ends.
func (e *Environment) OneEpisode() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.oneEpisode = true
}

// OneCall says the environment answers one call at most (a stateless
// HTTP call's: one step, or one reset): OneEpisode, and its workspace
// starts a fork server only for a graded sequence's cases, never for the
// one run of the agent's code it may make.
func (e *Environment) OneCall() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.oneEpisode, e.oneCall = true, true
}

// refusal is a tool call refused with a reason shown to the agent.
type refusal struct{ reason string }

func (r *refusal) Error() string { return r.reason }

func refusef(format string, args ...any) error {
	return &refusal{fmt.Sprintf(format, args...)}
}

func (e *Environment) refuse(reason string) Observation {
	e.invalidTotal++
	e.invalidRun++
	if e.invalidRun >= e.cfg.Limits.MaxInvalidInARow {
		obs, _ := e.finish(context.Background(), nil, results.EndInvalidCalls, fmt.Sprintf("Refused: %s. %s invalid calls in a row end the episode.",
			reason, countWord(e.cfg.Limits.MaxInvalidInARow)))
		return obs
	}
	if e.state.StepCount >= e.cfg.Limits.MaxSteps {
		obs, _ := e.finish(context.Background(), nil, results.EndNoStepsLeft, fmt.Sprintf("Refused: %s. No tool calls left.", reason))
		return obs
	}
	obs := e.obs("", false, nil)
	obs.Error = sendable(reason)
	return obs
}

func (e *Environment) obs(output string, done bool, correctness *float64) Observation {
	meta := map[string]any{"task_id": e.task.TaskID, "domain": e.task.Domain}
	if correctness != nil {
		meta["correctness"] = *correctness
	}
	o := Observation{
		Output:    sendable(output),
		StepsLeft: max(0, e.cfg.Limits.MaxSteps-e.state.StepCount),
		Done:      done,
		Metadata:  meta,
	}
	if done {
		o.Reward = e.reward
	}
	return o
}

// finish grades answer (nil: none was submitted), sets the reward, ends
// the episode (how: end, one of the End constants; results.EndSubmitted with an
// answer), records its Result and frees its workspace. A grading failure
// voids the episode (void).
func (e *Environment) finish(ctx context.Context, answer *string, end, note string) (Observation, error) {
	correctness, why := 0.0, "no answer was submitted"
	if answer != nil {
		var err error
		correctness, why, err = e.score(ctx, *answer)
		if err != nil {
			return e.voidEpisode(err)
		}
	}
	var verified bool
	if e.task.Kind == tasks.KindCode {
		// The files the tests passed on are still the files being graded.
		verified = e.testedLastChange && e.testedDigest != "" && e.digest() == e.testedDigest
	} else {
		verified = answer != nil && e.checked[strings.TrimSpace(*answer)]
	}
	submitted := answer != nil
	reward := 0.7 * correctness
	reward += 0.1 * b2f(e.inspected && submitted)
	reward += 0.1 * b2f(verified && submitted)
	reward += 0.1 * b2f(e.invalidTotal == 0 && submitted)
	e.reward = math.Round(math.Min(1, math.Max(0, reward))*10000) / 10000
	e.done = true
	if submitted {
		end = results.EndSubmitted
	}
	e.record(end, results.Parts{Correctness: correctness, Inspected: e.inspected && submitted,
		Verified: verified && submitted, NoInvalid: e.invalidTotal == 0 && submitted})
	// Nothing of a finished episode is needed again: it is torn down after
	// this answer, and the next one's workspace made ahead.
	e.retire()
	if note == "" {
		note = fmt.Sprintf("Submitted. Result: %s.", why)
	}
	return e.obs(note, true, &correctness), nil
}

// score grades answer; any error is a *gradingError.
func (e *Environment) score(ctx context.Context, answer string) (float64, string, error) {
	if e.task.Kind != tasks.KindCode {
		credit, why, err := e.cfg.Grader.ScoreAnswer(ctx, e.task.TaskID, answer)
		if err != nil {
			return 0, "", graderFailed(err)
		}
		return credit, why, nil
	}
	return e.gradeCode(ctx)
}

// voidEpisode ends the running episode because grading its answer failed
// (err, a *gradingError; another error is results.ReasonGrading): it
// earns nothing, its result says EndError with the reason (a word, never
// err's text), its workspace goes at once with everything a graded case
// left in it (files, /tmp, processes), and every later step is refused
// until a reset. The agent is told the reason alone; the cause goes to
// Config.Logger.
func (e *Environment) voidEpisode(err error) (Observation, error) {
	reason := results.ReasonGrading
	if ge := (*gradingError)(nil); errors.As(err, &ge) {
		reason = ge.reason
	}
	e.cfg.log().Warn("grading failed: the episode is void", "episode_id", e.state.EpisodeID, "reason", reason, "err", err)
	e.reward, e.done, e.void = 0, true, reason
	e.record(results.EndError, results.Parts{})
	if err := e.cleanup(); err != nil {
		return Observation{}, fmt.Errorf("void the episode: %w", err)
	}
	obs := e.obs("", true, nil)
	obs.Error = fmt.Sprintf("grading failed (%s): the episode ended without a reward; reset to start another", reason)
	return obs, nil
}

// retire hands the running episode's workspace, which ended, to the
// background (see background), and with it the making of the next
// episode's, unless the environment plays one episode only or is
// closed. So the answer that ended the episode does not wait for its
// teardown, nor the next reset for the set-up of the next: at most one
// episode is made ahead, and only once its uid is not needed by the one
// that ended (it is released first).
func (e *Environment) retire() {
	var p *preparation
	if !e.oneEpisode && !e.closed && e.next == nil {
		p = &preparation{done: make(chan struct{})}
		e.next = p
	}
	ws := e.ws
	e.ws = nil
	e.background(ws, p)
}

// background tears ws down (nil: none) and then, with p, makes the next
// episode's workspace into p, in a goroutine that Close waits for; a
// teardown's error is kept for Close. Call it with e.mu held.
func (e *Environment) background(ws *workspace, p *preparation) {
	if ws == nil && p == nil {
		return
	}
	hook := e.testHookBeforeRelease
	e.bg.Go(func() {
		if ws != nil {
			e.keepErr(ws.destroy(hook))
		}
		if p == nil {
			return
		}
		if e.stopping.Load() {
			p.err = ErrClosed
		} else {
			p.ws, p.err = prepareWorkspace(e.cfg, e.oneCall)
		}
		close(p.done)
	})
}

// keepErr keeps a teardown's error (nil: none) for Close.
func (e *Environment) keepErr(err error) {
	if err == nil {
		return
	}
	e.bgMu.Lock()
	defer e.bgMu.Unlock()
	e.bgErrs = append(e.bgErrs, err)
}

// nextWorkspace returns the workspace made ahead, once it is made (it is
// made again when that failed), or makes one.
func (e *Environment) nextWorkspace() (*workspace, error) {
	p := e.next
	e.next = nil
	if p != nil {
		<-p.done
		if p.err == nil {
			return p.ws, nil
		}
	}
	return prepareWorkspace(e.cfg, e.oneCall)
}

// cleanup frees the running episode's workspace and uid, if any.
func (e *Environment) cleanup() error {
	if e.ws == nil {
		return nil
	}
	ws := e.ws
	e.ws = nil
	return ws.destroy(e.testHookBeforeRelease)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func countWord(n int) string {
	words := []string{"Zero", "One", "Two", "Three", "Four", "Five", "Six", "Seven", "Eight", "Nine", "Ten"}
	if n >= 0 && n < len(words) {
		return words[n]
	}
	return fmt.Sprint(n)
}

func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// toolsText is the tools text shown at reset, as the seed words it.
func toolsText(l Limits) string {
	return `Reply with exactly one JSON object per turn: {"tool": <name>, "args": {...}}.` + "\n" +
		"list_files {} - list the files in your workspace.\n" +
		`read_file {"path": str, "start": int (optional, 1-based line), "end": int (optional)} - ` +
		fmt.Sprintf("show up to %d numbered lines.\n", l.ReadLines) +
		`run_python {"code": str} - run a Python 3 script in your workspace (cwd) and show its output; ` +
		fmt.Sprintf("%s s limit, no network needed.\n", seconds(l.PythonTimeout.Seconds())) +
		`write_file {"path": str, "content": str} - create or replace a file in your workspace.` + "\n" +
		"run_tests {} - code tasks only: run the examples of test_solution.py as given.\n" +
		fmt.Sprintf(`check {"answer": str} - ask whether an answer is correct before you submit (at most %d times).`, l.MaxChecks) + "\n" +
		`submit {"answer": str} - give your final answer and end the episode.` + "\n" +
		fmt.Sprintf("You have %d tool calls. Read the inputs before answering, and verify before you submit.", l.MaxSteps)
}

func seconds(s float64) string {
	if s == math.Trunc(s) {
		return fmt.Sprint(int64(s))
	}
	return fmt.Sprint(s)
}
