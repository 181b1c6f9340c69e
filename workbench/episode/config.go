package episode

import (
	"context"
	"log/slog"
	"time"

	"github.com/agentpen/agentpen/workbench/results"
	"github.com/agentpen/agentpen/workbench/sandbox"
	"github.com/agentpen/agentpen/workbench/tasks"
)

// Limits are the seed's episode limits; a zero field takes the default.
type Limits struct {
	// MaxSteps is the number of tool calls per episode (default 20).
	MaxSteps int `json:"max_steps"`
	// MaxInvalidInARow is how many refused calls in a row end the episode
	// (default 3).
	MaxInvalidInARow int `json:"max_invalid_in_a_row"`
	// MaxChecks is how many times check may be used (default 2).
	MaxChecks int `json:"max_checks"`
	// OutputChars is where output is clipped (default 1500).
	OutputChars int `json:"output_chars"`
	// ReadLines is how many lines read_file shows (default 60).
	ReadLines int `json:"read_lines"`
	// PythonTimeout bounds each Python run (default 10 s).
	PythonTimeout time.Duration `json:"python_timeout_ns"`
	// WriteChars bounds write_file's content (default 20,000 characters).
	WriteChars int `json:"write_chars"`
}

// DefaultLimits are the seed's limits.
var DefaultLimits = Limits{
	MaxSteps:         20,
	MaxInvalidInARow: 3,
	MaxChecks:        2,
	OutputChars:      1500,
	ReadLines:        60,
	PythonTimeout:    10 * time.Second,
	WriteChars:       20000,
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	set := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	set(&l.MaxSteps, d.MaxSteps)
	set(&l.MaxInvalidInARow, d.MaxInvalidInARow)
	set(&l.MaxChecks, d.MaxChecks)
	set(&l.OutputChars, d.OutputChars)
	set(&l.ReadLines, d.ReadLines)
	set(&l.WriteChars, d.WriteChars)
	if l.PythonTimeout <= 0 {
		l.PythonTimeout = d.PythonTimeout
	}
	return l
}

// Catalogue is where an environment finds its tasks. A task it builds may
// carry an empty Key when a Grader holds the answers.
type Catalogue interface {
	IDs() []string
	Build(id string) (*tasks.Task, error)
}

// Output is what one hidden case of a code task printed.
type Output struct {
	// Value is the JSON value the function returned; nil when the probe
	// printed none, or the case was void (it changed the workspace, or a
	// case before it did).
	Value []byte `json:"value"`
}

// Grader grades answers without handing the answer key to the
// environment, so a remote grader can hold the key in another process.
// An error grading a submitted answer (ScoreAnswer at submit,
// HiddenInputs, Judge) voids the episode: it ends without credit, its
// result says results.EndError, and what grading left goes with its
// workspace. An error of check's ScoreAnswer is a refusal of that step.
type Grader interface {
	// ScoreAnswer grades a non-code answer: credit in [0, 1] and a reason.
	ScoreAnswer(ctx context.Context, taskID, answer string) (credit float64, reason string, err error)
	// HiddenInputs returns the argument lists of a code task's hidden
	// cases, in order; their expected values stay with the grader.
	HiddenInputs(ctx context.Context, taskID string) ([][]any, error)
	// Judge grades a code task from whether every visible case passed and
	// what each hidden case returned (one Output per HiddenInputs entry).
	Judge(ctx context.Context, taskID string, visiblePassed []bool, hidden []Output) (credit float64, reason string, err error)
}

// Config configures an Environment. The zero value is the seed's
// defaults with the task package's catalogue and in-process grading.
type Config struct {
	// Limits are the episode limits; zero fields take DefaultLimits.
	Limits Limits
	// RunLimits bound every Python run (processes, file size, open files,
	// CPU, address space); zero fields take sandbox.DefaultLimits.
	RunLimits sandbox.Limits
	// Python is the interpreter agent code runs with; empty means
	// /usr/bin/python3. It must be readable and executable by the sandbox
	// uids.
	Python string
	// NoForkServer spawns a fresh interpreter for every run, the fallback
	// and the benchmarks' control; by default each episode in namespaces
	// has a fork server (sandbox.ForkServer): runs are forked from one
	// interpreter started at reset, graded cases from another server of
	// it that no earlier run of the agent's came from (see doc.go).
	NoForkServer bool
	// Catalogue holds the tasks; nil means package tasks.
	Catalogue Catalogue
	// Grader grades answers; nil grades in-process from the catalogue's
	// answer keys (package tasks).
	Grader Grader
	// Sandbox runs every episode's code (sandbox.New); required.
	Sandbox *sandbox.Sandbox
	// Binding, when set, gives the task of every reset (package bind: a
	// workspace serves only its task): a reset naming no task plays the
	// bound one, one naming another is refused with Binding's error,
	// before anything of the running episode is touched. Nil plays the
	// task each reset names, or the default.
	Binding Binding
	// OnEnd, when set, receives each episode's results.Record once, when it
	// ends: graded, out of steps or invalid calls, finished, replaced by
	// a reset, or closed. It is called with the environment's lock held:
	// it must not call the environment, and should not block.
	OnEnd func(results.Record)
	// Now is the clock results are stamped with; nil means time.Now.
	Now func() time.Time
	// Logger receives the cause of each grading failure that voids an
	// episode (the agent and the result see its reason alone); nil
	// discards.
	Logger *slog.Logger
}

func (c Config) log() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}

// Binding resolves the task of a reset that asked for requested ("" for
// none); *bind.Binding implements it.
type Binding interface {
	Resolve(requested string) (string, error)
}

// taskCatalogue is package tasks as a Catalogue.
type taskCatalogue struct{}

func (taskCatalogue) IDs() []string                        { return tasks.IDs() }
func (taskCatalogue) Build(id string) (*tasks.Task, error) { return tasks.Build(id) }

func (c Config) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// resolved is a Config with every default filled in.
func (c Config) resolved() Config {
	c.Limits = c.Limits.withDefaults()
	c.RunLimits = c.RunLimits.WithDefaults()
	if c.Python == "" {
		c.Python = "/usr/bin/python3"
	}
	if c.Catalogue == nil {
		c.Catalogue = taskCatalogue{}
	}
	if c.Grader == nil {
		c.Grader = localGrader{c.Catalogue}
	}
	return c
}

// Metadata describes the configuration for the server's GET /metadata:
// the sandbox mode (sandbox.Mode's name: "namespaces", "uid-only" or
// "unsandboxed"), whether runs are forked from a fork server (only in
// namespaces; an episode whose server cannot start spawns them), the
// episode limits and the per-run resource limits.
func (c Config) Metadata() map[string]any {
	r := c.resolved()
	mode := "none"
	if c.Sandbox != nil {
		mode = c.Sandbox.Mode().String()
	}
	l := r.Limits
	return map[string]any{
		"sandbox":     mode,
		"fork_server": mode == sandbox.Namespaces.String() && !c.NoForkServer,
		"limits": map[string]any{
			"max_steps":            l.MaxSteps,
			"max_invalid_in_a_row": l.MaxInvalidInARow,
			"max_checks":           l.MaxChecks,
			"output_chars":         l.OutputChars,
			"read_lines":           l.ReadLines,
			"python_timeout_s":     l.PythonTimeout.Seconds(),
			"write_chars":          l.WriteChars,
		},
		"run_limits": r.RunLimits,
	}
}
