package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/internal/testkit/workbenchtest"
	"github.com/agentpen/agentpen/workbench/client"
	"golang.org/x/sys/unix"
)

// servedAgents are the hostile agents of testdata/agents/served: attacks
// that need a live `workbench serve` (and grader) rather than an
// environment in process.
const servedAgents = "../../testdata/agents/served"

// TestServedHostileAgents (root) runs every agent in servedAgents through
// real episodes of a live `workbench serve`; a file without a case fails
// the test.
func TestServedHostileAgents(t *testing.T) {
	testenv.RequireRoot(t)
	cases := map[string]func(t *testing.T, code string){
		"bound_task.py":     playBoundTask,
		"conn_flood.py":     playConnFlood,
		"exec_workbench.py": playExecWorkbench,
	}
	files, err := filepath.Glob(filepath.Join(servedAgents, "*.py"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no agents in %s: %v", servedAgents, err)
	}
	for _, f := range files {
		play, ok := cases[filepath.Base(f)]
		if !ok {
			t.Errorf("%s has no case in TestServedHostileAgents", f)
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(strings.TrimSuffix(filepath.Base(f), ".py"), func(t *testing.T) { play(t, string(src)) })
	}
}

// limitFDs sets a process's RLIMIT_NOFILE (soft and hard) to n, so a
// flood the size two sandboxed episodes can make (a uid has 32 processes
// of 64 descriptors) is enough to exhaust it, as 20000 were on a bare
// host under a larger one.
func limitFDs(t *testing.T, pid, n int) {
	t.Helper()
	lim := unix.Rlimit{Cur: uint64(n), Max: uint64(n)}
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &lim, nil); err != nil {
		t.Fatalf("prlimit %d: %v", pid, err)
	}
}

func openFDs(pid int) int {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1
	}
	return len(entries)
}

var floodResult = regexp.MustCompile(`flood: (\d+) processes, (\d+) connections opened, (\d+) kept open by the servers, (\d+) failed`)

// playConnFlood: two episodes flood the episode server and the grader
// with connections while a third episode works. The third episode's
// run_python calls and its oracle episode (graded by the grader) succeed,
// neither server keeps a flooding connection open or runs out of
// descriptors. In namespaces the flood reaches neither (episode code has
// only its own loopback); with the uid-only sandbox it does, and each
// server says so in its log in a few lines, not one per connection.
func playConnFlood(t *testing.T, code string) {
	for _, mode := range []string{"namespaces", "uid-only"} {
		t.Run(mode, func(t *testing.T) { connFlood(t, code, mode) })
	}
}

