package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
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

// serveProc is agentpen serve run as a process of its own (the test
// binary, through TestMain), on a unix socket.
type serveProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	sock   string
	token  string
	stderr bytes.Buffer
	done   chan struct{}
}

// startServe starts agentpen serve with extra flags on e's state root and
// waits until it answers.
func startServe(t *testing.T, e *cliEnv, extra ...string) *serveProc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &serveProc{t: t, sock: filepath.Join(e.dir, "api.sock"), token: "serve-test-token-5d0c8e1a47b93f26a1", done: make(chan struct{})}
	p.cmd = exec.Command(exe, append([]string{"serve", "--listen", "unix://" + p.sock}, extra...)...)
	p.cmd.Env = []string{"AGENTPEN_TEST_MAIN=1", "AGENTPEN_SERVE_TOKEN=" + p.token}
	for k, v := range e.env {
		p.cmd.Env = append(p.cmd.Env, k+"="+v)
	}
	p.cmd.Stderr = &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	testenv.WaitFor(t, "serve to answer on "+p.sock, func() bool {
		if code, _ := p.call(http.MethodGet, "/healthz", nil); code == http.StatusOK {
			return true
		}
		select {
		case <-p.done:
			t.Fatalf("serve ended: %s", p.stderr.String())
		default:
		}
		return false
	})
	return p
}

// call sends one request to the service with the token; code 0 when
// nothing answered.
func (p *serveProc) call(method, path string, body []byte) (int, []byte) {
	hc := &http.Client{Timeout: 5 * time.Minute, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", p.sock)
	}}}
	defer hc.CloseIdleConnections()
	req, _ := http.NewRequest(method, "http://agentpen"+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+p.token)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// stop signals the service and returns its exit status.
func (p *serveProc) stop(sig syscall.Signal) int {
	p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-testenv.Context(p.t).Done():
		p.t.Fatalf("serve did not stop after %v:\n%s", sig, p.stderr.String())
	}
	return p.cmd.ProcessState.ExitCode()
}

// campaignView is the part of a CampaignView these tests read.
type campaignView struct {
	CampaignID string `json:"campaign_id"`
	Generation int    `json:"generation"`
	State      string `json:"state"`
	Workspaces []struct {
		BaseURL string `json:"base_url"`
	} `json:"workspaces"`
}

func (p *serveProc) view(id string) campaignView {
	p.t.Helper()
	code, b := p.call(http.MethodGet, "/v1/campaigns/"+id, nil)
	var v campaignView
	if code != http.StatusOK || json.Unmarshal(b, &v) != nil {
		p.t.Fatalf("GET %s: %d %s", id, code, b)
	}
	return v
}

func (p *serveProc) listed(id string) string {
	p.t.Helper()
	code, b := p.call(http.MethodGet, "/v1/campaigns", nil)
	var l struct{ Campaigns []campaignView }
	if code != http.StatusOK || json.Unmarshal(b, &l) != nil {
		p.t.Fatalf("list: %d %s", code, b)
	}
	for _, v := range l.Campaigns {
		if v.CampaignID == id {
			return v.State
		}
	}
	return ""
}

// journalOf reads the campaign's journal records.
func (e *cliEnv) journalOf(id string) []campaign.Record {
	c, _ := loadJournal(journalOf(e.state, id))
	return c.Records
}

