package episode

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/agentpen/agentpen/internal/testkit/oracle"
	"github.com/agentpen/agentpen/internal/testkit/sandboxtest"
	"github.com/agentpen/agentpen/workbench/results"
	"github.com/agentpen/agentpen/workbench/sandbox"
	"golang.org/x/sys/unix"
)

// hostileRun is one hostile agent's live episode.
type hostileRun struct {
	env  *Environment
	code string // the agent file, placeholders replaced
	// runID is {{RUN_ID}}: unique to this test run, so names an agent
	// leaves in global places never meet a previous run's.
	runID string
	uid   int
	dir   string
}

// run runs the agent's file with run_python and checks that nothing of
// the uid survived the run itself.
func (h *hostileRun) run(t *testing.T) Observation {
	t.Helper()
	o := step(t, h.env, "run_python", map[string]any{"code": h.code})
	noProcesses(t, h.uid, serverOf(h.env))
	return o
}

// runAs runs the agent's file with {{ROLE}} set to role.
func (h *hostileRun) runAs(t *testing.T, role string) Observation {
	t.Helper()
	o := step(t, h.env, "run_python", map[string]any{"code": strings.ReplaceAll(h.code, "{{ROLE}}", role)})
	noProcesses(t, h.uid, serverOf(h.env))
	return o
}

func (h *hostileRun) write(t *testing.T, path string) Observation {
	t.Helper()
	return step(t, h.env, "write_file", map[string]any{"path": path, "content": h.code})
}

type hostileCase struct {
	file string
	task string
	cfg  func(*Config)
	play func(t *testing.T, h *hostileRun)
}

func wantIn(t *testing.T, what, text string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(text, s) {
			t.Fatalf("%s: want %q in %q", what, s, text)
		}
	}
}

func wantRefused(t *testing.T, o Observation, sub string) {
	t.Helper()
	if !strings.Contains(o.Error, sub) {
		t.Fatalf("want a refusal containing %q, got error %q output %q", sub, o.Error, o.Output)
	}
}

// killUnderLoadRuns is how many times kill_under_load.py runs in one
// episode (5 with -short; WORKBENCH_KILL_UNDER_LOAD_RUNS, when set, says
// how many: scripts/hostile-load.sh runs it 200 times beside busy loops):
// no process of it may outlive any run, however slowly the many exit.
func killUnderLoadRuns() int {
	if n, err := strconv.Atoi(os.Getenv("WORKBENCH_KILL_UNDER_LOAD_RUNS")); err == nil && n > 0 {
		return n
	}
	if testing.Short() {
		return 5
	}
	return 50
}

// python3 is the interpreter of the test's own helper processes.
const python3 = "/usr/bin/python3"

const (
	taskCSV    = "data/csv_region_total"
	taskMedian = "software/median"
)

func submitMedian(t *testing.T, h *hostileRun) Observation {
	t.Helper()
	o := step(t, h.env, "submit", map[string]any{"answer": "done"})
	if !o.Done {
		t.Fatalf("submit did not end the episode: %+v", o)
	}
	return o
}

