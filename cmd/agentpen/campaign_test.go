package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/agentpen/agentpen/adapter/docker"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/cli"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

func TestUpRefusesBadSpec(t *testing.T) {
	tests := []struct {
		name, spec, want string
	}{
		{"not_json", "{", "spec"},
		{"unknown_field", `{"campaign_id":"c","bogus":1}`, `bogus: unknown field`},
		{"no_workspaces", `{"campaign_id":"c","server":{"image":"sha256:` + strings.Repeat("a", 64) + `"}}`, "workspaces"},
		{"launcher_timeout", `{"campaign_id":"c","launcher_timeout_seconds":30,"server":{"image":"sha256:` + strings.Repeat("a", 64) + `"},"workspaces":[{"task_id":"software/median","image":"sha256:` + strings.Repeat("a", 64) + `"}]}`,
			`launcher_timeout_seconds "30": agentpen up has no launcher to watch`},
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
	wb := imageIDOf(t, d, testenv.WorkbenchImage())
	campaignID := fmt.Sprintf("cli-%d", time.Now().UnixNano())
	spec := campaign.CampaignSpec{
		CampaignID: campaignID,
		Server:     campaign.ServerSpec{Image: wb},
		Workspaces: []campaign.WorkspaceSpec{{TaskID: "data/csv_region_total", Image: wb}},
	}
	b, _ := json.Marshal(spec)
	dir := t.TempDir()
	f := filepath.Join(dir, "spec.json")
	os.WriteFile(f, b, 0o600)
	env := map[string]string{"DOCKER_HOST": host, "XDG_STATE_HOME": dir, "AGENTPEN_API_KEY": "cli-test-key-5d0c8e1a47b93f26"}
	getenv := func(k string) string { return env[k] }
	var out, errb bytes.Buffer
	if err := run(t.Context(), []string{"up", "--log-format", "json", f}, &out, &errb, getenv); err != nil {
		run(t.Context(), []string{"down", campaignID}, io.Discard, io.Discard, getenv)
		t.Fatalf("up: %v\n%s", err, errb.String())
	}
	t.Cleanup(func() { run(context.Background(), []string{"down", campaignID}, io.Discard, io.Discard, getenv) })
	var res upResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("up output %q: %v", out.String(), err)
	}
	if res.CampaignID != campaignID || len(res.Workspaces) != 1 || !strings.HasPrefix(res.Workspaces[0].AgentID, "agent-") {
		t.Fatalf("up result %+v", res)
	}
	if !res.Attestation.OK || filepath.Base(res.Attestation.Report) != "attestation-1-1.json" {
		t.Fatalf("up attestation %+v", res.Attestation)
	}
	if _, err := os.Stat(res.Workspaces[0].Socket); err != nil {
		t.Fatalf("workbench socket: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(errb.String()), "\n") {
		if !json.Valid([]byte(line)) {
			t.Fatalf("log line is not JSON: %q", line)
		}
	}
	// attest again: the human summary, --strict, --json.
	out.Reset()
	if err := run(t.Context(), []string{"attest", campaignID, "--strict"}, &out, io.Discard, getenv); err != nil {
		t.Fatalf("attest --strict: %v\n%s", err, out.String())
	}
	if !strings.HasPrefix(out.String(), "attestation ok: ") {
		t.Fatalf("attest summary %q", out.String())
	}
	out.Reset()
	if err := run(t.Context(), []string{"attest", "--json", campaignID}, &out, io.Discard, getenv); err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Schema       string
		OK           bool
		FailedChecks []string `json:"failed_checks"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || rep.Schema != "agentpen.attestation.v1" || !rep.OK || rep.FailedChecks == nil {
		t.Fatalf("attest --json: %v %+v", err, rep)
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
	for _, n := range res.Networks {
		if _, err := d.NetworkJSON(t.Context(), n); !cerrdefs.IsNotFound(err) {
			t.Fatalf("network after down: %v", err)
		}
	}
	// After down, attest refuses (exit 2): the campaign is not up, and
	// every report stays as it was written (the bring-up's, the two
	// attests', the cleanup).
	reports, _ := filepath.Glob(filepath.Join(res.StateDir, "*-*-*.json"))
	out.Reset()
	if err := run(t.Context(), []string{"attest", "--strict", campaignID}, &out, io.Discard, getenv); exitCode(err) != 2 || out.Len() != 0 ||
		!strings.Contains(err.Error(), "campaign "+campaignID+" is not up: its latest generation (1) was removed (cleanup verified)") {
		t.Fatalf("attest --strict after down: exit %d %v\n%s", exitCode(err), err, out.String())
	}
	after, _ := filepath.Glob(filepath.Join(res.StateDir, "*-*-*.json"))
	if want := []string{"attestation-1-1.json", "attestation-1-2.json", "attestation-1-3.json", "cleanup-1-1.json"}; len(after) != len(reports) || len(after) != 2*len(want) {
		t.Fatalf("reports and their envelopes after a refused attest: %v (before %v), want %v and theirs", after, reports, want)
	}
	// Every report of the real campaign verifies with the state root's
	// key: the chain, the signatures, the spec, daemon, journal and image
	// subjects, the cleanup following the last attestation.
	out.Reset()
	if err := run(t.Context(), []string{"verify", "--json", campaignID}, &out, io.Discard, getenv); err != nil {
		t.Fatalf("verify after down: %v\n%s", err, out.String())
	}
	var vr struct {
		OK      bool     `json:"ok"`
		Reports []string `json:"reports"`
	}
	if err := json.Unmarshal(out.Bytes(), &vr); err != nil || !vr.OK || len(vr.Reports) != 4 ||
		!strings.Contains(out.String(), "the image id the report records for") || !strings.Contains(out.String(), `"id": "attestation-1-1.json.subject.journal.jsonl"`) {
		t.Fatalf("verify --json: %v\n%s", err, out.String())
	}
}

// TestUpFailsClosed: a campaign whose attestation fails (its server image
// has no probe, so custody and the grader's counters have no evidence) is
// removed by up, which exits 1 naming the failed checks; --keep-failed
// keeps it.
func TestUpFailsClosed(t *testing.T) {
	host := testenv.RequireDocker(t)
	d := connectReal(t, host)
	base := imageIDOf(t, d, "agentpen/python-base:bookworm")
	wb := imageIDOf(t, d, testenv.WorkbenchImage())
	for _, keep := range []bool{false, true} {
		campaignID := fmt.Sprintf("cli-fail-%v-%d", keep, time.Now().UnixNano())
		spec := campaign.CampaignSpec{
			CampaignID: campaignID,
			Server: campaign.ServerSpec{Image: base, Command: []string{"python3", "-m", "http.server", "8080"},
				ReadyCommand: []string{"python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/')"}},
			Workspaces: []campaign.WorkspaceSpec{{TaskID: "data/csv_region_total", Image: wb}},
		}
		b, _ := json.Marshal(spec)
		dir := t.TempDir()
		f := filepath.Join(dir, "spec.json")
		os.WriteFile(f, b, 0o600)
		env := map[string]string{"DOCKER_HOST": host, "XDG_STATE_HOME": dir, "AGENTPEN_API_KEY": "cli-fail-key-77a1c0d9e2b5f843"}
		getenv := func(k string) string { return env[k] }
		t.Cleanup(func() { run(context.Background(), []string{"down", campaignID}, io.Discard, io.Discard, getenv) })
		args := []string{"up", f, "--probe-timeout-ms", "500"}
		if keep {
			args = append(args, "--keep-failed")
		}
		var out, errb bytes.Buffer
		err := run(t.Context(), args, &out, &errb, getenv)
		if cli.ExitCode(err) != 1 || cli.Message("agentpen", err) != "" || out.Len() != 0 {
			t.Fatalf("keep=%v: err %v (exit %d), stdout %q", keep, err, cli.ExitCode(err), out.String())
		}
		if !strings.Contains(errb.String(), "server.process:") || !strings.Contains(errb.String(), "did not attest") {
			t.Fatalf("keep=%v: stderr does not name the failed checks:\n%s", keep, errb.String())
		}
		recs := records(t, journalOf(filepath.Join(dir, "agentpen"), campaignID))
		live := 0
		for _, r := range campaign.Resources(recs) {
			if r.ID != "" && !r.Removed && r.Kind == campaign.KindContainer {
				live++
				if _, err := d.ContainerJSON(t.Context(), r.ID); err != nil {
					t.Errorf("keep=%v: container %s: %v", keep, r.Name, err)
				}
			}
		}
		if keep != (live == 2) {
			t.Fatalf("keep=%v: %d live containers journalled", keep, live)
		}
	}
}

func imageIDOf(t *testing.T, d *docker.Driver, ref string) string {
	t.Helper()
	id, err := d.Resolve(t.Context(), ref)
	if err != nil {
		t.Fatalf("image %s is missing (make images builds agentpen/workbench:dev and the python base; %s=%s picks another): %v", ref, testenv.WorkbenchImageEnv, ref, err)
	}
	return id
}

// connectReal connects to the real daemon at host (a DOCKER_HOST value).
func connectReal(t *testing.T, host string) *docker.Driver {
	t.Helper()
	h, err := docker.ResolveHost(host, os.Getenv("AGENTPEN_ALLOW_CUSTOM_SOCKET") == "1")
	if err != nil {
		t.Fatal(err)
	}
	d, err := docker.Connect(t.Context(), h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}
