package sandbox

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestPreludeRunsScriptAsPython: a script run through the prelude prints,
// fails and exits exactly as `python -E -s script` run directly does:
// argv, sys.path[0], __file__, the globals of __main__, tracebacks (no
// prelude frame), syntax errors, exit codes, a missing script.
func TestPreludeRunsScriptAsPython(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, src string }{
		{"identity", `import sys, os
print(__name__, __file__, sys.argv, sys.path[0] == os.getcwd(), __spec__, __cached__, type(__loader__).__name__)
print(sorted(globals()))
print(__doc__, __package__)
`},
		{"traceback", `def f():
    raise ValueError("boom")
def g():
    f()
g()
`},
		{"chained", `try:
    1 / 0
except ZeroDivisionError:
    raise KeyError("k")
`},
		{"syntax_error", "x = (\n"},
		{"exit_code", "import sys\nprint('bye')\nsys.exit(3)\n"},
		{"exit_text", "raise SystemExit('done badly')\n"},
		{"local_import", "import helper\nprint(helper.VALUE)\n"},
		{"future_import", "from __future__ import annotations\ndef f(x: Undefined) -> None: pass\nprint(f.__annotations__)\n"},
		{"excepthook", "import sys\nsys.excepthook = lambda *a: print('hooked', a[0].__name__)\nraise OSError\n"},
		{"missing", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			script := "script.py"
			if tt.name == "missing" {
				script = "missing.py"
			} else if err := os.WriteFile(filepath.Join(dir, script), []byte(tt.src), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "helper.py"), []byte("VALUE = 42\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			direct := exec.Command(python, "-E", "-s", "-B", script, "a1", "a 2")
			direct.Dir = dir
			var dOut, dErr bytes.Buffer
			direct.Stdout, direct.Stderr = &dOut, &dErr
			derr := direct.Run()
			var exitErr *exec.ExitError
			if derr != nil && !errors.As(derr, &exitErr) {
				t.Fatal(derr)
			}
			res, err := Run(context.Background(), Command{Python: python, Flags: []string{"-E", "-s", "-B"}, Script: script,
				Args: []string{"a1", "a 2"}, Dir: dir, UID: -1, Timeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := string(res.Stdout), dOut.String(); got != want {
				t.Errorf("stdout:\n%s\nwant:\n%s", got, want)
			}
			if got, want := string(res.Stderr), dErr.String(); got != want {
				t.Errorf("stderr:\n%s\nwant:\n%s", got, want)
			}
			if got, want := res.ExitCode, direct.ProcessState.ExitCode(); got != want {
				t.Errorf("exit code %d, want %d", got, want)
			}
		})
	}
}

// TestPreludeFailureIsLaunchError: when the prelude cannot set a limit,
// Run reports ErrLaunch and the program never runs.
func TestPreludeFailureIsLaunchError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	// RLIMIT_NOFILE above fs.nr_open (1 Mi by default) is refused even to
	// root, so the prelude's setrlimit fails.
	res, err := Run(context.Background(), Command{Python: python, Code: "open(" + strconv.Quote(marker) + ", 'w')",
		Dir: dir, UID: -1, Limits: Limits{OpenFiles: 1 << 30}, Timeout: 10 * time.Second})
	if !errors.Is(err, ErrLaunch) || !strings.Contains(err.Error(), "prelude") {
		t.Fatalf("err %v, want a prelude ErrLaunch", err)
	}
	if _, statErr := os.Stat(marker); statErr == nil {
		t.Fatalf("the program ran after the prelude failed (stdout %q)", res.Stdout)
	}
}
