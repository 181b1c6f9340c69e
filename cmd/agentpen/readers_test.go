package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/adapter/docker"
	"github.com/agentpen/agentpen/api"
	"github.com/agentpen/agentpen/internal/testkit/lifecycletest"
	"github.com/agentpen/agentpen/launcher"
	"github.com/agentpen/agentpen/store"
)

// TestReadersAgree: agentpen ls, the launcher API and agentpen attest read
// every journal shape (lifecycletest.Shapes) as the one status
// campaign.Fold gives it: ls and the API name it with the same word, and
// attest refuses exactly the campaigns that are not up, saying why. They
// used to decide it in five places, in two vocabularies.
func TestReadersAgree(t *testing.T) {
	for _, sh := range lifecycletest.Shapes {
		t.Run(sh.Name, func(t *testing.T) {
			r := newFakeRoot(t)
			id := "shape-" + strings.ReplaceAll(sh.Name, "_", "-")
			root, err := store.CreateRoot(r.state)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			popts, err := root.PlanOptions()
			if err != nil {
				t.Fatal(err)
			}
			h := lifecycletest.New(lifecycletest.Spec(id), popts, filepath.Join(t.TempDir(), "run"))
			sh.Build(h)
			if len(h.Records) == 0 {
				// What an agentpen whose create was not one step on disk
				// left when killed before its first record: a directory
				// with an empty journal (a create now never makes one).
				dir := root.CampaignDir(id)
				if err := os.MkdirAll(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "journal.jsonl"), nil, 0o600); err != nil {
					t.Fatal(err)
				}
			} else {
				r.append(id, h.Records...)
			}
			c, err := root.Open(id)
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range campaignGens(h) {
				if err := c.WriteSpec(g, lifecycletest.Spec(id)); err != nil {
					t.Fatal(err)
				}
			}
			c.Close()
			want := sh.Want.String()

			// agentpen ls
			out, errs, code := r.run("ls", "--json")
			var entries []lsEntry
			if code != 0 || json.Unmarshal([]byte(out), &entries) != nil || len(entries) != 1 {
				t.Fatalf("ls: exit %d\n%s%s", code, out, errs)
			}
			if entries[0].State != want {
				t.Errorf("ls says %s, want %s", entries[0].State, want)
			}

			// the launcher API
			d, err := docker.Connect(t.Context(), mustHost(t, r.env["DOCKER_HOST"]))
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			toks, err := launcher.ParseTokens("readersToken", readersToken)
			if err != nil {
				t.Fatal(err)
			}
			srv, err := launcher.New(launcher.Config{Adapter: &adapter.Adapter{Driver: d, LockBase: t.TempDir()}, Root: root,
				Tokens: toks, Key: bytes.Repeat([]byte{1}, launcher.KeyBytes)})
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest(http.MethodGet, "/v1/campaigns/"+id, nil)
			req.Header.Set("Authorization", "Bearer "+readersToken)
			rec := httptest.NewRecorder()
			srv.Handler().ServeHTTP(rec, req)
			var v api.CampaignView
			if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &v) != nil {
				t.Fatalf("GET: %d %s", rec.Code, rec.Body)
			}
			if v.State != want {
				t.Errorf("the API says %s, want %s (%s)", v.State, want, v.Error)
			}
			if sh.Want.String() == "ready" && len(v.Workspaces) != 2 {
				t.Errorf("the API serves %d workspaces of a ready campaign, want 2", len(v.Workspaces))
			}
			srv.Close(t.Context())

			// agentpen attest: refused (exit 2, saying why) exactly when the
			// campaign is not up.
			_, errs, code = r.run("attest", id, "--probe-timeout-ms", "100")
			switch refused := code == exitBadInput && strings.Contains(errs, "is not up"); {
			case sh.Want.Up() && refused:
				t.Errorf("attest refused a campaign that is %s: %s", want, errs)
			case !sh.Want.Up() && (!refused || !strings.Contains(errs, sh.Reason)):
				t.Errorf("attest of a campaign that is %s: exit %d\n%s\nwant a refusal saying %q", want, code, errs, sh.Reason)
			}
		})
	}
}

// campaignGens are the generations a history began.
func campaignGens(h *lifecycletest.History) []int {
	var out []int
	for _, rec := range h.Records {
		if rec.Op == "begin" {
			out = append(out, rec.Gen)
		}
	}
	return out
}

func mustHost(t *testing.T, raw string) docker.Host {
	t.Helper()
	h, err := docker.ResolveHost(raw, true)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// readersToken is the bearer token of TestReadersAgree's service.
const readersToken = "readers-token-7c1e9a3f5b2d8046e1"
