// Package cli is the one command-line shape both agentpen binaries share:
// a usage error that exits 2, --help on stdout with exit 0, flags accepted
// after positional arguments, and JSON written the same way everywhere.
// It parses and reports; it runs nothing and reads no environment.
package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// ErrHelp is returned by Parse after --help printed the usage on stdout;
// the command ends with exit status 0 and prints nothing else.
var ErrHelp = flag.ErrHelp

// ErrReported is returned by a command that already told the user what
// went wrong; main prints nothing more and exits 1 (or what ExitCode says
// for the error it wraps).
var ErrReported = errors.New("failure already reported")

// UsageError is a bad command line: an unknown command or flag, a missing
// or extra argument, a flag value out of range. It exits 2.
type UsageError struct {
	// Msg says what is wrong, without a "usage:" prefix.
	Msg string
	// Hint is the command to run for help ("agentpen up --help"); empty
	// for none.
	Hint string
}

func (e *UsageError) Error() string {
	if e.Hint == "" {
		return e.Msg
	}
	return e.Msg + " (run \"" + e.Hint + "\" for usage)"
}

// CommandError is an error of one subcommand. main prints it after the
// subcommand's name ("agentpen up: ...") rather than the program's, so no
// message needs to name its own command.
type CommandError struct {
	// Cmd is the program and subcommand: "agentpen up".
	Cmd string
	Err error
}

func (e *CommandError) Error() string { return e.Cmd + ": " + e.Err.Error() }
func (e *CommandError) Unwrap() error { return e.Err }

// InCommand attributes err to the subcommand cmd ("agentpen up"), and
// gives a *UsageError in it without a hint the hint `cmd --help`. nil,
// ErrHelp, ErrReported and errors already attributed are returned as they
// are.
func InCommand(cmd string, err error) error {
	var ce *CommandError
	if err == nil || errors.Is(err, ErrHelp) || errors.Is(err, ErrReported) || errors.As(err, &ce) {
		return err
	}
	var ue *UsageError
	if errors.As(err, &ue) && ue.Hint == "" {
		ue.Hint = cmd + " --help"
	}
	return &CommandError{Cmd: cmd, Err: err}
}

// Usagef returns a *UsageError with a formatted message and no hint.
func Usagef(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...)}
}

// ExitError carries an exit status other than 1 for an error.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// ExitCode is the process exit status for the error a command returned:
// 0 for nil and ErrHelp, 2 for a *UsageError, the Code of an *ExitError,
// and 1 otherwise.
func ExitCode(err error) int {
	var ue *UsageError
	var ee *ExitError
	switch {
	case err == nil, errors.Is(err, ErrHelp):
		return 0
	case errors.As(err, &ue):
		return 2
	case errors.As(err, &ee):
		return ee.Code
	}
	return 1
}

// Message is what main prints for err on stderr ("" for nothing: success,
// help, or a failure the command already reported): the error after the
// name of the subcommand it is attributed to (InCommand), else after prog.
func Message(prog string, err error) string {
	if err == nil || errors.Is(err, ErrHelp) || errors.Is(err, ErrReported) {
		return ""
	}
	var ce *CommandError
	if errors.As(err, &ce) {
		return ce.Error()
	}
	return prog + ": " + err.Error()
}

// FlagSet is a subcommand's flags and its usage text.
type FlagSet struct {
	*flag.FlagSet
	prog, args, help string
	stdout           io.Writer
}

// NewFlagSet returns the flags of "prog name": args is the synopsis of its
// arguments ("[flags] SPEC.json|-"), help the paragraphs --help prints
// before the flags. --help goes to stdout.
func NewFlagSet(prog, name, args, help string, stdout io.Writer) *FlagSet {
	fs := flag.NewFlagSet(prog+" "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &FlagSet{FlagSet: fs, prog: prog + " " + name, args: args, help: help, stdout: stdout}
}

// Usage writes the full usage text to w.
func (f *FlagSet) Usage(w io.Writer) {
	fmt.Fprintf(w, "Usage: %s %s\n\n%s\n", f.prog, f.args, strings.TrimRight(f.help, "\n"))
	n := 0
	f.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprint(w, "\nFlags:\n")
		f.SetOutput(w)
		f.PrintDefaults()
		f.SetOutput(io.Discard)
	}
}

// Parse parses args, accepting flags before and after positional
// arguments (everything after "--" is positional), and checks there are
// between min and max positionals (max < 0: no limit). --help prints the
// usage on stdout and returns ErrHelp; anything wrong is a *UsageError
// that names it once and says how to get help.
func (f *FlagSet) Parse(args []string, min, max int) ([]string, error) {
	var pos []string
	for {
		if err := f.FlagSet.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				f.Usage(f.stdout)
				return nil, ErrHelp
			}
			return nil, &UsageError{Msg: err.Error(), Hint: f.prog + " --help"}
		}
		rest := f.Args()
		if len(rest) == 0 {
			break
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	switch {
	case len(pos) < min:
		return nil, &UsageError{Msg: "missing " + required(f.args), Hint: f.prog + " --help"}
	case max >= 0 && len(pos) > max:
		return nil, &UsageError{Msg: fmt.Sprintf("unexpected argument %q", pos[max]), Hint: f.prog + " --help"}
	}
	return pos, nil
}

// required is what a synopsis requires: its words that are not [optional]
// ("SPEC.json|-" of "[flags] SPEC.json|-"), or the synopsis when all are.
func required(synopsis string) string {
	var words []string
	for _, w := range strings.Fields(synopsis) {
		if !strings.HasPrefix(w, "[") {
			words = append(words, w)
		}
	}
	if len(words) == 0 {
		return synopsis
	}
	return strings.Join(words, " ")
}

// WriteJSON writes v as indented JSON and a newline, without HTML escaping
// ("<" stays "<": the output is read by programs and people, never
// embedded in HTML).
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// StringList is a repeatable string flag: each use appends its value.
type StringList []string

// String is the values joined by commas.
func (l *StringList) String() string { return strings.Join(*l, ",") }

// Set appends a value (flag.Value).
func (l *StringList) Set(v string) error { *l = append(*l, v); return nil }
