package sandbox

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

// TestLauncherCodeMatchesSource: launcherCode is what the assembler makes
// of testdata/launcher_amd64.s.
func TestLauncherCodeMatchesSource(t *testing.T) {
	t.Parallel()
	if runtime.GOARCH != "amd64" {
		testenv.Unavailable(t, "the launcher exists for amd64 only")
	}
	as, err1 := exec.LookPath("as")
	objcopy, err2 := exec.LookPath("objcopy")
	if err1 != nil || err2 != nil {
		testenv.Unavailable(t, "binutils (as, objcopy) not installed; install binutils to check the launcher's machine code")
	}
	dir := t.TempDir()
	obj, bin := filepath.Join(dir, "l.o"), filepath.Join(dir, "l.bin")
	if out, err := exec.Command(as, "--64", "-o", obj, filepath.Join("testdata", "launcher_amd64.s")).CombinedOutput(); err != nil {
		t.Fatalf("as: %v\n%s", err, out)
	}
	if out, err := exec.Command(objcopy, "-O", "binary", "-j", ".text", obj, bin).CombinedOutput(); err != nil {
		t.Fatalf("objcopy: %v\n%s", err, out)
	}
	want, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(launcherCode, want) {
		t.Fatalf("launcherCode (%d bytes) differs from the assembled source (%d bytes)", len(launcherCode), len(want))
	}
}

// TestLauncherFailures: a limit the kernel refuses and a program that
// cannot be executed are reported as ErrLaunch, naming what failed, and
// nothing runs.
func TestLauncherFailures(t *testing.T) {
	t.Parallel()
	ep := testEpisode(t, testSandbox(t, Unsandboxed))
	marker := filepath.Join(ep.Dir(), "ran")
	code := "open(" + strconv.Quote(marker) + ", 'w')"
	tests := []struct {
		name   string
		argv   []string
		limits Limits
		want   string
	}{
		// RLIMIT_NOFILE above fs.nr_open (1 Mi by default) is refused even
		// to root.
		{"limit_refused", []string{python, "-c", code}, Limits{OpenFiles: 1 << 30}, "setrlimit NOFILE 1073741824: operation not permitted"},
		{"no_such_program", []string{"/nonexistent/python3", "-c", code}, Limits{}, "exec /nonexistent/python3: no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ep.Run(context.Background(), Command{Argv: tt.argv, Limits: tt.limits, Timeout: 10 * time.Second})
			if !errors.Is(err, ErrLaunch) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want ErrLaunch with %q", err, tt.want)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("the program ran")
			}
		})
	}
}

// TestLauncherLeavesNothing: the program gets only its three standard
// descriptors (not the launcher's report or cancel pipe, nor the
// episode's namespaces, nor any descriptor the server inherited without
// close-on-exec), and its argv and environment are exactly the command's,
// in every mode.
func TestLauncherLeavesNothing(t *testing.T) {
	t.Parallel()
	for _, mode := range []Mode{Namespaces, Unsandboxed} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			launcherLeavesNothing(t, testEpisode(t, testSandbox(t, mode)))
		})
	}
}

func launcherLeavesNothing(t *testing.T, ep *Episode) {
	code := `import os, sys
print(sorted(os.listdir("/proc/self/fd")))
print(sys.argv, sorted(os.environ.items()))
print(os.path.realpath("/proc/self/exe"))
`
	res, err := ep.Run(context.Background(), Command{Argv: []string{python, "-E", "-S", "-c", code, "a1", "a 2"},
		Env: []string{"A=1", "LANG=C.UTF-8"}, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	got := string(res.Stdout)
	// 0, 1, 2, and the descriptor listdir itself holds.
	if !strings.HasPrefix(got, "['0', '1', '2', '3']\n") {
		t.Errorf("descriptors: %q", got)
	}
	if !strings.Contains(got, "['-c', 'a1', 'a 2'] [('A', '1'), ('LANG', 'C.UTF-8')]") {
		t.Errorf("argv and environment: %q", got)
	}
	if real, _ := filepath.EvalSymlinks(python); !strings.Contains(got, real) {
		t.Errorf("the program is not %s: %q", real, got)
	}
}
