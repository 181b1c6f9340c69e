package agentpen_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

var demoInterrupts = flag.Int("demo.interrupts", 6, "how many times TestDemo interrupts scripts/demo.sh at a random moment")

// demoResult is result.json (schema agentpen.demo.v1), as
// testdata/clients/launcher_demo.py documents it.
type demoResult struct {
	Schema     string `json:"schema"`
	OK         bool   `json:"ok"`
	CampaignID string `json:"campaign_id"`
	Workspaces []struct {
		AgentID string  `json:"agent_id"`
		TaskID  string  `json:"task_id"`
		Reward  float64 `json:"reward"`
		Steps   int     `json:"steps"`
		Error   string  `json:"error"`
	} `json:"workspaces"`
	Attestation struct {
		OK     bool   `json:"ok"`
		Report string `json:"report"`
	} `json:"attestation"`
	Cleanup struct {
		Status string `json:"status"`
		Report string `json:"report"`
		Error  string `json:"error"`
	} `json:"cleanup"`
}

// demoRun is one run of scripts/demo.sh in a fresh checkout.
type demoRun struct {
	campaign string // the --campaign it was given
	tmp      string // its TMPDIR: the state root is the agentpen-demo.* in it
	mark     string // an environment variable every process it starts inherits
	cmd      *exec.Cmd
	// What it printed, read when it exited.
	outFile, errFile *os.File
	stdout, stderr   bytes.Buffer
}

