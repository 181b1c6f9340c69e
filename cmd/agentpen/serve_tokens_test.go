package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

// callAs is call with another token.
func (p *serveProc) callAs(token, method, path string, body []byte) (int, []byte) {
	saved := p.token
	p.token = token
	defer func() { p.token = saved }()
	return p.call(method, path, body)
}

// listedAs is the campaigns token lists: the body, and each id's owner.
func (p *serveProc) listedAs(token string) (string, map[string]string) {
	p.t.Helper()
	code, b := p.callAs(token, http.MethodGet, "/v1/campaigns", nil)
	var l struct {
		Campaigns []struct {
			CampaignID string `json:"campaign_id"`
			Owner      string `json:"owner"`
		}
	}
	if code != http.StatusOK || json.Unmarshal(b, &l) != nil {
		p.t.Fatalf("list: %d %s", code, b)
	}
	out := map[string]string{}
	for _, c := range l.Campaigns {
		out[c.CampaignID] = c.Owner
	}
	return string(b), out
}

// TestServeTokensPerLauncher: on the real daemon, agentpen serve with a
// token file of named tokens: two launchers each create a campaign and
// neither can see the other's (every route on it is the 404 of an
// unknown id, and the list holds neither its id nor its base_urls); the
// operator sees both, with their owners. Restarted with a file of one
// bare token, that token is the operator's: it sees both campaigns, whose
// owners the journal kept, and removes them; the launchers' tokens no
// longer open anything. No token's value is in the logs or any file of
// the state root; the names are.
func TestServeTokensPerLauncher(t *testing.T) {
	testenv.RequireRoot(t)
	e := newCLIEnv(t)
	stamp := time.Now().UnixNano()
	op, tokA, tokB := fmt.Sprintf("canary-operator-%d-7c1e9a3f", stamp), fmt.Sprintf("canary-team-a-%d-5d0c8e1a", stamp), fmt.Sprintf("canary-team-b-%d-9f8e7d6c", stamp)
	named := filepath.Join(e.dir, "tokens")
	if err := os.WriteFile(named, []byte("# the launchers\noperator:"+op+"\nteam-a:"+tokA+"\nteam-b:"+tokB+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	idA, idB := fmt.Sprintf("tok-a-%d", stamp), fmt.Sprintf("tok-b-%d", stamp)
	t.Cleanup(func() { e.run("down", idA); e.run("down", idB) })
	_, specA := e.lifeSpec(idA, 1, nil)
	_, specB := e.lifeSpec(idB, 1, nil)

	p := startServe(t, e, "--token-file", named, "--log-format", "json")
	p.token = op // the file's, not the environment's
	views := map[string]campaignView{}
	for id, c := range map[string]struct {
		token string
		spec  []byte
	}{idA: {tokA, specA}, idB: {tokB, specB}} {
		code, b := p.callAs(c.token, http.MethodPost, "/v1/campaigns", c.spec)
		var v campaignView
		if code != http.StatusCreated || json.Unmarshal(b, &v) != nil || len(v.Workspaces) != 1 || v.Workspaces[0].BaseURL == "" {
			t.Fatalf("create %s: %d %s", id, code, b)
		}
		views[id] = v
	}
	for _, c := range []struct {
		token, own, other string
	}{{tokA, idA, idB}, {tokB, idB, idA}} {
		for _, route := range []string{"GET /v1/campaigns/%s", "GET /v1/campaigns/%s/workspaces", "GET /v1/campaigns/%s/events",
			"GET /v1/campaigns/%s/attestation", "POST /v1/campaigns/%s/attestation", "GET /v1/campaigns/%s/cleanup",
			"PATCH /v1/campaigns/%s", "DELETE /v1/campaigns/%s"} {
			method, path, _ := strings.Cut(route, " ")
			body := []byte(nil)
			if method == http.MethodPatch {
				body = []byte(`{"ttl_seconds": 7200}`)
			}
			code, b := p.callAs(c.token, method, fmt.Sprintf(path, c.other), body)
			ucode, ub := p.callAs(c.token, method, fmt.Sprintf(path, "tok-nowhere"), body)
			if code != http.StatusNotFound || ucode != http.StatusNotFound || strings.ReplaceAll(string(b), c.other, "tok-nowhere") != string(ub) {
				t.Errorf("%s of the other launcher's campaign: %d %s; of an unknown one: %d %s", route, code, b, ucode, ub)
			}
		}
		body, owners := p.listedAs(c.token)
		if len(owners) != 1 || owners[c.own] == "" {
			t.Errorf("a launcher lists %v", owners)
		}
		if strings.Contains(body, c.other) || strings.Contains(body, views[c.other].Workspaces[0].BaseURL) {
			t.Errorf("a launcher's list holds the other's campaign: %s", body)
		}
	}
	if _, owners := p.listedAs(op); owners[idA] != "team-a" || owners[idB] != "team-b" {
		t.Errorf("the operator lists %v", owners)
	}
	for _, id := range []string{idA, idB} {
		if v := p.view(id); v.State != "ready" { // the operator's GET; the launchers' refusals changed nothing
			t.Errorf("%s after the other launcher's requests: %s", id, v.State)
		}
	}
	if code := p.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("serve exit %d:\n%s", code, p.stderr.String())
	}
	logs := p.stderr.String()

	// One bare token: the operator's.
	bare := filepath.Join(e.dir, "token")
	if err := os.WriteFile(bare, []byte(op+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p = startServe(t, e, "--token-file", bare, "--log-format", "json")
	p.token = op
	if _, owners := p.listedAs(op); owners[idA] != "team-a" || owners[idB] != "team-b" {
		t.Errorf("the bare token lists %v", owners)
	}
	if code, b := p.callAs(tokA, http.MethodGet, "/v1/campaigns", nil); code != http.StatusUnauthorized {
		t.Errorf("a token no longer in the file: %d %s", code, b)
	}
	for _, id := range []string{idA, idB} {
		if code, b := p.call(http.MethodDelete, "/v1/campaigns/"+id, nil); code != http.StatusOK {
			t.Errorf("the operator's delete of %s: %d %s", id, code, b)
		}
	}
	if code := p.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("serve exit %d:\n%s", code, p.stderr.String())
	}
	logs += p.stderr.String()

	// Names, never tokens: the logs, the journals, every file of the
	// state root.
	for _, want := range []map[string]any{
		{"msg": "agentpen serve started", "tokens": "[operator team-a team-b]"},
		{"msg": "create", "campaign": idA, "outcome": "ready", "caller": "team-a"},
		{"msg": "http", "status": 404, "route": "/v1/campaigns/{id}", "caller": "team-b"},
		{"msg": "delete", "campaign": idB, "outcome": "verified", "caller": "operator"},
	} {
		if findLine(logLines(t, logs), want) == nil {
			t.Errorf("no log line with %v", want)
		}
	}
	for id, owner := range map[string]string{idA: "team-a", idB: "team-b"} {
		var owners []string
		for _, r := range e.journalOf(id) {
			if r.Op == campaign.OpBegin {
				owners = append(owners, r.Owner)
			}
		}
		if !slices.Equal(owners, []string{owner}) {
			t.Errorf("%s's begin records name %q", id, owners)
		}
	}
	files := testenv.ReadTree(t, e.state)
	files["serve's log"] = logs
	for where, text := range files {
		for _, tok := range []string{op, tokA, tokB} {
			if strings.Contains(text, tok) {
				t.Errorf("%s holds a token (%.20s...)", where, tok)
			}
		}
	}
	t.Logf("%d files of the state root and the logs scanned", len(files))
	if t.Failed() {
		t.Logf("serve's logs:\n%s", logs)
	}
}
