package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/internal/cli"
)

// writeReport writes rep (edited by fn) as an attestation report file in
// dir and returns its path.
func writeReport(t *testing.T, dir, name string, fn func(r *attest.Report)) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "attest", "internal", "report.golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep attest.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	fn(&rep)
	if b, err = json.Marshal(&rep); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDiffFiles: agentpen diff of two report files: the same images in
// two campaigns exit 0 (ids and times ignored), another image id in a
// workspace exits 1 naming it, with --json the same; a cleanup report,
// a file that is no report, or a campaign with no state root exit 2.
func TestDiffFiles(t *testing.T) {
	dir := t.TempDir()
	a := writeReport(t, dir, "attestation-1-1.json", func(r *attest.Report) {})
	same := writeReport(t, dir, "attestation-1-2.json", func(r *attest.Report) {
		r.CampaignID, r.Instance = "another-campaign", strings.Repeat("7", 32)
		r.AttestedAt = r.AttestedAt.Add(3600e9)
		for i := range r.Fingerprint.Containers {
			r.Fingerprint.Containers[i].ContainerID = strings.Repeat("d", 63) + string(rune('0'+i))
		}
	})
	other := "sha256:" + strings.Repeat("e", 64)
	repointed := writeReport(t, dir, "attestation-1-3.json", func(r *attest.Report) {
		w := &r.Fingerprint.Containers[1]
		w.Reference, w.ImageID, w.ConfigDigest = other, other, other
	})

	out, err := runCLI(t, "diff", a, same)
	if exitCode(err) != 0 || !strings.Contains(out, "same: nothing differs") || !strings.Contains(out, "  workspaces[0].container_id\n") || !strings.Contains(out, "only requested") {
		t.Errorf("the same images: exit %d\n%s", exitCode(err), out)
	}
	out, err = runCLI(t, "diff", a, repointed)
	if exitCode(err) != 1 || !strings.Contains(out, "DIFFERENT") || !strings.Contains(out, "  workspaces[0].image_id\n") ||
		!strings.Contains(out, "  workspaces[0].config_digest\n") || !strings.Contains(out, "B "+other) {
		t.Errorf("another image: exit %d\n%s", exitCode(err), out)
	}
	out, err = runCLI(t, "diff", "--json", a, repointed)
	var got diffReport
	if exitCode(err) != 1 || json.Unmarshal([]byte(out), &got) != nil || got.Same || got.B.Path != repointed || got.A.CampaignID == "" {
		t.Errorf("--json: exit %d\n%s", exitCode(err), out)
	}
	cleanup := filepath.Join(dir, "cleanup-1-1.json")
	os.WriteFile(cleanup, []byte("{}"), 0o600)
	notJSON := filepath.Join(dir, "attestation-1-9.json")
	os.WriteFile(notJSON, []byte("not json"), 0o600)
	for _, args := range [][]string{{a, cleanup}, {a, notJSON}, {a, filepath.Join(dir, "attestation-1-8.json")}, {"no-such-campaign", a}} {
		out, err := runCLI(t, append([]string{"diff", "--state-root", filepath.Join(dir, "none")}, args...)...)
		if exitCode(err) != 2 || cli.Message("agentpen", err) == "" {
			t.Errorf("diff %v: exit %d, %v\n%s", args, exitCode(err), err, out)
		}
	}
}