// TestServeKilledMidCreate: agentpen serve SIGKILLed while it brings a
// campaign up leaves its containers running; the next serve reconciles
// it at start: it reads deleting, then removed (rolled back, verified),
// and the id is free for a new generation, whose cleanup report is not
// the earlier one's (named); a campaign agentpen down removes behind the
// service's back reads removed at once.
func TestServeKilledMidCreate(t *testing.T) {
	testenv.RequireRoot(t)
	e := newCLIEnv(t)
	id := fmt.Sprintf("serve-kill-%d", time.Now().UnixNano())
	t.Cleanup(func() { e.run("down", id) })
	spec, err := os.ReadFile(e.spec(id, 3))
	if err != nil {
		t.Fatal(err)
	}

	p := startServe(t, e)
	go p.call(http.MethodPost, "/v1/campaigns", spec)
	testenv.WaitFor(t, "a workspace created", func() bool {
		for _, r := range e.journalOf(id) {
			if r.Op == campaign.OpCreated && r.Role == campaign.RoleWork && r.Kind == campaign.KindContainer {
				return true
			}
		}
		return false
	})
	p.cmd.Process.Kill()
	<-p.done
	for _, r := range e.journalOf(id) {
		if r.Op == campaign.OpNote {
			t.Fatalf("killed too late: the journal has %q", r.Note)
		}
	}

	p = startServe(t, e)
	testenv.WaitFor(t, id+" to be rolled back", func() bool {
		v := p.view(id)
		if v.State != "deleting" && v.State != "removed" {
			t.Fatalf("after the kill, while serve reconciles it: %+v", v)
		}
		return v.State == "removed"
	})
	if r, ok := e.removalOf(id); !ok || r.Reason != campaign.ReasonRollback {
		t.Fatalf("removal %+v, want reason rollback", r)
	}
	if out, errs, code := e.run("cleanup", "verify", id); code != 0 {
		t.Fatalf("after the reconciliation, cleanup verify exits %d: %s%s", code, out, errs)
	}

	// Generation 2, up; generation 1's cleanup report is not its own.
	if code, b := p.call(http.MethodPost, "/v1/campaigns", spec); code != http.StatusCreated {
		t.Fatalf("create generation 2: %d %s", code, b)
	}
	if code, b := p.call(http.MethodGet, "/v1/campaigns/"+id+"/cleanup", nil); code != http.StatusNotFound || !strings.Contains(string(b), "generation 2") || !strings.Contains(string(b), "cleanup-1-1.json") {
		t.Fatalf("generation 2 is up; GET cleanup: %d %s", code, b)
	}
	v := p.view(id)
	if v.State != "ready" || v.Generation != 2 || len(v.Workspaces) != 3 {
		t.Fatalf("generation 2: %+v", v)
	}
	// agentpen down behind the service's back.
	if out, errs, code := e.run("down", id); code != 0 {
		t.Fatalf("down: exit %d %s%s", code, out, errs)
	}
	if v := p.view(id); v.State != "removed" || len(v.Workspaces) != 0 {
		t.Fatalf("after agentpen down: %+v", v)
	}
	if code, _ := p.call(http.MethodGet, v.Workspaces[0].BaseURL+"/health", nil); code != http.StatusNotFound {
		t.Errorf("a removed workspace's base_url: %d, want 404", code)
	}
	if code, b := p.call(http.MethodGet, "/v1/campaigns/"+id+"/cleanup", nil); code != http.StatusOK || !strings.Contains(string(b), `"status": "verified"`) && !strings.Contains(string(b), `"status":"verified"`) {
		t.Fatalf("GET cleanup after down: %d %s", code, b)
	}
	if code := p.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("serve exit %d:\n%s", code, p.stderr.String())
	}
}

// TestServeCleanupOnExitNotVerified: serve --cleanup-on-exit stopped by
// SIGTERM whose cleanup is not verified exits 1 (not 143: the signal is
// its normal stop) and says so once, naming the campaign once; it
// removed everything else. The failure is made by journalling a directory
// the cleanup must refuse to touch (not shaped like a run directory).
func TestServeCleanupOnExitNotVerified(t *testing.T) {
	testenv.RequireRoot(t)
	e := newCLIEnv(t)
	id := fmt.Sprintf("serve-coe-%d", time.Now().UnixNano())
	t.Cleanup(func() { e.run("down", id) })
	spec, err := os.ReadFile(e.spec(id, 1))
	if err != nil {
		t.Fatal(err)
	}
	p := startServe(t, e, "--cleanup-on-exit")
	if code, b := p.call(http.MethodPost, "/v1/campaigns", spec); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, b)
	}
	bogus := filepath.Join(e.dir, "not-a-run-dir")
	if err := os.Mkdir(bogus, 0o700); err != nil {
		t.Fatal(err)
	}
	gen := e.journalOf(id)[0].Gen
	appendRecords(t, e.state, id, campaign.Record{Op: campaign.OpCreated, Gen: gen, Kind: campaign.KindDir, Role: campaign.RoleWork, Name: "bogus", ID: bogus})
	t.Cleanup(func() {
		// Let the test's down verify: the refused directory is not the
		// campaign's.
		appendRecords(t, e.state, id, campaign.Record{Op: campaign.OpRemoved, Gen: gen, Kind: campaign.KindDir, Name: "bogus", ID: bogus})
	})
	code := p.stop(syscall.SIGTERM)
	msg := p.stderr.String()
	if code != exitFailure || strings.Count(msg, "not verified") != 1 || strings.Count(msg, `campaign "`+id+`"`) != 1 || strings.Contains(msg, "campaign "+id+":") {
		t.Fatalf("serve --cleanup-on-exit, cleanup not verified: exit %d, want %d; stderr:\n%s", code, exitFailure, msg)
	}
	t.Logf("serve --cleanup-on-exit: exit %d, stderr:\n%s", code, msg)
	// Everything but the refused directory is removed.
	for _, g := range campaign.Generations(e.journalOf(id)) {
		for _, r := range g.Live() {
			if r.ID != bogus {
				t.Errorf("still live after --cleanup-on-exit: %s %s", r.Kind, r.Name)
			}
		}
	}
}
