package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/cli"
	"github.com/agentpen/agentpen/internal/testenv"
)

func TestUpRefusesBadSpec(t *testing.T) {
	tests := []struct {
		name, spec, want string
	}{
		{"not_json", "{", "spec"},
		{"unknown_field", `{"campaign_id":"c","bogus":1}`, `bogus: unknown field`},
		{"no_workspaces", `{"campaign_id":"c","server":{"image":"sha256:` + strings.Repeat("a", 64) + `"}}`, "workspaces"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "spec.json")
			os.WriteFile(f, []byte(tt.spec), 0o600)
			var out, errb bytes.Buffer
			// No daemon answers there: a bad spec is refused before any is asked.
			env := map[string]string{"DOCKER_HOST": "unix:///run/user/1/docker.sock", "HOME": t.TempDir()}
			err := run(t.Context(), []string{"up", f}, &out, &errb, func(k string) string { return env[k] })
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.want)
			}
			if out.Len() != 0 {
				t.Fatalf("stdout %q on failure", out.String())
			}
		})
	}
	var out, errb bytes.Buffer
	if err := run(t.Context(), []string{"up"}, &out, &errb, os.Getenv); cli.ExitCode(err) != 2 {
		t.Fatalf("up without a spec: %v", err)
	}
	if err := run(t.Context(), []string{"down"}, &out, &errb, os.Getenv); cli.ExitCode(err) != 2 {
		t.Fatalf("down without an id: %v", err)
	}
}

func TestUpDownRealDaemon(t *testing.T) {
	host := testenv.RequireDocker(t)
	d := connectReal(t, host)
	ids, err := d.Images(t.Context(), "agentpen/")
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"agentpen/python-base:bookworm", "agentpen/workbench:dev"} {
		if ids[ref] == "" {
			t.Fatalf("image %s is missing (make images builds it)", ref)
		}
	}
	campaignID := fmt.Sprintf("cli-%d", time.Now().UnixNano())
	spec := campaign.CampaignSpec{
		CampaignID: campaignID,
		Server: campaign.ServerSpec{Image: ids["agentpen/python-base:bookworm"], Command: []string{"sleep", "600"},
			ReadyCommand: []string{"true"}},
		Workspaces: []campaign.WorkspaceSpec{{TaskID: "data/csv_region_total", Image: ids["agentpen/workbench:dev"]}},
	}
	b, _ := json.Marshal(spec)
	dir := t.TempDir()
	f := filepath.Join(dir, "spec.json")
	os.WriteFile(f, b, 0o600)
	env := map[string]string{"DOCKER_HOST": host, "XDG_STATE_HOME": dir, "AGENTPEN_API_KEY": "cli-test-key"}
	getenv := func(k string) string { return env[k] }
	var out, errb bytes.Buffer
	if err := run(t.Context(), []string{"up", "--log-format", "json", f}, &out, &errb, getenv); err != nil {
		t.Fatalf("up: %v\n%s", err, errb.String())
	}
	var res upResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("up output %q: %v", out.String(), err)
	}
	if res.CampaignID != campaignID || len(res.Workspaces) != 1 || !strings.HasPrefix(res.Workspaces[0].AgentID, "agent-") {
		t.Fatalf("up result %+v", res)
	}
	if _, err := os.Stat(res.Workspaces[0].Socket); err != nil {
		t.Fatalf("workbench socket: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(errb.String()), "\n") {
		if !json.Valid([]byte(line)) {
			t.Fatalf("log line is not JSON: %q", line)
		}
	}
	out.Reset()
	if err := run(t.Context(), []string{"down", campaignID}, &out, &errb, getenv); err != nil {
		t.Fatalf("down: %v", err)
	}
	for _, id := range []string{res.Server.ContainerID, res.Workspaces[0].ContainerID} {
		if _, err := d.ContainerJSON(t.Context(), id); !cerrdefs.IsNotFound(err) {
			t.Fatalf("container %s after down: %v", id, err)
		}
	}
	if _, err := d.NetworkJSON(t.Context(), res.Network); !cerrdefs.IsNotFound(err) {
		t.Fatalf("network after down: %v", err)
	}
}

// connectReal connects to the real daemon at host (a DOCKER_HOST value).
func connectReal(t *testing.T, host string) *adapter.Docker {
	t.Helper()
	h, err := adapter.ResolveHost(host, os.Getenv("AGENTPEN_ALLOW_CUSTOM_SOCKET") == "1")
	if err != nil {
		t.Fatal(err)
	}
	d, err := adapter.Connect(t.Context(), h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}
