package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
)

func TestParseInterspersed(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		min, max int
		wantPos  []string
		wantJSON bool
		wantCode int
	}{
		{"flags_first", []string{"--json", "a"}, 1, 1, []string{"a"}, true, 0},
		{"flags_after", []string{"a", "--json"}, 1, 1, []string{"a"}, true, 0},
		{"flags_between", []string{"a", "--json", "b"}, 0, -1, []string{"a", "b"}, true, 0},
		{"double_dash", []string{"a", "--", "--json"}, 0, -1, []string{"a", "--json"}, false, 0},
		{"missing", []string{"--json"}, 1, 1, nil, true, 2},
		{"extra", []string{"a", "b"}, 1, 1, nil, false, 2},
		{"unknown_flag", []string{"a", "--nope"}, 1, 1, nil, false, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			fs := NewFlagSet("prog", "cmd", "[flags] ID", "Does a thing.", &out)
			asJSON := fs.Bool("json", false, "print JSON")
			pos, err := fs.Parse(tt.args, tt.min, tt.max)
			if got := ExitCode(err); got != tt.wantCode {
				t.Fatalf("exit code %d (err %v), want %d", got, err, tt.wantCode)
			}
			if err != nil {
				if !strings.Contains(err.Error(), `run "prog cmd --help"`) {
					t.Errorf("usage error %q does not say how to get help", err)
				}
				return
			}
			if !slices.Equal(pos, tt.wantPos) || *asJSON != tt.wantJSON {
				t.Fatalf("positionals %q json %v, want %q %v", pos, *asJSON, tt.wantPos, tt.wantJSON)
			}
		})
	}
}

func TestHelpOnStdout(t *testing.T) {
	var out bytes.Buffer
	fs := NewFlagSet("prog", "cmd", "[flags] ID", "Does a thing.", &out)
	fs.Bool("json", false, "print JSON")
	_, err := fs.Parse([]string{"--help"}, 1, 1)
	if !errors.Is(err, ErrHelp) || ExitCode(err) != 0 || Message("prog", err) != "" {
		t.Fatalf("--help: %v (exit %d)", err, ExitCode(err))
	}
	for _, want := range []string{"Usage: prog cmd [flags] ID", "Does a thing.", "-json"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, out.String())
		}
	}
}

func TestMessageOnce(t *testing.T) {
	var out bytes.Buffer
	fs := NewFlagSet("prog", "cmd", "", "x", &out)
	_, err := fs.Parse([]string{"--bogus"}, 0, 0)
	msg := Message("prog", err)
	if strings.Count(msg, "bogus") != 1 || out.Len() != 0 {
		t.Fatalf("message %q (stdout %q): the bad flag must be named exactly once", msg, out.String())
	}
	if got := Message("prog", fmt.Errorf("x: %w", ErrReported)); got != "" {
		t.Fatalf("a reported failure printed %q", got)
	}
	if ExitCode(&ExitError{Code: 3, Err: errors.New("down")}) != 3 || ExitCode(errors.New("x")) != 1 {
		t.Fatal("exit codes")
	}
}

// TestInCommand: an error attributed to a subcommand is printed after its
// name, once; a usage error in it gets the hint; help and reported
// failures print nothing.
func TestInCommand(t *testing.T) {
	for _, tt := range []struct {
		name string
		err  error
		want string
		code int
	}{
		{"plain", errors.New("boom"), "prog cmd: boom", 1},
		{"usage_no_hint", Usagef("--n 0: must be positive"), `prog cmd: --n 0: must be positive (run "prog cmd --help" for usage)`, 2},
		{"usage_own_hint", &UsageError{Msg: "x", Hint: "prog other --help"}, `prog cmd: x (run "prog other --help" for usage)`, 2},
		{"exit_code", &ExitError{Code: 3, Err: errors.New("down")}, "prog cmd: down", 3},
		{"twice", InCommand("prog cmd sub", errors.New("once")), "prog cmd sub: once", 1},
		{"reported", fmt.Errorf("x: %w", ErrReported), "", 1},
		{"help", ErrHelp, "", 0},
		{"nil", nil, "", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := InCommand("prog cmd", tt.err)
			if got := Message("prog", err); got != tt.want || ExitCode(err) != tt.code {
				t.Fatalf("Message = %q (exit %d), want %q (exit %d)", got, ExitCode(err), tt.want, tt.code)
			}
		})
	}
}

// TestMissingArgument: a missing positional names what the synopsis
// requires, not its optional parts.
func TestMissingArgument(t *testing.T) {
	for _, tt := range []struct{ synopsis, want string }{
		{"[flags] SPEC.json|-", `missing SPEC.json|- (run "prog cmd --help" for usage)`},
		{"[flags] SRC DST", `missing SRC DST (run "prog cmd --help" for usage)`},
		{"[--json]", `missing [--json] (run "prog cmd --help" for usage)`},
	} {
		fs := NewFlagSet("prog", "cmd", tt.synopsis, "x", io.Discard)
		_, err := fs.Parse(nil, 1, -1)
		if err == nil || err.Error() != tt.want {
			t.Errorf("%q: %v, want %q", tt.synopsis, err, tt.want)
		}
	}
}