func connFlood(t *testing.T, code, mode string) {
	const key = "flood-grader-key-0b7e4c19a2d5"
	const fdLimit = 1024
	home, err := os.MkdirTemp("", "wb-homes")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(home, 0o755)
	t.Cleanup(func() { os.RemoveAll(home) })
	env := []string{"WB_FLOOD_KEY=" + key}
	g := workbenchtest.Start(t, binary(t), env, "grader", "--listen", "127.0.0.1:0", "--key-env", "WB_FLOOD_KEY", "--log-format", "json")
	s := workbenchtest.Start(t, binary(t), env, "serve", "--listen", "127.0.0.1:0", "--log-format", "json", "--sandbox", mode,
		"--home-dir", home, "--grader", "http://"+g.Addr, "--grader-key-env", "WB_FLOOD_KEY")
	limitFDs(t, g.Cmd.Process.Pid, fdLimit)
	limitFDs(t, s.Cmd.Process.Pid, fdLimit)
	code = strings.ReplaceAll(code, "{{TARGETS}}", s.Addr+","+g.Addr)

	ctx := testenv.Context(t)
	base := "http://" + s.Addr
	third := workbenchtest.Dial(t, ctx, base)
	if _, err := third.Reset(ctx, client.ResetOptions{TaskID: "software/median"}); err != nil {
		t.Fatal(err)
	}
	flooders := []*client.Session{workbenchtest.Dial(t, ctx, base), workbenchtest.Dial(t, ctx, base)}
	for _, f := range flooders {
		if _, err := f.Reset(ctx, client.ResetOptions{TaskID: "logs/error_count"}); err != nil {
			t.Fatal(err)
		}
	}

	// Descriptors of both servers, sampled until the floods end.
	stop := make(chan struct{})
	var sampling sync.WaitGroup
	maxFDs := map[string]int{}
	sampling.Go(func() {
		for {
			for name, pid := range map[string]int{"serve": s.Cmd.Process.Pid, "grader": g.Cmd.Process.Pid} {
				maxFDs[name] = max(maxFDs[name], openFDs(pid))
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	outputs := make([]string, len(flooders))
	var flooding sync.WaitGroup
	for i, f := range flooders {
		flooding.Go(func() {
			r, err := f.Step(ctx, "run_python", workbenchtest.Args(map[string]any{"code": code}))
			outputs[i] = r.Observation.Output + r.Observation.Error
			if err != nil {
				outputs[i] += " step error: " + err.Error()
			}
		})
	}
	if mode == "uid-only" {
		// The floods have reached both servers once each has refused some
		// of their connections (and said so).
		testenv.WaitFor(t, "the floods to reach both servers", func() bool {
			return strings.Contains(s.Logs.String(), `"msg":"refused connections from episode code"`) &&
				strings.Contains(g.Logs.String(), `"msg":"refused connections from episode code"`)
		})
	} else {
		// In namespaces the floods reach neither server, so neither says
		// anything to wait for: they are running now (a slower machine
		// only makes the third episode's steps overlap less of them).
		time.Sleep(time.Second)
	}

	// The third episode works meanwhile.
	var thirdErrs []string
	for i := range 3 {
		r, err := third.Step(ctx, "run_python", workbenchtest.Args(map[string]any{"code": fmt.Sprintf("print('alive %d')", i)}))
		if err != nil || !strings.Contains(r.Observation.Output, fmt.Sprintf("alive %d", i)) {
			thirdErrs = append(thirdErrs, fmt.Sprintf("run_python %d: %v %q %q", i, err, r.Observation.Output, r.Observation.Error))
		}
	}
	if err := playIsolated(ctx, third, "software/median", "third"); err != nil {
		thirdErrs = append(thirdErrs, fmt.Sprintf("oracle episode: %v", err))
	}
	flooding.Wait()
	close(stop)
	sampling.Wait()

	t.Logf("flood outputs: %q; most descriptors open: %v (limit %d)", outputs, maxFDs, fdLimit)
	for _, e := range thirdErrs {
		t.Errorf("third episode during the flood: %s", e)
	}
	for i, out := range outputs {
		m := floodResult.FindStringSubmatch(out)
		if m == nil {
			t.Errorf("flood %d printed no result: %q", i, out)
			continue
		}
		opened, _ := strconv.Atoi(m[2])
		kept, _ := strconv.Atoi(m[3])
		failed, _ := strconv.Atoi(m[4])
		if opened+failed < 1000 {
			t.Errorf("flood %d tried only %d connections: not a flood", i, opened+failed)
		}
		if kept != 0 {
			t.Errorf("flood %d: the servers kept %d of its %d connections open", i, kept, opened)
		}
		if mode == "namespaces" && opened != 0 {
			t.Errorf("flood %d opened %d connections to the servers from its own network namespace", i, opened)
		}
	}
	for name, n := range maxFDs {
		if n > fdLimit/4 {
			t.Errorf("%s had up to %d descriptors open during the flood (limit %d)", name, n, fdLimit)
		}
	}
	for name, p := range map[string]*workbenchtest.Proc{"serve": s, "grader": g} {
		logs := p.Logs.String()
		if strings.Contains(strings.ToLower(logs), "too many open files") {
			t.Errorf("the %s log has \"too many open files\"", name)
		}
		n := strings.Count(logs, `"msg":"refused connections from episode code"`)
		if mode == "namespaces" && n != 0 {
			t.Errorf("the %s log has %d lines on refused connections: the flood reached it", name, n)
		}
		if mode != "namespaces" && (n == 0 || n > 5) {
			t.Errorf("the %s log has %d lines on refused connections, want 1 to 5 (rate-limited)", name, n)
		}
	}
}

// playExecWorkbench: episode code finds the binary the server runs from
// and can neither read nor execute it, so it cannot run a grader of its
// own with the answer keys compiled in.
func playExecWorkbench(t *testing.T, code string) {
	ls := startServe(t)
	ctx := testenv.Context(t)
	w := workbenchtest.Dial(t, ctx, ls.URL)
	if _, err := w.Reset(ctx, client.ResetOptions{TaskID: "logs/error_count"}); err != nil {
		t.Fatal(err)
	}
	r, err := w.Step(ctx, "run_python", workbenchtest.Args(map[string]any{"code": code}))
	if err != nil {
		t.Fatal(err)
	}
	out := r.Observation.Output
	t.Logf("agent code printed:\n%s", out)
	if !strings.Contains(out, "found ") || strings.Contains(out, "found 0") {
		t.Fatalf("the agent did not find the binary: %q", out)
	}
	for _, bad := range []string{"READ OK", "EXEC OK", "KEYS SERVED"} {
		if strings.Contains(out, bad) {
			t.Errorf("episode code reached the workbench binary (%s): %q", bad, out)
		}
	}
}

// TestServeRefusesExposedBinary (root): `workbench serve` will not start
// from a binary the sandbox uids could read or execute, and says how to
// install it; the same binary at mode 0700 starts.
func TestServeRefusesExposedBinary(t *testing.T) {
	testenv.RequireRoot(t)
	src, err := os.ReadFile(binary(t))
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "wb-exposed")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	for _, mode := range []os.FileMode{0o755, 0o711, 0o704} {
		bin := filepath.Join(dir, fmt.Sprintf("workbench-%o", mode))
		if err := os.WriteFile(bin, src, 0o700); err != nil {
			t.Fatal(err)
		}
		os.Chmod(bin, mode)
		out, err := exec.CommandContext(testenv.Context(t), bin, "serve", "--listen", "127.0.0.1:0", "--home-dir", dir).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "make build (mode 0700)") || !strings.Contains(string(out), fmt.Sprintf("mode %04o", mode)) {
			t.Errorf("serve from a %04o binary: %v\n%s\nwant a refusal naming make build", mode, err, out)
		}
	}
}
