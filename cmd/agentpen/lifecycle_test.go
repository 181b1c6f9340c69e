package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/internal/testkit/workbenchtest"
	"github.com/agentpen/agentpen/store"
	wbclient "github.com/agentpen/agentpen/workbench/client"
	"golang.org/x/sys/unix"
)

// TestMain lets the test binary be agentpen itself (runMain, signals and
// exit status included) for the interruption tests.
func TestMain(m *testing.M) {
	if os.Getenv("AGENTPEN_TEST_MAIN") == "1" {
		os.Exit(runMain(os.Args[1:], os.Getenv))
	}
	os.Exit(m.Run())
}

// cliEnv is a real-daemon environment for run: DOCKER_HOST, a state root
// and the API key.
type cliEnv struct {
	t     *testing.T
	env   map[string]string
	dir   string
	ids   map[string]string // image ref -> id
	state string
}

func newCLIEnv(t *testing.T) *cliEnv {
	t.Helper()
	host := testenv.RequireDocker(t)
	d := connectReal(t, host)
	list, err := d.Images(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{} // agentpen's local images: repo:tag -> id
	for _, img := range list {
		for _, tag := range img.Tags {
			if strings.HasPrefix(tag, "agentpen/") {
				ids[tag] = img.ID
			}
		}
	}
	dir := t.TempDir()
	e := &cliEnv{t: t, dir: dir, ids: ids, state: filepath.Join(dir, "agentpen"),
		env: map[string]string{"DOCKER_HOST": host, "XDG_STATE_HOME": dir, "AGENTPEN_API_KEY": "cli-test-key-0123456789abcdef"}}
	return e
}

func (e *cliEnv) getenv(k string) string { return e.env[k] }

// run runs agentpen with args and returns stdout, stderr and the exit
// status main would use. The test's context is not passed on: it is
// cancelled before the test's cleanups run, and a cleanup's down must
// still remove what a failed test left.
func (e *cliEnv) run(args ...string) (string, string, int) {
	var out, errb bytes.Buffer
	err := run(context.WithoutCancel(e.t.Context()), args, &out, &errb, e.getenv)
	if msg := messageFor(err); msg != "" {
		errb.WriteString(msg + "\n")
	}
	return out.String(), errb.String(), exitCode(err)
}

func messageFor(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// spec writes a campaign spec of the workbench grader and n workbench
// workspaces and returns its path.
func (e *cliEnv) spec(id string, n int) string {
	s := campaign.CampaignSpec{
		CampaignID: id,
		Server:     campaign.ServerSpec{Image: e.ids[testenv.WorkbenchImage()]},
	}
	for i := range n {
		s.Workspaces = append(s.Workspaces, campaign.WorkspaceSpec{TaskID: "data/csv_region_total", AttemptID: fmt.Sprint(i), Image: e.ids[testenv.WorkbenchImage()]})
	}
	b, _ := json.Marshal(s)
	f := filepath.Join(e.dir, id+".json")
	if err := os.WriteFile(f, b, 0o600); err != nil {
		e.t.Fatal(err)
	}
	return f
}

func TestCLICampaignLifecycle(t *testing.T) {
	e := newCLIEnv(t)
	id := fmt.Sprintf("cli-life-%d", time.Now().UnixNano())
	spec := e.spec(id, 1)
	t.Cleanup(func() { e.run("down", id) })

	out, errs, code := e.run("up", spec)
	if code != 0 {
		t.Fatalf("up: exit %d\n%s", code, errs)
	}
	// Progress and the summary on stderr, one line per step (not a
	// terminal); stdout is the JSON alone.
	for _, want := range []string{"created 1/1 server ", "created 1/1 workspace ", "ready 1/1 workspace ", "attesting\n",
		"campaign " + id + " is up: generation 1, 1 workspaces, topology none, in ", "attestation     ok, ", "take it down    agentpen down " + id + "\n"} {
		if !strings.Contains(errs, want) {
			t.Errorf("up's stderr lacks %q:\n%s", want, errs)
		}
	}
	if !json.Valid([]byte(out)) {
		t.Fatalf("up's stdout is not JSON alone:\n%s", out)
	}
	// The same id again: a conflict, exit 4, nothing created.
	if _, errs, code := e.run("up", spec); code != exitConflict || !strings.Contains(errs, "already exists") {
		t.Fatalf("second up: exit %d, want %d\n%s", code, exitConflict, errs)
	}
	// While it is up, verification fails (exit 1) and ls says up.
	if out, _, code := e.run("cleanup", "verify", id); code != exitFailure || !strings.Contains(out, "failed") {
		t.Fatalf("verify while up: exit %d\n%s", code, out)
	}
	out, errs, code = e.run("ls", "--json")
	if code != 0 {
		t.Fatalf("ls: exit %d\n%s", code, errs)
	}
	var entries []lsEntry
	if err := json.Unmarshal([]byte(out), &entries); err != nil || len(entries) != 1 || entries[0].State != "ready" || entries[0].LiveContainers != 2 || entries[0].Generation != 1 ||
		len(entries[0].Workspaces) != 1 || !strings.HasSuffix(entries[0].Workspaces[0].Socket, "/"+entries[0].Workspaces[0].AgentID+"/wb.sock") {
		t.Fatalf("ls while up: %v %s", err, out)
	}
	// One oracle episode over the workspace's socket: down collects its
	// result, and agentpen results prints it after the campaign is gone.
	ws := entries[0].Workspaces[0]
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	sess, err := wbclient.Dial(ctx, ws.Socket)
	if err != nil {
		t.Fatal(err)
	}
	if err := workbenchtest.PlayOracle(ctx, sess, ws.TaskID); err != nil {
		t.Fatal(err)
	}
	sess.Close()
	cancel()
	// Down: verified, exit 0; the report is on disk.
	out, errs, code = e.run("down", id, "--json")
	if code != 0 {
		t.Fatalf("down: exit %d\n%s%s", code, out, errs)
	}
	var rep struct {
		Status  string
		Removed []struct{ Kind, ID string }
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Status != "verified" || len(rep.Removed) != 4 {
		t.Fatalf("down report: %v %s", err, out)
	}
	if _, err := os.Stat(filepath.Join(entries[0].StateDir, "cleanup-1-1.json")); err != nil {
		t.Fatalf("cleanup report: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(errs), "\n") {
		if !strings.Contains(line, "removed") {
			t.Errorf("a progress line that is not a removal: %q", line)
		}
	}
	if out, _, code := e.run("cleanup", "verify", id); code != 0 || !strings.Contains(out, "verified") {
		t.Fatalf("verify after down: exit %d\n%s", code, out)
	}
	out, errs, code = e.run("results", id, "--json")
	var rs []store.Result
	if err := json.Unmarshal([]byte(out), &rs); code != 0 || err != nil || len(rs) != 1 || rs[0].Reward != 1 || rs[0].TaskID != ws.TaskID || rs[0].AgentID != ws.AgentID {
		t.Fatalf("results after down: exit %d %v\n%s%s", code, err, out, errs)
	}
	if out, _, code := e.run("results", id); code != 0 || !strings.HasPrefix(out, "WORKSPACE") || !strings.Contains(out, rs[0].EpisodeID) {
		t.Fatalf("results (text): exit %d\n%s", code, out)
	}
	out, _, _ = e.run("ls")
	if !strings.Contains(out, "removed") {
		t.Fatalf("ls after down:\n%s", out)
	}
	// A new generation after a verified down. Generation 1's reports stay
	// as they are; nothing says "verified" of the live generation 2.
	if _, errs, code := e.run("up", spec); code != 0 {
		t.Fatalf("up again: exit %d\n%s", code, errs)
	}
	var old struct {
		Generation int
		Status     string
	}
	if b, err := os.ReadFile(filepath.Join(entries[0].StateDir, "cleanup-1-1.json")); err != nil || json.Unmarshal(b, &old) != nil || old.Generation != 1 || old.Status != "verified" {
		t.Fatalf("generation 1's report: %+v %v", old, err)
	}
	if out, _, code := e.run("ls", "--json"); code != 0 || !strings.Contains(out, `"state": "ready"`) || strings.Contains(out, "last_cleanup") || strings.Contains(out, `"cleanup"`) {
		t.Fatalf("ls while generation 2 is up: exit %d\n%s", code, out)
	}
	if out, _, code := e.run("down", id); code != 0 || !strings.Contains(out, "removed       2 containers (1 server, 1 workspace), 2 directories\n") {
		t.Fatalf("second down: exit %d\n%s", code, out)
	}
}

// TestCLITornJournalAfterUp: the review's reproduction on the real
// daemon: up, then the journal loses its last 30 bytes (as a crash in the
// middle of a write leaves it), then down. Down cuts the torn line before
// appending and is verified; the journal reads back whole and ls, which
// used to fail for the whole state root ("line 14: invalid character"),
// lists the campaign as down-verified.
func TestCLITornJournalAfterUp(t *testing.T) {
	e := newCLIEnv(t)
	id := fmt.Sprintf("cli-torn-%d", time.Now().UnixNano())
	t.Cleanup(func() { e.run("down", id) })
	if _, errs, code := e.run("up", e.spec(id, 1)); code != 0 {
		t.Fatalf("up: exit %d\n%s", code, errs)
	}
	journal := filepath.Join(e.state, "campaigns", campaign.Key(id), campaign.JournalFile)
	fi, err := os.Stat(journal)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(journal, fi.Size()-30); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := e.run("ls"); code != 0 || !strings.Contains(out, id) || !strings.Contains(errs, "ignoring a final line of") {
		t.Fatalf("ls with a torn journal: exit %d\n%s%s", code, out, errs)
	}
	if out, errs, code := e.run("down", id); code != 0 || !strings.Contains(out, "cleanup of "+id+": verified") {
		t.Fatalf("down: exit %d\n%s%s", code, out, errs)
	}
	c, err := loadJournal(journal)
	if err != nil || c.Torn != nil {
		t.Fatalf("journal after down: %v (torn %v)", err, c.Torn)
	}
	cut := false
	for _, r := range c.Records {
		cut = cut || strings.HasPrefix(r.Note, "journal: cut a final line of ")
	}
	if !cut {
		t.Fatal("the journal does not record the cut")
	}
	if out, errs, code := e.run("ls"); code != 0 || errs != "" || !strings.Contains(out, "removed") {
		t.Fatalf("ls after down: exit %d\n%s%s", code, out, errs)
	}
	if out, _, code := e.run("cleanup", "verify", id); code != 0 || !strings.Contains(out, "verified") {
		t.Fatalf("verify after down: exit %d\n%s", code, out)
	}
}

func TestCLIExitCodes(t *testing.T) {
	e := newCLIEnv(t)
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want int
	}{
		{"no_such_campaign", []string{"down", "never-brought-up"}, nil, exitBadInput},
		{"bad_campaign_id", []string{"down", "bad id!"}, nil, exitBadInput},
		{"verify_no_such_campaign", []string{"cleanup", "verify", "never-brought-up"}, nil, exitBadInput},
		{"daemon_unreachable", []string{"ls"}, map[string]string{"DOCKER_HOST": "unix:///run/user/1/docker.sock"}, exitUnreachable},
		{"docker_host_unset", []string{"ls"}, map[string]string{"DOCKER_HOST": ""}, exitBadInput},
		{"remove_unknown_orphan", []string{"orphans", "--remove", "0123456789ab"}, nil, exitFailure},
		{"orphans_id_without_remove", []string{"orphans", "0123456789ab"}, nil, exitBadInput},
		{"cleanup_without_verify", []string{"cleanup"}, nil, exitBadInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			saved := map[string]string{}
			for k, v := range tt.env {
				saved[k] = e.env[k]
				e.env[k] = v
			}
			defer func() {
				for k, v := range saved {
					e.env[k] = v
				}
			}()
			if _, errs, code := e.run(tt.args...); code != tt.want {
				t.Fatalf("exit %d, want %d\n%s", code, tt.want, errs)
			}
		})
	}
}

// TestCLIInterruptedUp: SIGINT or SIGTERM during agentpen up rolls the
// bring-up back and exits 130 or 143, also when the signal comes twice at
// once (timeout(1) signals the process and its group); down afterwards is
// verified.
func TestCLIInterruptedUp(t *testing.T) {
	e := newCLIEnv(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		sig   syscall.Signal
		twice bool
	}{{"sigint", syscall.SIGINT, false}, {"sigterm", syscall.SIGTERM, false}, {"sigterm_twice_at_once", syscall.SIGTERM, true}} {
		t.Run(c.name, func(t *testing.T) {
			sig := c.sig
			id := fmt.Sprintf("cli-int-%d", time.Now().UnixNano())
			t.Cleanup(func() { e.run("down", id) })
			cmd := exec.Command(exe, "up", "--ready-timeout", "10m", e.spec(id, 6))
			cmd.Env = []string{"AGENTPEN_TEST_MAIN=1"}
			for k, v := range e.env {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Interrupt once a workspace exists.
			journal := filepath.Join(e.state, "campaigns", campaign.Key(id), campaign.JournalFile)
			if !testenv.Until(t, func() bool {
				jc, _ := loadJournal(journal)
				for _, r := range jc.Records {
					if r.Op == campaign.OpCreated && r.Role == campaign.RoleWork {
						return true
					}
				}
				return false
			}) {
				cmd.Process.Kill()
				t.Fatalf("no workspace created:\n%s", stderr.String())
			}
			cmd.Process.Signal(sig)
			if c.twice {
				time.Sleep(20 * time.Millisecond)
				cmd.Process.Signal(sig)
			}
			err := cmd.Wait()
			code := cmd.ProcessState.ExitCode()
			if code != 128+int(sig) {
				t.Fatalf("exit %d (%v), want %d\n%s", code, err, 128+int(sig), stderr.String())
			}
			if want := fmt.Sprintf("agentpen: interrupted by %s (exit %d)\n", unix.SignalName(sig), 128+int(sig)); !strings.HasSuffix(stderr.String(), want) {
				t.Errorf("the interrupted up does not end saying %q:\n%s", want, stderr.String())
			}
			if !strings.Contains(stderr.String(), "rolled back: cleanup verified") {
				t.Fatalf("the interrupted up did not say its rollback was verified:\n%s", stderr.String())
			}
			if out, errs, code := e.run("down", id); code != 0 {
				t.Fatalf("down after the interrupt: exit %d\n%s%s", code, out, errs)
			}
		})
	}
}

// TestCLIUpReaderGone: up whose stdout reader went away (up ... | head -c0)
// neither dies of SIGPIPE halfway nor leaves a campaign nobody knows the
// ids of: it removes it (verified) and exits 1 saying so. With only stderr
// gone, the progress is lost and up still succeeds.
func TestCLIUpReaderGone(t *testing.T) {
	e := newCLIEnv(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, which := range []string{"stdout", "stderr"} {
		t.Run(which+"_closed", func(t *testing.T) {
			id := fmt.Sprintf("cli-pipe-%d", time.Now().UnixNano())
			t.Cleanup(func() { e.run("down", id) })
			cmd := exec.Command(exe, "up", e.spec(id, 2))
			cmd.Env = []string{"AGENTPEN_TEST_MAIN=1"}
			for k, v := range e.env {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			r.Close() // every write to w now fails with EPIPE (or SIGPIPE)
			var other bytes.Buffer
			if which == "stdout" {
				cmd.Stdout, cmd.Stderr = w, &other
			} else {
				cmd.Stdout, cmd.Stderr = &other, w
			}
			err = cmd.Run()
			w.Close()
			code := cmd.ProcessState.ExitCode()
			if code < 0 {
				t.Fatalf("up was killed by a signal (%v):\n%s", cmd.ProcessState, other.String())
			}
			_, _, verify := e.run("cleanup", "verify", id)
			if which == "stdout" {
				if code != 1 || !strings.Contains(other.String(), "could not write the campaign's ids") || !strings.Contains(other.String(), "the campaign was removed (cleanup verified)") {
					t.Fatalf("exit %d (%v), want 1 and the campaign removed:\n%s", code, err, other.String())
				}
				if verify != 0 {
					t.Fatalf("cleanup verify after an undelivered up: exit %d", verify)
				}
				return
			}
			if code != 0 || !strings.Contains(other.String(), `"campaign_id": "`+id+`"`) {
				t.Fatalf("with stderr gone: exit %d (%v), stdout %s", code, err, other.String())
			}
			if out, errs, code := e.run("down", id); code != 0 {
				t.Fatalf("down: exit %d\n%s%s", code, out, errs)
			}
		})
	}
}