var hostileCases = []hostileCase{
	{file: "fork_bomb.py", task: taskCSV, play: func(t *testing.T, h *hostileRun) {
		o := h.run(t)
		wantIn(t, "fork bomb", o.Output, "forked")
		n, _ := strconv.Atoi(strings.Fields(strings.SplitN(o.Output, "forked ", 2)[1])[0])
		if n >= sandbox.DefaultLimits.Processes {
			t.Fatalf("forked %d processes, limit %d", n, sandbox.DefaultLimits.Processes)
		}
	}},
	{file: "setsid_daemon.py", task: taskCSV, play: func(t *testing.T, h *hostileRun) {
		wantIn(t, "daemon", h.run(t).Output, "daemon started")
		// Nothing may keep writing after the run: the daemon's file stops.
		time.Sleep(100 * time.Millisecond) // a live daemon would write twice in this time
		noUIDFilesUnder(t, h.uid, "/tmp", true)
	}},
	{file: "sleep_forever.py", task: taskCSV, cfg: func(c *Config) { c.Limits.PythonTimeout = time.Second }, play: func(t *testing.T, h *hostileRun) {
		// It never ends by itself: that the run returned, saying so, is
		// the timeout's kill.
		if o := h.run(t); o.Output != "timed out after 1 s" {
			t.Fatalf("output %q, want the timeout", o.Output)
		}
	}},
	{file: "tmp_litter.py", task: taskCSV, play: func(t *testing.T, h *hostileRun) {
		wantIn(t, "litter", h.run(t).Output, "littered")
		step(t, h.env, "finish", nil)
	}},
	{file: "shadow_symlink.py", task: taskCSV, play: func(t *testing.T, h *hostileRun) {
		wantIn(t, "links", h.run(t).Output, "linked")
		for _, p := range []string{"shadow", "etc/shadow", "target", "etc/passwd"} {
			o := step(t, h.env, "read_file", map[string]any{"path": p})
			wantRefused(t, o, "may not pass through a symlink")
			step(t, h.env, "list_files", nil) // three refusals in a row would end the episode
		}
		wantRefused(t, step(t, h.env, "write_file", map[string]any{"path": "etc/ep3-evil", "content": "x"}), "symlink")
		if _, err := os.Lstat("/etc/ep3-evil"); err == nil {
			t.Fatal("/etc/ep3-evil was created")
		}
	}},
	{file: "hardlink_shadow.py", task: taskCSV, play: func(t *testing.T, h *hostileRun) {
		o := h.run(t)
		wantIn(t, "hardlinks", o.Output, "link refused sh", "link refused tg")
		wantIn(t, "read of a missing link", step(t, h.env, "read_file", map[string]any{"path": "sh"}).Error, "no such file")
	}},
	{file: "chmod_000.py", task: taskCSV, play: func(t *testing.T, h *hostileRun) {
		wantIn(t, "chmod", h.run(t).Output, "locked")
		o := step(t, h.env, "list_files", nil)
		wantIn(t, "listing after chmod 000", o.Output, "sales.csv")
		// Cleanup on reset, with everything locked.
		reset(t, h.env, taskCSV)
	}},
	{file: "deep_tree.py", task: taskCSV, play: func(t *testing.T, h *hostileRun) {
		wantIn(t, "deep tree", h.run(t).Output, "deep 10000")
		wantIn(t, "listing a deep tree", step(t, h.env, "list_files", nil).Output, "sales.csv")
		step(t, h.env, "submit", map[string]any{"answer": "1"})
	}},
	{file: "fifo_solution.py", task: taskMedian, play: func(t *testing.T, h *hostileRun) {
		wantIn(t, "fifo", h.run(t).Output, "fifo planted")
		// No writer ever comes: an open that waited for one would never
		// return, so the refusals are the proof it did not wait.
		wantRefused(t, step(t, h.env, "read_file", map[string]any{"path": "solution.py"}), "is not a regular file")
		wantRefused(t, step(t, h.env, "write_file", map[string]any{"path": "solution.py", "content": "x"}), "cannot open 'solution.py'")
		step(t, h.env, "finish", nil)
	}},
	{file: "fifo_during_grading.py", task: taskMedian, cfg: func(c *Config) { c.Limits.PythonTimeout = time.Second }, play: func(t *testing.T, h *hostileRun) {
		h.write(t, "solution.py")
		o := submitMedian(t, h)
		if o.Metadata["correctness"] != 0.0 {
			t.Fatalf("a solution that changes the workspace while graded got correctness %v", o.Metadata["correctness"])
		}
	}},
	{file: "xattr_state.py", task: taskMedian, play: func(t *testing.T, h *hostileRun) {
		h.write(t, "solution.py")
		// Every case starts without the previous case's xattr, so the
		// correct solution passes them all.
		if o := submitMedian(t, h); o.Metadata["correctness"] != 1.0 {
			t.Fatalf("state passed between cases through an xattr: correctness %v (%s)", o.Metadata["correctness"], o.Output)
		}
	}},
	{file: "tmp_state_between_cases.py", task: taskMedian, play: func(t *testing.T, h *hostileRun) {
		h.write(t, "solution.py")
		if o := submitMedian(t, h); o.Metadata["correctness"] != 1.0 {
			t.Fatalf("state passed between cases through shared tmp: correctness %v (%s)", o.Metadata["correctness"], o.Output)
		}
	}},
	{file: "sysv_ipc_state.py", task: taskMedian, play: func(t *testing.T, h *hostileRun) {
		h.write(t, "solution.py")
		// Every case starts without the previous case's message queue, so
		// the correct solution passes them all.
		if o := submitMedian(t, h); o.Metadata["correctness"] != 1.0 {
			t.Fatalf("state passed between cases through System V IPC: correctness %v (%s)", o.Metadata["correctness"], o.Output)
		}
	}},
	{file: "network_state_between_cases.py", task: taskMedian, play: func(t *testing.T, h *hostileRun) {
		h.write(t, "solution.py")
		// The control: the agent's runs share the episode's network
		// namespace, so the second finds what the first left.
		look := map[string]any{"code": "import solution\nprint('median', solution.median([1, 2, 3]))"}
		wantIn(t, "first run", step(t, h.env, "run_python", look).Output, "median 2\n")
		wantIn(t, "second run", step(t, h.env, "run_python", look).Output, "median -12345\n")
		// Every graded case has a network namespace of its own, so the
		// correct solution passes them all, whatever the run left.
		fs, forked, visible := h.env.ws.fs, int64(0), len(h.env.task.Visible)
		if fs != nil {
			forked = fs.Forked()
		}
		if o := submitMedian(t, h); o.Metadata["correctness"] != 1.0 {
			t.Fatalf("state passed between cases through the network namespace: correctness %v (%s)", o.Metadata["correctness"], o.Output)
		}
		// Through the fork server, every case was forked (none spawned).
		hidden, err := LocalGrader(nil).HiddenInputs(context.Background(), taskMedian)
		if err != nil {
			t.Fatal(err)
		}
		if fs != nil && fs.Forked() != forked+int64(visible+len(hidden)) {
			t.Fatalf("%d of %d graded cases forked (%v)", fs.Forked()-forked, visible+len(hidden), fs.Err())
		}
	}},
	{file: "posix_mq_leak.py", task: taskCSV, play: func(t *testing.T, h *hostileRun) {
		o := h.run(t)
		wantIn(t, "first episode", o.Output, "no queue left")
		if !strings.Contains(o.Output, "queue planted") && !strings.Contains(o.Output, "create refused") {
			t.Fatalf("first episode: %q", o.Output)
		}
		t.Cleanup(func() { unlinkQueue("/wb-hostile-mq-" + h.runID) })
		// A later, unrelated episode under another uid looks for the queue.
		later := laterEpisode(t, h)
		if o := step(t, later, "run_python", map[string]any{"code": h.code}); !strings.Contains(o.Output, "no queue left") || strings.Contains(o.Output, "LEAKED") {
			t.Fatalf("a POSIX message queue outlived its episode: %q", o.Output)
		}
	}},
	{file: "posix_mq_state.py", task: taskMedian, play: func(t *testing.T, h *hostileRun) {
		h.write(t, "solution.py")
		t.Cleanup(func() { unlinkQueue(fmt.Sprintf("/wb-state-%d", h.uid)) })
		// Every case starts without the previous case's queue, so the
		// correct solution passes them all.
		if o := submitMedian(t, h); o.Metadata["correctness"] != 1.0 {
			t.Fatalf("state passed between cases through a POSIX message queue: correctness %v (%s)", o.Metadata["correctness"], o.Output)
		}
	}},
	{file: "shared_dir_litter.py", task: taskCSV, play: func(t *testing.T, h *hostileRun) {
		o := h.run(t)
		// Outside its own tmpfs everything is read-only to episode code: the
		// world-writable directories this test run made and the host's
		// (/run/lock, /var/tmp) included.
		wantIn(t, "first episode", o.Output, "planted in 0 dirs")
		t.Cleanup(func() {
			for _, d := range strings.Fields(o.Output[strings.Index(o.Output, ": ")+2:]) {
				if filepath.IsAbs(d) {
					os.Remove(filepath.Join(d, "wb-hostile-"+h.runID))
					os.RemoveAll(filepath.Join(d, "wb-hostile-"+h.runID+".d"))
				}
			}
		})
		later := laterEpisode(t, h)
		if o := step(t, later, "run_python", map[string]any{"code": h.code}); strings.Contains(o.Output, "FOUND") || !strings.Contains(o.Output, "planted in ") {
			t.Fatalf("files in a world-writable directory outlived their episode: %q", o.Output)
		}
	}},
	{file: "workspace_change_case.py", task: taskMedian, play: func(t *testing.T, h *hostileRun) {
		h.write(t, "solution.py")
		o := step(t, h.env, "run_tests", nil)
		wantIn(t, "run_tests", o.Output, "graded: 0 of 3")
		if o := submitMedian(t, h); o.Metadata["correctness"] != 0.0 || o.Reward > 0.3 {
			t.Fatalf("a solution that changes the workspace got correctness %v reward %v", o.Metadata["correctness"], o.Reward)
		}
	}},
	{file: "read_other_workspace.py", task: taskCSV, play: func(t *testing.T, h *hostileRun) {
		o := h.run(t)
		wantIn(t, "other workspace", o.Output, "denied 3")
		if strings.Contains(o.Output, "ALLOWED") {
			t.Fatalf("reached the other workspace: %s", o.Output)
		}
	}},
	{file: "signal_server.py", task: taskCSV, play: func(t *testing.T, h *hostileRun) {
		o := h.run(t)
		// The server is in no PID namespace the run can name. pid 1 is the
		// run's own init: a spawned run's is the launcher's (not the
		// uid's), a forked run's is the uid's, and the kernel ignores every
		// signal sent it from inside its namespace (it has no handler): the
		// run goes on (kill(-1) finds nothing else to kill either way).
		wantIn(t, "signals", o.Output, fmt.Sprintf("DENIED %d 9 ESRCH", os.Getpid()), "DENIED -1 ESRCH", "after 2", "[exit code 0]")
		if !strings.Contains(o.Output, "DENIED 1 9 EPERM") && (h.env.ws.fs == nil || h.env.ws.fs.Forked() == 0) {
			t.Fatalf("a spawned run's signal to its init was not refused: %s", o.Output)
		}
		if strings.Contains(o.Output, fmt.Sprintf("SENT %d", os.Getpid())) || strings.Contains(o.Output, "SENT -1") {
			t.Fatalf("a signal was delivered: %s", o.Output)
		}
	}},
	{file: "invalid_utf8.py", task: taskCSV, play: func(t *testing.T, h *hostileRun) {
		wantIn(t, "invalid UTF-8", h.run(t).Output, "bad \uFFFD\uFFFD", "end", "err \uFFFD\uFFFD")
		wantIn(t, "listing", step(t, h.env, "list_files", nil).Output, "bad\uFFFDname.txt", "ok.txt")
		wantIn(t, "read", step(t, h.env, "read_file", map[string]any{"path": "ok.txt"}).Output, "\uFFFD\uFFFD")
	}},
	{file: "big_output.py", task: taskCSV, play: func(t *testing.T, h *hostileRun) {
		o := h.run(t)
		if len(o.Output) > 2000 {
			t.Fatalf("output is %d bytes", len(o.Output))
		}
		wantIn(t, "clip", o.Output, "more characters not shown]")
		var more int
		fmt.Sscanf(o.Output[strings.LastIndex(o.Output, "[... ")+len("[... "):], "%d", &more)
		if more < 10_000_000-2000 {
			t.Fatalf("clip says %d more characters, want about 10,000,000", more)
		}
	}},
	{file: "output_flood.py", task: taskCSV, cfg: func(c *Config) { c.Limits.PythonTimeout = 120 * time.Second }, play: func(t *testing.T, h *hostileRun) {
		o := h.run(t)
		wantIn(t, "flood", o.Output, fmt.Sprintf("[stopped: it printed more than %d MiB]", sandbox.DefaultOutputLimit>>20))
		if strings.Contains(o.Output, "timed out") || h.env.stops.last.Reason != results.StopOutputLimit {
			t.Fatalf("not ended by the output limit (stop %s): %.200s", h.env.stops.last, o.Output)
		}
	}},
	{file: "big_file.py", task: taskCSV, play: func(t *testing.T, h *hostileRun) {
		o := h.run(t)
		wantIn(t, "file size", o.Output, "stopped 27") // EFBIG
		var st unix.Stat_t
		err := sandbox.AsUID(h.uid, func() error { return unix.Stat(filepath.Join(h.dir, "huge.bin"), &st) })
		if err != nil || st.Size > sandbox.DefaultLimits.FileSize {
			t.Fatalf("huge.bin: size %d, err %v; limit %d", st.Size, err, sandbox.DefaultLimits.FileSize)
		}
	}},
	{file: "nondumpable_daemon.py", task: taskCSV, play: func(t *testing.T, h *hostileRun) {
		wantIn(t, "hidden daemon", h.run(t).Output, "hidden daemon started")
	}},
	{file: "zombie_leader.py", task: taskCSV, play: func(t *testing.T, h *hostileRun) {
		// h.run checks that no thread of the uid is alive, whatever state
		// its process's leader is in.
		wantIn(t, "zombie leader", h.run(t).Output, "zombie leader started")
		noUIDFilesUnder(t, h.uid, "/tmp", true)
	}},
	{file: "pipe_holder.py", task: taskCSV, play: func(t *testing.T, h *hostileRun) {
		// The child sleeps for ever: a run that waited for the pipe to
		// close would end at the Python timeout, saying "timed out"
		// instead of the parent's exit code.
		wantIn(t, "pipe holder", h.run(t).Output, "parent done", "[exit code 0]")
	}},
	{file: "symlink_write.py", task: taskCSV, play: func(t *testing.T, h *hostileRun) {
		wantIn(t, "plant", h.run(t).Output, "planted")
		for _, p := range []string{"note.txt", "out/ep3-evil", "dangling.txt"} {
			wantRefused(t, step(t, h.env, "write_file", map[string]any{"path": p, "content": "pwned"}), "symlink")
			step(t, h.env, "list_files", nil) // three refusals in a row would end the episode
		}
		if _, err := os.Lstat("/nonexistent-ep3-dangling"); err == nil {
			t.Fatal("the dangling link's target was created")
		}
	}},
	{file: "reserved_planting.py", task: taskMedian, play: func(t *testing.T, h *hostileRun) {
		wantIn(t, "plant", h.run(t).Output, "planted")
		wantIn(t, "run after planting", step(t, h.env, "run_python", map[string]any{"code": "print('still runs')"}).Output, "still runs")
		wantIn(t, "tests after planting", step(t, h.env, "run_tests", nil).Output, "graded: ")
	}},
	{file: "fd_exhaust.py", task: taskCSV, play: func(t *testing.T, h *hostileRun) {
		o := h.run(t)
		wantIn(t, "fds", o.Output, "errno 24")
		var n int
		fmt.Sscanf(strings.SplitN(o.Output, "open files ", 2)[1], "%d", &n)
		if n >= sandbox.DefaultLimits.OpenFiles {
			t.Fatalf("opened %d files, limit %d", n, sandbox.DefaultLimits.OpenFiles)
		}
	}},
	{file: "memory_hog.py", task: taskCSV, play: func(t *testing.T, h *hostileRun) {
		wantIn(t, "memory", h.run(t).Output, "MemoryError")
	}},
	{file: "cpu_spin.py", task: taskCSV, cfg: func(c *Config) { c.Limits.PythonTimeout = time.Second }, play: func(t *testing.T, h *hostileRun) {
		wantIn(t, "spin", h.run(t).Output, "timed out after 1 s")
	}},
	{file: "keyring_state.py", task: taskMedian, play: func(t *testing.T, h *hostileRun) {
		h.write(t, "solution.py")
		// Every case starts without the previous case's key, so the correct
		// solution passes them all.
		if o := submitMedian(t, h); o.Metadata["correctness"] != 1.0 {
			t.Fatalf("state passed between cases through the kernel keyring: correctness %v (%s)", o.Metadata["correctness"], o.Output)
		}
		// A later episode under another uid reads no key the first left.
		later := newEnv(t, Config{})
		reset(t, later, taskCSV)
		if later.ws.uid == h.uid {
			t.Fatalf("the later episode got the same uid %d", h.uid)
		}
		o := step(t, later, "run_python", map[string]any{"code": h.code})
		wantIn(t, "keys of other episodes", o.Output, "read 0 keys of other episodes")
	}},
	{file: "kill_under_load.py", task: taskCSV, cfg: func(c *Config) { c.Limits.MaxSteps = killUnderLoadRuns() + 1 }, play: func(t *testing.T, h *hostileRun) {
		// Load of its own besides the agent's: a busy process (root's, not
		// the uid's) competes with the exiting processes and the kill.
		for range 1 {
			burn := exec.Command(python3, "-c", "while True: pass")
			if err := burn.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { burn.Process.Kill(); burn.Wait() })
		}
		for i := range killUnderLoadRuns() {
			o := h.run(t) // fails the test if the kill gave up
			// On a loaded machine the agent may not finish forking in time;
			// its processes are killed all the same.
			if !strings.Contains(o.Output, "timed out after") {
				wantIn(t, fmt.Sprintf("run %d", i), o.Output, "children ", "[exit code 0]")
			}
		}
	}},
	{file: "vsock_channel.py", task: taskCSV, play: func(t *testing.T, h *hostileRun) {
		// The sender holds its ports while another episode (another uid)
		// looks for them.
		sent := make(chan Observation, 1)
		go func() {
			o, err := h.env.Step(context.Background(), call(t, "run_python", map[string]any{"code": strings.ReplaceAll(h.code, "{{ROLE}}", "send")}))
			if err != nil {
				o.Error = err.Error()
			}
			sent <- o
		}()
		receiver := newEnv(t, Config{})
		reset(t, receiver, taskCSV)
		got := step(t, receiver, "run_python", map[string]any{"code": strings.ReplaceAll(h.code, "{{ROLE}}", "receive")})
		o := <-sent
		if strings.Contains(got.Output, "RECEIVED") || strings.Contains(o.Output, "SENT") {
			t.Fatalf("a vsock channel: sender %q %q, receiver %q", o.Output, o.Error, got.Output)
		}
		wantIn(t, "sender", o.Output, "vsock denied EAFNOSUPPORT")
		wantIn(t, "receiver", got.Output, "vsock denied EAFNOSUPPORT")
	}},
	{file: "interpreter_state.py", task: taskCSV, play: func(t *testing.T, h *hostileRun) {
		wantIn(t, "first look", h.runAs(t, "look").Output, "found []")
		wantIn(t, "plant", h.runAs(t, "plant").Output, "planted")
		if o := h.runAs(t, "look"); !strings.Contains(o.Output, "found []") {
			t.Fatalf("a run saw what the run before it left: %s", o.Output)
		}
	}},
	{file: "fork_server_kill.py", task: taskMedian, play: func(t *testing.T, h *hostileRun) {
		fs := h.env.ws.fs
		template, forked := 0, int64(0)
		if fs != nil {
			// The server is up (a run before that is spawned, beside the
			// template still starting, whose /proc a run of the uid may
			// read then: docs/decisions.md) and a run made the next run's
			// child, init and program; the attack is forked beside them.
			if !fs.WaitReady(context.Background()) {
				t.Fatalf("no fork server: %v", fs.Err())
			}
			step(t, h.env, "run_python", map[string]any{"code": "pass"})
			template, forked = templatePID(t, fs), fs.Forked()
		}
		o := h.run(t)
		if fs != nil && fs.Forked() != forked+1 {
			t.Fatalf("the attack was not forked (%v): %s", fs.Err(), o.Output)
		}
		wantIn(t, "attack", o.Output, "reached []", "[exit code 0]")
		if fs != nil {
			// It found the server's processes, and none of them is touched.
			if strings.Contains(o.Output, "targets 0\n") {
				t.Fatalf("the agent found none of the server's processes: %s", o.Output)
			}
			if got := templatePID(t, fs); got != template {
				t.Fatalf("the template was %d, is %d", template, got)
			}
			for _, pid := range mustPIDs(t, fs.Processes) {
				stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
				if f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])); len(f) < 17 || f[16] != "0" {
					t.Errorf("server process %d reniced: %s", pid, stat)
				}
			}
			// The server dies (killed from outside: nothing of the episode
			// can): the episode goes on with a new one.
			syscall.Kill(template, syscall.SIGKILL)
			waitGone(t, template)
		}
		// At once (spawned while a new template starts), and then forked.
		after := step(t, h.env, "run_python", map[string]any{"code": "print('still runs')"})
		wantIn(t, "a run after (error "+after.Error+")", after.Output, "still runs")
		if fs != nil {
			if !fs.WaitReady(context.Background()) {
				t.Fatalf("no new template: %v", fs.Err())
			}
			forked = fs.Forked()
		}
		solution, err := oracle.Load(taskMedian)
		if err != nil {
			t.Fatal(err)
		}
		step(t, h.env, "write_file", map[string]any{"path": "solution.py", "content": solution})
		wantIn(t, "run_tests", step(t, h.env, "run_tests", nil).Output, "graded: 3 of 3")
		// The test file and 3 cases.
		if fs != nil && (templatePID(t, fs) == template || fs.Forked() != forked+4 || fs.Err() != nil) {
			t.Fatalf("the runs after were not forked from a new template (%d forked, %v)", fs.Forked(), fs.Err())
		}
		if o := submitMedian(t, h); o.Metadata["correctness"] != 1.0 {
			t.Fatalf("after the server died: correctness %v (%s)", o.Metadata["correctness"], o.Output)
		}
	}},
	{file: "grading_poison.py", task: taskMedian, play: func(t *testing.T, h *hostileRun) {
		// Its marks, left by every run, never reach the next run, the
		// test run, its graded cases or the submit's.
		wantIn(t, "first run", h.run(t).Output, "clean 2")
		wantIn(t, "second run", h.run(t).Output, "clean 2")
		h.write(t, "solution.py")
		wantIn(t, "run_tests", step(t, h.env, "run_tests", nil).Output, "graded: 3 of 3")
		if o := submitMedian(t, h); o.Metadata["correctness"] != 1.0 {
			t.Fatalf("grading saw the runs' marks: correctness %v (%s)", o.Metadata["correctness"], o.Output)
		}
	}},
	{file: "tmpfs_fill.py", task: taskCSV, play: func(t *testing.T, h *hostileRun) {
		o := h.run(t)
		wantIn(t, "fill", o.Output, ". stopped ENOSPC", "/tmp stopped ENOSPC", "/dev/shm stopped ENOSPC")
		var n int
		fmt.Sscanf(o.Output[strings.Index(o.Output, "filled ")+len("filled "):], "%d", &n)
		if max := sandboxtest.Shared(t).Config().EpisodeBytes / sandbox.DefaultLimits.FileSize; int64(n) > max {
			t.Fatalf("%d files of %d bytes in an episode's tmpfs of %d", n, sandbox.DefaultLimits.FileSize, sandboxtest.Shared(t).Config().EpisodeBytes)
		}
		// Another episode starts and runs meanwhile, and the next reset of
		// this one works.
		other := newEnv(t, Config{})
		reset(t, other, taskCSV)
		wantIn(t, "another episode", step(t, other, "run_python", map[string]any{"code": "print('ok')"}).Output, "ok")
		reset(t, h.env, taskCSV)
		wantIn(t, "after the reset", step(t, h.env, "run_python", map[string]any{"code": "import os; print(os.path.exists('fill-0'), os.path.exists('sales.csv'), os.listdir('/tmp'))"}).Output, "False True []")
	}},
	{file: "escape_home.py", task: taskCSV, play: func(t *testing.T, h *hostileRun) {
		o := h.run(t)
		wantIn(t, "escape", o.Output, "denied 5")
		// The server's side of the workspace directory stays empty: the
		// workspace is a mount only the episode's namespace has.
		if entries, err := os.ReadDir(sandboxtest.Shared(t).Config().WorkspaceDir); err != nil || len(entries) != 0 {
			t.Fatalf("the server's workspace directory holds %v (%v)", entries, err)
		}
	}},
}

