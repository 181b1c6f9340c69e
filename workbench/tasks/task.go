package tasks

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Kind is how a task's answer is graded.
type Kind string

// The answer kinds.
const (
	// KindCode: fix solution.py; graded by calling its function on cases.
	KindCode Kind = "code"
	// KindNumber: one number, correct within Key.Tolerance (stated in the
	// instruction).
	KindNumber Kind = "number"
	// KindText: a short text, compared after normalisation (case, whitespace,
	// surrounding punctuation and quotes).
	KindText Kind = "text"
	// KindSet: items separated by commas or newlines, in any order; credit is
	// the fraction found, reduced for extra items.
	KindSet Kind = "set"
	// KindList: items separated by commas or newlines, in order; credit is the
	// fraction of positions right.
	KindList Kind = "list"
)

// MaxVariant is the largest variant number an id may carry.
const MaxVariant = 99999

// ErrUnknownTask is returned (wrapped) by Build and Lookup for an id that
// names no family or carries a malformed variant.
var ErrUnknownTask = errors.New("unknown task")

// File is one file of a task's workspace, by path relative to the workspace.
type File struct {
	Path    string
	Content string
}

// Case is one call of a code task's function: JSON-able arguments and the
// JSON-able value it must return.
type Case struct {
	Args []any `json:"args"`
	Want any   `json:"want"`
}

// Spec describes a family in the catalogue listing.
type Spec struct {
	// ID is "domain/family", the id of variant 0.
	ID      string `json:"id"`
	Domain  string `json:"domain"`
	Family  string `json:"family"`
	Kind    Kind   `json:"answer_kind"`
	Summary string `json:"summary"`
}

// Task is one built task: what the agent sees (Instruction, Files) and what
// only the grader may hold (Key).
type Task struct {
	Spec
	// TaskID is the id the task was built from, with its variant when not 0.
	TaskID string
	// Variant is the variant number (0 for a plain id).
	Variant int
	// Instruction is the text shown to the agent at reset.
	Instruction string
	// Files are the workspace files, sorted by path.
	Files []File
	// Function is the name of the function a code task's solution.py
	// defines; empty for other kinds.
	Function string
	// Visible are a code task's examples, the cases test_solution.py runs.
	Visible []Case
	// Key is the answer key. It never enters the workspace.
	Key Key
}

// Key is a task's answer key.
type Key struct {
	// Answer is the expected answer of number and text tasks, as text.
	Answer string
	// Items are the expected items of set and list tasks.
	Items []string
	// Tolerance is the absolute tolerance of a number task.
	Tolerance float64
	// Hidden are a code task's hidden cases, the ones credit comes from.
	Hidden []Case
}

// File returns the content of the workspace file at path, and whether the
// task has it.
func (t *Task) File(path string) (string, bool) {
	for _, f := range t.Files {
		if f.Path == path {
			return f.Content, true
		}
	}
	return "", false
}

// Built is what a family's builder returns for one variant; Build fills in
// the rest of the Task.
type Built struct {
	Instruction string
	Files       map[string]string
	Function    string
	Visible     []Case
	Key         Key
}

// Family is one kind of task with a builder of variants.
type Family struct {
	Domain  string
	Name    string
	Kind    Kind
	Summary string
	// Build makes the variant whose generator is r. It must depend on r and
	// variant only, so the same id always builds the same files.
	Build func(r *Rand, variant int) Built
}

// ID returns "domain/family".
func (f Family) ID() string { return f.Domain + "/" + f.Name }

var (
	catalogueOnce sync.Once
	catalogue     map[string]Family
	catalogueIDs  []string
)

// allFamilies lists every domain's families; each domain lives in its own
// file.
func allFamilies() []Family {
	var all []Family
	for _, domain := range [][]Family{
		softwareFamilies(),
		dataFamilies(),
		logFamilies(),
		configFamilies(),
		financeFamilies(),
		sqlFamilies(),
		documentFamilies(),
		securityFamilies(),
	} {
		all = append(all, domain...)
	}
	return all
}

