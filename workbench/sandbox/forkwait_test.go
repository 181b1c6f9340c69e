package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestForkServerAwaitsTemplate: a run that comes while the template
// starts waits for it when, by the sandbox's recent templates
// (startStats), it will be ready sooner than a spawn starts, and is
// forked; otherwise, or once it waited as long as a spawn's start, it is
// spawned.
func TestForkServerAwaitsTemplate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		up, ready time.Duration
		program   string // "": the fork server's; others never get ready
		forked    bool
	}{
		{"ready sooner", 10 * time.Second, time.Second, "", true},
		{"a spawn sooner", time.Millisecond, 10 * time.Second, "import time\ntime.sleep(600)\n", false},
		{"ready late", 300 * time.Millisecond, time.Millisecond, "import time\ntime.sleep(600)\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sb := testSandbox(t, Namespaces)
			sb.starts.add(tc.up, tc.ready)
			ep := testEpisode(t, sb)
			if err := AsUID(ep.UID(), func() error { return os.WriteFile(filepath.Join(ep.Dir(), ".run.py"), []byte("print('ran')\n"), 0o600) }); err != nil {
				t.Fatal(err)
			}
			fs := newForkServer(ep, ForkServerConfig{Python: python, Env: forkTestEnv}, tc.program)
			k := fs.Forker()
			res, err := k.Run(context.Background(), Command{Argv: []string{python, "-E", "-s", ".run.py"}, Env: forkTestEnv, Timeout: 20 * time.Second})
			if err != nil || string(res.Stdout) != "ran\n" {
				t.Fatalf("run: %q %q %v", res.Stdout, res.Stderr, err)
			}
			if got := fs.Forked() == 1; got != tc.forked {
				t.Fatalf("forked %v, want %v (%v)", got, tc.forked, fs.Err())
			}
		})
	}
}

// TestForkServerStartStats: a template that got ready adds how long it
// took to be up and ready to its sandbox's figures.
func TestForkServerStartStats(t *testing.T) {
	t.Parallel()
	sb := testSandbox(t, Namespaces)
	if _, _, ok := sb.starts.get(); ok {
		t.Fatal("figures before any template")
	}
	fs := testEpisode(t, sb).ForkServer(ForkServerConfig{Python: python, Env: forkTestEnv})
	if !fs.WaitReady(context.Background()) {
		t.Fatal(fs.Err())
	}
	up, ready, ok := sb.starts.get()
	if !ok || up <= 0 || ready <= up {
		t.Fatalf("up %v, ready %v (%v)", up, ready, ok)
	}
}

// TestForkServerCompiled: a template is sent its program compiled by the
// server's interpreter once (the marshalled code object), and the source
// when it cannot be compiled.
func TestForkServerCompiled(t *testing.T) {
	t.Parallel()
	sb := testSandbox(t, Namespaces)
	code := sb.compiled(python, "x = 1\n")
	if len(code) == 0 || sb.compiled(python, "x = 1\n")[0] != code[0] {
		t.Fatalf("compiled: %q", code)
	}
	if c := sb.compiled(python, "x = (\n"); c != nil {
		t.Fatalf("a syntax error compiled to %q", c)
	}
	if c := sb.compiled("/nonexistent/python3", "x = 1\n"); c != nil {
		t.Fatalf("no interpreter compiled to %q", c)
	}
	// The template says how it got its program: by its exit status.
	for _, tc := range []struct{ program, exit string }{
		{"import sys\nsys.exit(3 if _p[:1] == b'\\x00' else 4)\n", "exit 3"},
		{"import sys\nsys.exit(3 if _p[:1] == b'\\x00' else 4)\n(\n", ""}, // a syntax error: sent as source
	} {
		f := newForkEnvWith(t, ForkServerConfig{Python: python, Env: forkTestEnv}, tc.program)
		f.write(t, ".run.py", "print(1)")
		for i := 0; i < 100 && f.fs.Err() == nil; i++ {
			f.k.Run(context.Background(), f.command(nil))
			time.Sleep(20 * time.Millisecond)
		}
		err := f.fs.Err()
		if err == nil || tc.exit != "" && !strings.Contains(err.Error(), "(last: "+tc.exit) || tc.exit == "" && !strings.Contains(err.Error(), "SyntaxError") {
			t.Errorf("program %q: the server's error: %v", tc.program, err)
		}
	}
}