// TestHostileAgents runs every agent in testdata/agents through a real
// episode as root and asserts containment after the attack and after
// cleanup.
func TestHostileAgents(t *testing.T) {
	requireRoot(t)
	dir := filepath.Join("..", "..", "testdata", "agents")
	files, err := filepath.Glob(filepath.Join(dir, "*.py"))
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, c := range hostileCases {
		known[c.file] = true
	}
	for _, f := range files {
		if !known[filepath.Base(f)] {
			t.Errorf("testdata/agents/%s has no case in hostileCases", filepath.Base(f))
		}
	}
	if len(hostileCases) < 20 {
		t.Errorf("%d hostile agents, want at least 20", len(hostileCases))
	}

	target := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(target, []byte("target file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Dir(target), 0o755)
	os.Chmod(filepath.Dir(filepath.Dir(target)), 0o755)
	shadowBefore := fileHash(t, "/etc/shadow")
	t.Cleanup(func() {
		if got := fileHash(t, "/etc/shadow"); got != shadowBefore {
			t.Errorf("/etc/shadow changed")
		}
		if got, _ := os.ReadFile(target); string(got) != "target file\n" {
			t.Errorf("the root-owned target changed: %q", got)
		}
	})

	// A second live episode whose workspace the agents may try to reach: in
	// namespaces only through this process's descriptor of it.
	other := newEnv(t, Config{})
	reset(t, other, taskCSV)
	otherWS := other.ws.dir
	if rest, ok := strings.CutPrefix(otherWS, "/proc/self/"); ok {
		otherWS = fmt.Sprintf("/proc/%d/%s", os.Getpid(), rest)
	}

	// Every agent through the fork server (the default) and again with
	// every run spawned (the fallback).
	for _, mode := range []struct {
		name  string
		spawn bool
	}{{"forked", false}, {"spawned", true}} {
		for _, c := range hostileCases {
			runHostileCase(t, dir, mode.name, mode.spawn, c, otherWS, target, other)
		}
	}
}

// runHostileCase runs one agent of TestHostileAgents in a subtest.
func runHostileCase(t *testing.T, dir, mode string, spawn bool, c hostileCase, otherWS, target string, other *Environment) {
	t.Run(mode+"/"+strings.TrimSuffix(c.file, ".py"), func(t *testing.T) {
		t.Parallel()
		src, err := os.ReadFile(filepath.Join(dir, c.file))
		if err != nil {
			t.Fatal(err)
		}
		runID := fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())
		code := strings.NewReplacer("{{OTHER_WS}}", otherWS, "{{SERVER_PID}}", strconv.Itoa(os.Getpid()),
			"{{TARGET}}", target, "{{RUN_ID}}", runID, "{{WORKSPACE}}", sandboxtest.Shared(t).Config().WorkspaceDir).Replace(string(src))
		cfg := Config{Sandbox: sandboxtest.Shared(t), NoForkServer: spawn}
		if c.cfg != nil {
			c.cfg(&cfg)
		}
		env, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var released []int
		env.testHookBeforeRelease = func(uid int) {
			assertContained(t, uid)
			released = append(released, uid)
		}
		reset(t, env, c.task)
		h := &hostileRun{env: env, code: code, runID: runID, uid: env.ws.uid, dir: env.ws.dir}
		c.play(t, h)
		if env.ws != nil && env.ws.fs != nil && env.ws.fs.Err() != nil {
			t.Errorf("the fork server stopped serving: %v", env.ws.fs.Err())
		}
		if err := env.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if len(released) == 0 || released[0] != h.uid {
			t.Fatalf("uid %d was not released through cleanup (released %v)", h.uid, released)
		}
		assertUIDFree(t, env.cfg.Sandbox.Pool(), h.uid)
		// The other episode is untouched (looked at as its uid: root
		// may lack DAC_OVERRIDE, as in a workspace container).
		sandbox.AsUID(other.ws.uid, func() error {
			if _, err := os.Stat(filepath.Join(otherWS, "sales.csv")); err != nil {
				t.Errorf("the other episode's workspace lost sales.csv: %v", err)
			}
			if _, err := os.Lstat(filepath.Join(otherWS, "planted.txt")); err == nil {
				t.Errorf("a file was planted in the other episode's workspace")
			}
			return nil
		})
	})
}

// templatePID is the pid of fs's template (pid 2 of its PID namespace).
func templatePID(t *testing.T, fs *sandbox.ForkServer) int {
	t.Helper()
	for _, pid := range mustPIDs(t, fs.Processes) {
		status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		for _, l := range strings.Split(string(status), "\n") {
			if f := strings.Fields(l); len(f) == 3 && f[0] == "NSpid:" && f[2] == "2" { // outermost of the server's
				return pid
			}
		}
	}
	t.Fatal("no fork server template")
	return 0
}

func mustPIDs(t *testing.T, list func() ([]int, error)) []int {
	t.Helper()
	pids, err := list()
	if err != nil {
		t.Fatal(err)
	}
	return pids
}

// waitGone waits until pid is gone.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for i := 0; ; i++ {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			return
		}
		if i == 1000 {
			t.Fatalf("process %d did not end", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// laterEpisode ends h's episode (its uid is cleaned up and released) and
// starts an unrelated one, on another uid, that the test closes.
func laterEpisode(t *testing.T, h *hostileRun) *Environment {
	t.Helper()
	// Holding a uid keeps the pool's rotation from handing h's out again.
	later := newEnv(t, Config{})
	reset(t, later, taskCSV)
	reset(t, h.env, taskCSV)
	if later.ws.uid == h.uid {
		t.Fatalf("the later episode got the same uid %d", h.uid)
	}
	return later
}

// assertContained checks that nothing of uid is left: no process, no file
// under the shared tmp directories (the test's own world-writable
// directory and /run/lock among them), no System V IPC object, no POSIX
// message queue.
func assertContained(t *testing.T, uid int) {
	t.Helper()
	noProcesses(t, uid, nil)
	for _, d := range []string{"/tmp", "/var/tmp", "/dev/shm", "/run/lock", extraSharedDir} {
		if d != "" {
			noUIDFilesUnder(t, uid, d, false)
		}
	}
	noIPCObjects(t, uid)
	noPOSIXQueues(t, uid)
}

// noPOSIXQueues fails on any POSIX message queue uid owns, seen through a
// mount of this IPC namespace's mqueue file system of the test's own: a
// private one (fsopen, as root on a host) or /dev/mqueue.
func noPOSIXQueues(t *testing.T, uid int) {
	t.Helper()
	dir, err := openQueueDir()
	if err != nil {
		t.Fatalf("no view of the POSIX message queues: %v", err)
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		var st unix.Stat_t
		if unix.Fstatat(int(dir.Fd()), n, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && int(st.Uid) == uid {
			t.Errorf("POSIX message queue /%s of uid %d left", n, uid)
		}
	}
}

func openQueueDir() (*os.File, error) {
	fsfd, err := unix.Fsopen("mqueue", unix.FSOPEN_CLOEXEC)
	if err == nil {
		defer unix.Close(fsfd)
		if err := unix.FsconfigCreate(fsfd); err != nil {
			return nil, err
		}
		mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, 0)
		if err != nil {
			return nil, err
		}
		defer unix.Close(mfd)
		// A mount fd is a path; the directory is opened through it.
		fd, err := unix.Openat(mfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, err
		}
		return os.NewFile(uintptr(fd), "mqueue"), nil
	}
	return os.Open("/dev/mqueue")
}

// unlinkQueue removes a queue a failed test left (mq_unlink as root).
func unlinkQueue(name string) {
	p, err := unix.BytePtrFromString(strings.TrimPrefix(name, "/"))
	if err == nil {
		unix.Syscall(unix.SYS_MQ_UNLINK, uintptr(unsafe.Pointer(p)), 0, 0)
	}
}

// noIPCObjects fails on any System V IPC object whose owner or creator is
// uid: it would outlive the episode, holding memory or data.
func noIPCObjects(t *testing.T, uid int) {
	t.Helper()
	for _, kind := range []string{"shm", "msg", "sem"} {
		data, err := os.ReadFile("/proc/sysvipc/" + kind)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		header := strings.Fields(lines[0])
		for _, line := range lines[1:] {
			f := strings.Fields(line)
			for i, col := range header {
				if (col == "uid" || col == "cuid") && i < len(f) && f[i] == strconv.Itoa(uid) {
					t.Errorf("System V %s object of uid %d left: %s", kind, uid, line)
					break
				}
			}
		}
	}
}

// serverOf returns the running episode's fork server (nil without one):
// its own processes (the template and its servers, each the uid's, none
// of them running agent code) are alive between runs.
func serverOf(env *Environment) *sandbox.ForkServer {
	if env.ws == nil {
		return nil
	}
	return env.ws.fs
}

// noProcesses fails on any live process or thread of uid but those of the
// episode's fork server (server; nil when there must be none at all).
func noProcesses(t *testing.T, uid int, server *sandbox.ForkServer) {
	t.Helper()
	pids, err := sandbox.Processes(uid)
	var owns func(int) bool
	if server != nil {
		pids, err = server.RunProcesses()
		owns = server.Owns
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(pids) > 0 {
		t.Errorf("processes of uid %d left: %v", uid, pids)
		for _, pid := range pids {
			t.Errorf("%s", describeProcess(pid))
		}
	}
	if tids := liveTasks(t, uid, owns); len(tids) > 0 {
		t.Errorf("threads of uid %d left: %v", uid, tids)
	}
}

// describeProcess says what a leftover process is (its command line, its
// parent's, and the status lines that tell who made it), for a failure
// message: a process of the uid that the episode did not start names the
// test or server that did.
func describeProcess(pid int) string {
	var b strings.Builder
	for p, i := pid, 0; p > 1 && i < 3; i++ {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", p))
		fmt.Fprintf(&b, "pid %d: %q", p, strings.ReplaceAll(string(cmdline), "\x00", " "))
		next := 0
		for _, line := range strings.Split(string(status), "\n") {
			f := strings.Fields(line)
			if len(f) > 1 && (f[0] == "Name:" || f[0] == "State:" || f[0] == "Uid:" || f[0] == "PPid:" || f[0] == "Threads:" || f[0] == "NoNewPrivs:") {
				fmt.Fprintf(&b, " %s", line)
			}
			if len(f) > 1 && f[0] == "PPid:" {
				next, _ = strconv.Atoi(f[1])
			}
		}
		b.WriteString("\n")
		p = next
	}
	return b.String()
}

// liveTasks returns "pid/tid" of every thread not dead or a zombie whose
// uids include uid, read from /proc/<pid>/task/<tid>/status: a check that
// does not share sandbox.Processes' view of a process as its leader.
func liveTasks(t *testing.T, uid int, server func(pid int) bool) []string {
	t.Helper()
	procs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	want := strconv.Itoa(uid)
	var live []string
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || server != nil && server(pid) {
			continue
		}
		tasks, _ := os.ReadDir(filepath.Join("/proc", p.Name(), "task"))
		for _, task := range tasks {
			status, err := os.ReadFile(filepath.Join("/proc", p.Name(), "task", task.Name(), "status"))
			if err != nil {
				continue
			}
			alive, mine := true, false
			for _, line := range strings.Split(string(status), "\n") {
				f := strings.Fields(line)
				switch {
				case len(f) > 1 && f[0] == "State:":
					alive = f[1] != "Z" && f[1] != "X"
				case len(f) > 1 && f[0] == "Uid:":
					for _, id := range f[1:] {
						mine = mine || id == want
					}
				}
			}
			if alive && mine {
				live = append(live, p.Name()+"/"+task.Name())
			}
		}
	}
	return live
}

// noUIDFilesUnder walks dir as root and fails on any entry uid owns
// (allowed: only a "daemon-alive" file, when daemonFileOK, whose size must
// not grow).
func noUIDFilesUnder(t *testing.T, uid int, dir string, daemonFileOK bool) {
	t.Helper()
	var found []string
	sizes := map[string]int64{}
	walk := func() {
		found = found[:0]
		sandbox.Walk(dir, func(*sandbox.Entry) bool { return true }, false, func(e *sandbox.Entry) error {
			if !e.Left && int(e.Stat.Uid) == uid {
				if daemonFileOK && e.Name == "daemon-alive" {
					if old, ok := sizes[e.Rel]; ok && old != e.Stat.Size {
						t.Errorf("%s/%s is still growing: a daemon survived", dir, e.Rel)
					}
					sizes[e.Rel] = e.Stat.Size
					return nil
				}
				found = append(found, e.Rel)
			}
			return nil
		})
	}
	walk()
	if daemonFileOK {
		time.Sleep(150 * time.Millisecond) // the daemon wrote every 50 ms
		walk()
	}
	if len(found) > 0 {
		t.Errorf("files of uid %d left under %s: %v", uid, dir, found)
	}
}

// assertUIDFree checks that this process no longer holds uid's lock: not
// in the pool, and no descriptor of this process open on the uid's lock
// file (the pool's lock lives as long as its descriptor). A flock line of
// this pid may outlast it: a child another episode of this process is
// starting holds a copy of every descriptor between its fork and its exec
// (which closes them, all being close-on-exec), for as long as a loaded
// machine keeps it from running. That copy is not the pool's, so it is
// not waited for.
func assertUIDFree(t *testing.T, pool *sandbox.Pool, uid int) {
	t.Helper()
	if pool.Holds(uid) {
		t.Fatalf("the pool still holds uid %d", uid)
	}
	lock, err := os.Stat(filepath.Join(pool.Dir(), strconv.Itoa(uid)))
	if err != nil {
		t.Fatal(err)
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		if fi, err := os.Stat(filepath.Join("/proc/self/fd", fd.Name())); err == nil && os.SameFile(fi, lock) {
			t.Fatalf("this process still has uid %d's lock file open (descriptor %s): %s", uid, fd.Name(), lockLine(t, fi.Sys().(*syscall.Stat_t).Ino))
		}
	}
}

// lockLine returns the /proc/locks line of a flock this process holds on
// the file with inode ino, "" when there is none.
func lockLine(t *testing.T, ino uint64) string {
	t.Helper()
	f, err := os.Open("/proc/locks")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	inode := ":" + strconv.FormatUint(ino, 10)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		// "1: FLOCK ADVISORY WRITE <pid> <maj>:<min>:<inode> 0 EOF"
		if len(fields) >= 6 && fields[1] == "FLOCK" && strings.HasSuffix(fields[5], inode) && fields[4] == strconv.Itoa(os.Getpid()) {
			return sc.Text()
		}
	}
	return ""
}

func fileHash(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

var _ = context.Background