func load() {
	catalogueOnce.Do(func() {
		catalogue = map[string]Family{}
		for _, f := range allFamilies() {
			if _, dup := catalogue[f.ID()]; dup {
				panic("tasks: duplicate family " + f.ID())
			}
			catalogue[f.ID()] = f
			catalogueIDs = append(catalogueIDs, f.ID())
		}
		sort.Strings(catalogueIDs)
	})
}

// IDs returns the sorted ids of every family (variant 0).
func IDs() []string {
	load()
	return append([]string(nil), catalogueIDs...)
}

// Specs returns the catalogue listing, sorted by id.
func Specs() []Spec {
	load()
	out := make([]Spec, 0, len(catalogueIDs))
	for _, id := range catalogueIDs {
		out = append(out, catalogue[id].spec())
	}
	return out
}

func (f Family) spec() Spec {
	return Spec{ID: f.ID(), Domain: f.Domain, Family: f.Name, Kind: f.Kind, Summary: f.Summary}
}

// ParseID splits "domain/family[@N]" into the family id and the variant. It
// does not check that the family exists.
func ParseID(id string) (family string, variant int, err error) {
	family, v, hasVariant := strings.Cut(id, "@")
	if hasVariant {
		n, perr := strconv.Atoi(v)
		if perr != nil || n < 0 || n > MaxVariant || strconv.Itoa(n) != v {
			return "", 0, fmt.Errorf("task id %q: variant must be an integer 0..%d: %w", id, MaxVariant, ErrUnknownTask)
		}
		variant = n
	}
	return family, variant, nil
}

// Lookup returns the Spec of the family an id names.
func Lookup(id string) (Spec, error) {
	load()
	family, _, err := ParseID(id)
	if err != nil {
		return Spec{}, err
	}
	f, ok := catalogue[family]
	if !ok {
		return Spec{}, fmt.Errorf("task id %q: %w", id, ErrUnknownTask)
	}
	return f.spec(), nil
}

// Build builds the task an id names.
func Build(id string) (*Task, error) {
	load()
	family, variant, err := ParseID(id)
	if err != nil {
		return nil, err
	}
	f, ok := catalogue[family]
	if !ok {
		return nil, fmt.Errorf("task id %q: %w", id, ErrUnknownTask)
	}
	b := f.Build(newRand(family, variant), variant)
	t := &Task{
		Spec:        f.spec(),
		TaskID:      family,
		Variant:     variant,
		Instruction: b.Instruction,
		Function:    b.Function,
		Visible:     b.Visible,
		Key:         b.Key,
	}
	if variant != 0 {
		t.TaskID = fmt.Sprintf("%s@%d", family, variant)
	}
	for p, c := range b.Files {
		t.Files = append(t.Files, File{Path: p, Content: c})
	}
	sort.Slice(t.Files, func(i, j int) bool { return t.Files[i].Path < t.Files[j].Path })
	if f.Kind == KindCode {
		t.Files = append(t.Files[:0:0], t.Files...)
		if _, ok := t.File("test_solution.py"); !ok {
			t.Files = append(t.Files, File{Path: "test_solution.py", Content: TestFile(b.Function, b.Visible)})
			sort.Slice(t.Files, func(i, j int) bool { return t.Files[i].Path < t.Files[j].Path })
		}
	}
	return t, nil
}

// Known is the catalogue as campaign.Validate consults it: nil for a task
// id the episode server serves, else an error whose text is the field's
// message (what is wrong, and where the catalogue is listed).
func Known(id string) error {
	if _, _, err := ParseID(id); err != nil {
		return fmt.Errorf("has a malformed variant: want domain/family@N with N in 0..%d", MaxVariant)
	}
	if _, err := Lookup(id); err != nil {
		if errors.Is(err, ErrUnknownTask) {
			return errors.New("is not in the workbench catalogue (workbench tasks lists it)")
		}
		return err
	}
	return nil
}