// TestForkServerCompiledAhead: CompileAhead compiles the program of the
// fork servers of a config once, so the sandbox's first template runs
// no compile of its own (it is sent the code compiled ahead, and serves);
// a config whose program differs (another preload) is compiled at its
// first template; a sandbox where no fork server starts compiles nothing.
func TestForkServerCompiledAhead(t *testing.T) {
	t.Parallel()
	counted := func(sb *Sandbox) *atomic.Int32 {
		var n atomic.Int32
		sb.testCompileArgv = func(python string) []string {
			n.Add(1)
			return []string{python, "-I", "-S", "-c", compileScript}
		}
		return &n
	}
	sb := testSandbox(t, Namespaces)
	compiles := counted(sb)
	cfg := ForkServerConfig{Python: python, Env: forkTestEnv, Preload: []string{"json"}}
	if !sb.CompileAhead(cfg) {
		t.Fatal("CompileAhead: not compiled")
	}
	if n := compiles.Load(); n != 1 {
		t.Fatalf("CompileAhead: %d compiles, want 1", n)
	}
	ep := testEpisode(t, sb)
	if err := AsUID(ep.UID(), func() error { return os.WriteFile(filepath.Join(ep.Dir(), ".run.py"), []byte("print('ran')\n"), 0o600) }); err != nil {
		t.Fatal(err)
	}
	fs := ep.ForkServer(cfg)
	if !fs.WaitReady(context.Background()) {
		t.Fatalf("the template sent the code compiled ahead: %v", fs.Err())
	}
	res, err := fs.Forker().Run(context.Background(), Command{Argv: []string{python, "-E", "-s", ".run.py"}, Env: forkTestEnv, Timeout: 20 * time.Second})
	if err != nil || string(res.Stdout) != "ran\n" || fs.Forked() != 1 {
		t.Fatalf("run: %q %q %v (forked %d)", res.Stdout, res.Stderr, err, fs.Forked())
	}
	if n := compiles.Load(); n != 1 {
		t.Fatalf("the first template after CompileAhead: %d compiles, want 1 (the one ahead)", n)
	}
	other := ep.ForkServer(ForkServerConfig{Python: python, Env: forkTestEnv})
	if !other.WaitReady(context.Background()) {
		t.Fatal(other.Err())
	}
	if n := compiles.Load(); n != 2 {
		t.Fatalf("a template of another program: %d compiles in all, want 2", n)
	}
	for _, mode := range []Mode{UIDOnly, Unsandboxed} {
		sb := testSandbox(t, mode)
		compiles := counted(sb)
		if sb.CompileAhead(cfg) {
			t.Errorf("%v: CompileAhead says it compiled", mode)
		}
		if n := compiles.Load(); n != 0 {
			t.Errorf("%v: CompileAhead ran %d compiles, want none (no fork server starts)", mode, n)
		}
	}
	sb = testSandbox(t, Namespaces)
	compiles = counted(sb)
	if sb.CompileAhead(ForkServerConfig{Python: "python3"}) {
		t.Error("a relative python: CompileAhead says it compiled")
	}
	if n := compiles.Load(); n != 0 {
		t.Errorf("a relative python: CompileAhead ran %d compiles, want none", n)
	}
}

// TestCompileUnprivileged: the interpreter compiles as the overflow user
// (root never runs it), in /, with no environment.
func TestCompileUnprivileged(t *testing.T) {
	t.Parallel()
	sb := testSandbox(t, Namespaces)
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		os.Chmod(d, 0o755) // the overflow user writes out, below
	}
	out := filepath.Join(dir, "seen")
	if err := os.WriteFile(out, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	os.Chmod(out, 0o666)
	// The interpreter's place: a shell, as the compile runs it (a file
	// of the test's could not run where /tmp is noexec, as in a
	// workspace container).
	sb.testCompileArgv = func(python string) []string {
		return []string{"/bin/sh", "-c", "echo \"$(id -u) $(id -g) $(pwd) $(env | wc -l) " + python + "\" > " + out + "; cat >/dev/null; printf code"}
	}
	if code := sb.compiled("python-x", "x = 1\n"); string(code) != "code" {
		t.Fatalf("compiled: %q", code)
	}
	seen, _ := os.ReadFile(out)
	got := strings.Fields(string(seen))
	if n := 0; len(got) == 5 {
		// sh sets PWD, SHLVL and _ itself.
		n, _ = strconv.Atoi(got[3])
		got[3] = strconv.FormatBool(n <= 3)
	}
	if strings.Join(got, " ") != "65534 65534 / true python-x" {
		t.Fatalf("the compile ran as %q, want 65534 65534 / and no environment of ours", seen)
	}
}