// startDemo starts scripts/demo.sh in checkout with args after --campaign,
// in a process group of its own (as a shell's job is: a terminal's ^C goes
// to the group).
func startDemo(t *testing.T, checkout, name string, args ...string) *demoRun {
	t.Helper()
	r := &demoRun{campaign: name + "-" + randomHex(t, 4), tmp: t.TempDir(), mark: "AGENTPEN_DEMO_TEST_MARK=" + randomHex(t, 8)}
	r.cmd = exec.Command(filepath.Join(checkout, "scripts", "demo.sh"), append([]string{"--campaign", r.campaign}, args...)...)
	r.cmd.Env = append(os.Environ(), "TMPDIR="+r.tmp, r.mark)
	// Files, not pipes: a process the script leaves behind holding its
	// output must not keep wait from returning (leftovers reports it).
	for _, f := range []**os.File{&r.outFile, &r.errFile} {
		var err error
		if *f, err = os.CreateTemp(r.tmp, "demo.out.*"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { (*f).Close() })
	}
	r.cmd.Stdout, r.cmd.Stderr = r.outFile, r.errFile
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if n := r.leftovers(t); n != "" {
		t.Fatalf("before the run: %s", n)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// A test that stops early still removes what the run left.
	t.Cleanup(func() {
		if left := r.leftovers(t); left != "" {
			t.Errorf("left by the run of %s: %s", r.campaign, left)
		}
	})
	return r
}

// wait waits for the script to exit (the suite's -timeout bounds it) and
// returns its status: the exit code, or 128+n when a signal killed it.
func (r *demoRun) wait(t *testing.T) int {
	t.Helper()
	err := r.cmd.Wait()
	for f, b := range map[*os.File]*bytes.Buffer{r.outFile: &r.stdout, r.errFile: &r.stderr} {
		out, rerr := os.ReadFile(f.Name())
		if rerr != nil {
			t.Fatal(rerr)
		}
		b.Write(out)
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	t.Fatalf("demo.sh: %v", err)
	return -1
}

// leftovers says what of the run is still there: processes that inherited
// its mark, and containers or networks on the daemon carrying its
// campaign's label ("" when nothing). Whatever it finds it also removes
// (processes by pid, the campaign by agentpen down), so a failing run
// leaves nothing for the next.
func (r *demoRun) leftovers(t *testing.T) string {
	t.Helper()
	var found []string
	for _, pid := range markedProcesses(t, r.mark) {
		found = append(found, fmt.Sprintf("process %d (%s)", pid, cmdline(pid)))
		syscall.Kill(pid, syscall.SIGKILL)
	}
	label := campaign.LabelCampaign + "=" + r.campaign
	for _, q := range [][]string{{"ps", "-aq"}, {"network", "ls", "-q"}} {
		out, err := exec.Command("docker", append(q, "--filter", "label="+label)...).Output()
		if err != nil {
			t.Fatalf("docker %v: %v", q, err)
		}
		for _, id := range strings.Fields(string(out)) {
			found = append(found, fmt.Sprintf("docker %s %s labelled %s", q[0], id, label))
		}
	}
	if len(found) > 0 {
		states, _ := filepath.Glob(filepath.Join(r.tmp, "agentpen-demo.*"))
		for _, st := range states {
			down := exec.Command(filepath.Join(filepath.Dir(filepath.Dir(r.cmd.Path)), "bin", "agentpen"), "down", "--state-root", st, r.campaign)
			if out, err := down.CombinedOutput(); err != nil {
				t.Logf("removing the leftovers: agentpen down: %v\n%s", err, out)
			}
		}
	}
	return strings.Join(found, "; ")
}

// markedProcesses are the pids whose environment holds mark.
func markedProcesses(t *testing.T, mark string) []int {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", d.Name(), "environ"))
		if err != nil {
			continue // gone, or a zombie (nothing left of it but its pid)
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if string(kv) == mark {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.TrimSpace(string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
}

func randomHex(t *testing.T, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// demoTableRow is a row of the table make run prints.
var demoTableRow = regexp.MustCompile(`(?m)^(agent-[0-9a-f]{24}) +(\S+) +([0-9.]+) +(\d+)$`)

// TestDemo runs scripts/demo.sh (make run's job) against the real daemon
// in a fresh checkout: once to the end (exit 0, the table, cleanup
// verified, result.json agreeing), once with an oracle that earns less
// than 1.0 (exit 1, --json saying why, the campaign removed all the same),
// then -demo.interrupts times interrupted at a random moment, by SIGTERM
// or SIGINT to the script or SIGINT to its process group (a terminal's
// ^C). After every run no process it started and no container or network
// of its campaign may be left. The moments are drawn one from each of
// equal slices of 1.2 times the first run's duration (measured here, so a
// loaded machine stretches the slices with the runs), so every phase is
// hit: before the service, the bring-up, the episodes, the delete, the
// cleanup and after.
func TestDemo(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireDocker(t)
	for _, tool := range []string{"bash", "openssl", "python3", "docker"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed to run scripts/demo.sh: %v", tool, err)
		}
	}
	checkout := freshCheckout(t, t.TempDir())

	start := time.Now()
	r := startDemo(t, checkout, "demo-test-ok")
	code := r.wait(t)
	full := time.Since(start)
	if left := r.leftovers(t); left != "" {
		t.Errorf("left after a run to the end: %s", left)
	}
	if code != 0 {
		t.Fatalf("demo.sh exited %d, want 0\nstdout:\n%s\nstderr:\n%s", code, &r.stdout, &r.stderr)
	}
	out := r.stdout.String()
	rows := demoTableRow.FindAllStringSubmatch(out, -1)
	if !strings.HasPrefix(out, "workspace ") || len(rows) != 3 || !strings.Contains(out, "\ncleanup:            verified\n") {
		t.Fatalf("the table (a header, three rows) and the cleanup line are missing:\n%s", out)
	}
	m := regexp.MustCompile(`(?m)^result \(JSON\): +(\S+)$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no result (JSON) line:\n%s", out)
	}
	res := readDemoResult(t, m[1])
	if !res.OK || res.Schema != "agentpen.demo.v1" || res.CampaignID != r.campaign || !res.Attestation.OK || res.Cleanup.Status != "verified" || len(res.Workspaces) != len(rows) {
		t.Errorf("result.json disagrees with a run that ended well: %+v", res)
	}
	// The reports it names are the campaign's files.
	for name, path := range map[string]string{"attestation": res.Attestation.Report, "cleanup": res.Cleanup.Report} {
		if _, err := os.Stat(path); path == "" || err != nil {
			t.Errorf("the %s report %q: %v", name, path, err)
		}
	}
	for i, w := range res.Workspaces {
		if w.AgentID != rows[i][1] || w.TaskID != rows[i][2] || fmt.Sprintf("%.1f", w.Reward) != rows[i][3] || strconv.Itoa(w.Steps) != rows[i][4] || w.Reward != 1 {
			t.Errorf("result.json workspace %d %+v, the table's row %q", i, w, rows[i][0])
		}
	}
	t.Logf("a run to the end took %v", full.Round(time.Millisecond))

	t.Run("reward_below_one", func(t *testing.T) {
		oracles := t.TempDir()
		if err := os.CopyFS(oracles, os.DirFS(filepath.Join(checkout, "testdata", "oracles"))); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(oracles, "software", "median.py"), []byte("def median(xs):\n    return 0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := startDemo(t, checkout, "demo-test-wrong", "--json", "--oracles", oracles)
		code := r.wait(t)
		if left := r.leftovers(t); left != "" {
			t.Errorf("left after a run whose episode failed: %s", left)
		}
		var res demoResult
		if err := json.Unmarshal(r.stdout.Bytes(), &res); err != nil {
			t.Fatalf("--json printed no result: %v\nstdout:\n%s\nstderr:\n%s", err, &r.stdout, &r.stderr)
		}
		if code != 1 || res.OK || res.Cleanup.Status != "verified" || len(res.Workspaces) != 3 || res.Workspaces[0].Reward >= 1 || res.Workspaces[1].Reward != 1 {
			t.Errorf("exit %d, result %+v: want exit 1, ok false, the median episode under 1.0, the others 1.0, cleanup verified\nstderr:\n%s", code, res, &r.stderr)
		}
	})

	t.Run("interrupted", func(t *testing.T) {
		type kill struct {
			name  string
			sig   syscall.Signal
			group bool
		}
		kills := []kill{{"SIGTERM", syscall.SIGTERM, false}, {"SIGINT", syscall.SIGINT, false}, {"^C (SIGINT to the group)", syscall.SIGINT, true}}
		n := *demoInterrupts
		span := full * 12 / 10
		for i := range n {
			k := kills[i%len(kills)]
			slice := span / time.Duration(n)
			delay := slice*time.Duration(i) + time.Duration(mrand.Int64N(int64(slice)))
			r := startDemo(t, checkout, "demo-test-sig")
			time.Sleep(delay)
			target := r.cmd.Process.Pid
			if k.group {
				target = -target
			}
			if err := syscall.Kill(target, k.sig); err != nil && !errors.Is(err, syscall.ESRCH) {
				t.Fatal(err)
			}
			code := r.wait(t)
			left := r.leftovers(t)
			t.Logf("run %d: %s after %v: exit %d", i, k.name, delay.Round(time.Millisecond), code)
			switch {
			case left != "":
				t.Errorf("run %d, %s after %v: left %s\nstderr:\n%s", i, k.name, delay, left, &r.stderr)
			case code == 0:
				// It had ended (or was ending, the signal noted) before the signal.
				if !strings.Contains(r.stdout.String(), "\ncleanup:            verified\n") {
					t.Errorf("run %d: exit 0 without the cleanup line:\n%s", i, &r.stdout)
				}
			case code != 128+int(k.sig):
				t.Errorf("run %d, %s after %v: exit %d, want %d (or 0 when it had ended)\nstderr:\n%s", i, k.name, delay, code, 128+int(k.sig), &r.stderr)
			case !strings.Contains(r.stderr.String(), "cleanup: verified") && strings.Contains(r.stderr.String(), "agentpen serve on"):
				t.Errorf("run %d: interrupted after the service started, without saying the cleanup was verified:\n%s", i, &r.stderr)
			}
		}
	})

	// A user who holds ^C down: SIGINT to the group every 30 ms from a
	// random moment until the script exits. The cleanup's own commands
	// run while the signals keep coming and must not be cut short.
	t.Run("held_ctrl_c", func(t *testing.T) {
		for i := range max(*demoInterrupts/2, 1) {
			delay := time.Duration(mrand.Int64N(int64(full)))
			r := startDemo(t, checkout, "demo-test-held")
			time.Sleep(delay)
			done := make(chan struct{})
			go func() {
				for {
					if err := syscall.Kill(-r.cmd.Process.Pid, syscall.SIGINT); err != nil {
						return
					}
					select {
					case <-done:
						return
					case <-time.After(30 * time.Millisecond):
					}
				}
			}()
			code := r.wait(t)
			close(done)
			left := r.leftovers(t)
			t.Logf("run %d: ^C held from %v: exit %d", i, delay.Round(time.Millisecond), code)
			switch {
			case left != "":
				t.Errorf("run %d, ^C held from %v: left %s\nstderr:\n%s", i, delay, left, &r.stderr)
			case code != 0 && code != 130:
				t.Errorf("run %d, ^C held from %v: exit %d, want 130 (or 0 when it had ended)\nstderr:\n%s", i, delay, code, &r.stderr)
			case code == 130 && strings.Contains(r.stderr.String(), "agentpen serve on") && !strings.Contains(r.stderr.String(), "cleanup: verified"):
				t.Errorf("run %d: interrupted after the service started, without saying the cleanup was verified:\n%s", i, &r.stderr)
			}
		}
	})
}

func readDemoResult(t *testing.T, path string) demoResult {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var res demoResult
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return res
}
