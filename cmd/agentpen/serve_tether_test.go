package main

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

// tetherLauncher is a launcher written with agentpen_client (this
// tree's): it creates the campaign of the spec file it is given, tied to
// it, says "ready", then holds its event stream open, printing each
// event, for as long as it lives.
const tetherLauncher = `
import json, sys
import agentpen_client as ac
c = ac.Client()
with open(sys.argv[1]) as fh:
    camp = c.create(fh.read())
print("ready", camp["campaign_id"], flush=True)
for ev in c.events(camp["campaign_id"]):
    print(json.dumps(ev), flush=True)
`

// launcherProc is a tetherLauncher running.
type launcherProc struct {
	cmd   *exec.Cmd
	lines chan string
}

// startLauncher starts a tetherLauncher for the spec file against p and
// waits until its campaign is ready and its event stream has caught up.
func startLauncher(t *testing.T, p *serveProc, spec string) *launcherProc {
	t.Helper()
	src, err := filepath.Abs(filepath.Join("..", "..", "clients", "python"))
	if err != nil {
		t.Fatal(err)
	}
	l := &launcherProc{cmd: exec.Command("python3", "-c", tetherLauncher, spec), lines: make(chan string, 1000)}
	l.cmd.Env = append(os.Environ(), "PYTHONPATH="+src, "AGENTPEN_URL=unix://"+p.sock, "AGENTPEN_TOKEN="+p.token)
	out, err := l.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	l.cmd.Stderr = os.Stderr
	if err := l.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			l.lines <- sc.Text()
		}
		close(l.lines)
	}()
	t.Cleanup(func() { l.cmd.Process.Kill(); l.cmd.Wait(); <-done })
	ctx := testenv.Context(t)
	for {
		select {
		case line, ok := <-l.lines:
			if !ok {
				t.Fatalf("the launcher ended before its campaign's state")
			}
			if strings.Contains(line, `"event": "state"`) {
				if !strings.Contains(line, `"state": "ready"`) {
					t.Fatalf("the launcher's campaign: %s", line)
				}
				return l
			}
		case <-ctx.Done():
			t.Fatal("no state from the launcher")
		}
	}
}

// TestServeLauncherGone: a campaign tied to its launcher
// (launcher_timeout_seconds 10) whose launcher, holding its event stream
// open, is killed with SIGKILL is removed (reason launcher_gone, cleanup
// verified, agentpen cleanup verify exit 0) within N + 10 s of the kill,
// and not before N; a campaign whose launcher lives on stays ready for as
// long.
func TestServeLauncherGone(t *testing.T) {
	testenv.RequireRoot(t)
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatalf("python3: %v", err)
	}
	const n = 10 * time.Second
	e := newCLIEnv(t)
	stamp := time.Now().UnixNano()
	idKilled, idAlive := fmt.Sprintf("tied-killed-%d", stamp), fmt.Sprintf("tied-alive-%d", stamp)
	for _, id := range []string{idKilled, idAlive} {
		t.Cleanup(func() { e.run("down", id) })
	}
	tie := func(s *campaign.CampaignSpec) { s.LauncherTimeoutSeconds = int(n / time.Second) }
	specKilled, _ := e.lifeSpec(idKilled, 1, tie)
	specAlive, _ := e.lifeSpec(idAlive, 1, tie)
	p := startServe(t, e)
	killed := startLauncher(t, p, specKilled)
	alive := startLauncher(t, p, specAlive)

	if err := killed.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	killed.cmd.Wait()
	testenv.WaitFor(t, idKilled+" to be removed", func() bool { return p.view(idKilled).State == "removed" })
	var started, verified time.Time
	for _, r := range e.journalOf(idKilled) {
		switch {
		case r.Op == campaign.OpRemovalStarted && r.Reason == campaign.ReasonLauncherGone:
			started = r.Time
		case r.Op == campaign.OpCleanup && r.Status == campaign.CleanupVerified:
			verified = r.Time
		}
	}
	if started.IsZero() || verified.IsZero() {
		t.Fatalf("no launcher_gone removal verified in the journal: %+v", e.journalOf(idKilled))
	}
	t.Logf("launcher timeout %v: removal began %v and was verified %v after the launcher's SIGKILL",
		n, started.Sub(killedAt).Round(time.Millisecond), verified.Sub(killedAt).Round(time.Millisecond))
	if started.Before(killedAt.Add(n)) {
		t.Errorf("removed %v after its launcher was killed, before its timeout %v", started.Sub(killedAt), n)
	}
	if verified.After(killedAt.Add(n + 10*time.Second)) {
		t.Errorf("cleanup verified %v after its launcher was killed, over N + 10 s", verified.Sub(killedAt))
	}
	if out, errs, code := e.run("cleanup", "verify", idKilled); code != 0 {
		t.Errorf("cleanup verify %s: exit %d\n%s%s", idKilled, code, out, errs)
	}
	// The other launcher held its stream all along: its campaign is up.
	if v := p.view(idAlive); v.State != "ready" {
		t.Errorf("%s, its launcher alive: %s", idAlive, v.State)
	}
	if time.Since(killedAt) < n {
		t.Fatalf("checked %s only %v in", idAlive, time.Since(killedAt))
	}
	if code, b := p.call(http.MethodDelete, "/v1/campaigns/"+idAlive, nil); code != http.StatusOK {
		t.Fatalf("delete %s: %d %s", idAlive, code, b)
	}
	// Its launcher's stream follows it to its end: the state removed.
	var last string
	for line := range alive.lines {
		last = line
	}
	if !strings.Contains(last, `"state": "removed"`) || !strings.Contains(last, `"reason": "delete"`) {
		t.Errorf("the living launcher's last event: %s", last)
	}
	if code := p.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("serve exit %d:\n%s", code, p.stderr.String())
	}
}
