package launcher_test

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/adapter/docker"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/dockerfake"
	"github.com/agentpen/agentpen/launcher"
	"github.com/agentpen/agentpen/store"
)

// TestDaemonLost: the service runs on a daemon that answered at start.
// A spec naming a key variable the service's environment does not hold
// is a 422 naming body.server.api_key_env, and one naming an image the
// daemon lacks a 422 naming body.workspaces[0].image; once the daemon is gone, a
// create of a good spec is a 503 that says the daemon is unreachable,
// never a 400 on the spec, and so is GET /v1/images.
func TestDaemonLost(t *testing.T) {
	fake := dockerfake.New()
	const img = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	fake.AddImage("agentpen/workbench:dev", img)
	base, err := os.MkdirTemp("/tmp", "dl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	sock := filepath.Join(base, "rootless", "docker.sock")
	os.MkdirAll(filepath.Dir(sock), 0o700)
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	daemon := &http.Server{Handler: fake}
	go daemon.Serve(l)
	t.Cleanup(func() { daemon.Close() })
	host, err := docker.ResolveHost("unix://"+sock, false)
	if err != nil {
		t.Fatal(err)
	}
	d, err := docker.Connect(t.Context(), host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	env := map[string]string{campaign.DefaultAPIKeyEnv: "daemon-lost-key-0123456789abcdef"}
	a := &adapter.Adapter{Driver: d, Getenv: func(k string) string { return env[k] }}
	root, err := store.CreateRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	const token = "daemon-lost-token-0123456789abcdef0123"
	toks, err := launcher.ParseTokens("token", token)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := launcher.New(launcher.Config{Adapter: a, Root: root, Tokens: toks, Key: bytes.Repeat([]byte{1}, launcher.KeyBytes)})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { ts.Close(); srv.Close(t.Context()) })
	call := func(method, path string, spec *campaign.CampaignSpec) (int, string, []string) {
		var body []byte
		if spec != nil {
			body, _ = json.Marshal(spec)
		}
		req, _ := http.NewRequest(method, ts.URL+path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var p struct {
			Detail string
			Errors []struct{ Location string }
		}
		json.NewDecoder(resp.Body).Decode(&p)
		var locs []string
		for _, e := range p.Errors {
			locs = append(locs, e.Location)
		}
		return resp.StatusCode, p.Detail, locs
	}
	spec := func(edit func(*campaign.CampaignSpec)) *campaign.CampaignSpec {
		s := &campaign.CampaignSpec{CampaignID: "lost-1", Server: campaign.ServerSpec{Image: "agentpen/workbench:dev"},
			Workspaces: []campaign.WorkspaceSpec{{TaskID: "software/median@2", Image: img}}}
		if edit != nil {
			edit(s)
		}
		return s
	}
	if code, detail, locs := call(http.MethodPost, "/v1/campaigns", spec(func(s *campaign.CampaignSpec) { s.Server.APIKeyEnv = "OTHER_GRADER_KEY" })); code != http.StatusUnprocessableEntity || strings.Join(locs, ",") != "body.server.api_key_env" {
		t.Errorf("a key variable the service lacks: %d %q %v", code, detail, locs)
	}
	if code, detail, locs := call(http.MethodPost, "/v1/campaigns", spec(func(s *campaign.CampaignSpec) { s.Workspaces[0].Image = "agentpen/none:1" })); code != http.StatusUnprocessableEntity || strings.Join(locs, ",") != "body.workspaces[0].image" {
		t.Errorf("an image the daemon lacks: %d %q %v", code, detail, locs)
	}
	daemon.Close()
	for _, c := range []struct {
		method, path string
		spec         *campaign.CampaignSpec
	}{{http.MethodPost, "/v1/campaigns", spec(nil)}, {http.MethodGet, "/v1/images", nil}} {
		code, detail, locs := call(c.method, c.path, c.spec)
		if code != http.StatusServiceUnavailable || !strings.Contains(detail, "docker daemon unreachable") || len(locs) != 0 {
			t.Errorf("%s %s with the daemon gone: %d %q %v, want 503 saying the daemon is unreachable", c.method, c.path, code, detail, locs)
		}
	}
	if _, err := root.Open("lost-1"); err == nil {
		t.Errorf("a create refused before the bring-up made a state directory")
	}
}
