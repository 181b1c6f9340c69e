package agentpen_test

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

// TestLauncherDemoVerdicts runs testdata/clients/launcher_demo.py (make
// run's launcher) against a fake of the launcher API and checks that its
// exit status and result.json say ok only when every episode earned 1.0,
// the attestation is ok and the cleanup is verified, and that it deletes
// the campaign whatever failed. The real daemon's cases are TestDemo's.
func TestLauncherDemoVerdicts(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		testenv.Unavailable(t, "python3 is needed to run the launcher demo: "+err.Error())
	}
	// A base_url nothing listens on: the episode there fails.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()

	const cleanupReport = "/state/demo/cleanup-1-1.json"
	const ok, problem = `{"status": "verified"}`, `{"title": "Internal Server Error", "status": 500, "detail": "cleanup of demo is failed, NOT verified"}`
	tests := []struct {
		name         string
		workspaces   string // the create's answer's workspaces
		attestation  string // GET .../attestation's body; "" answers 500
		deleteStatus int
		deleteBody   string
		wantOK       bool
		wantCleanup  string
	}{
		{"all_well", `[]`, `{"ok": true, "failed_checks": []}`, 200, ok, true, "verified"},
		{"attestation_not_ok", `[]`, `{"ok": false, "failed_checks": ["isolation"]}`, 200, ok, false, "verified"},
		{"attestation_unreadable", `[]`, ``, 200, ok, false, "verified"},
		{"delete_refused", `[]`, `{"ok": true, "failed_checks": []}`, 500, problem, false, "failed"},
		{"delete_says_failed", `[]`, `{"ok": true, "failed_checks": []}`, 200, `{"status": "failed"}`, false, "failed"},
		{"episode_failed", `[{"agent_id": "agent-000000000000000000000001", "task_id": "software/median@7", "base_url": "` + dead + `"}]`,
			`{"ok": true, "failed_checks": []}`, 200, ok, false, "verified"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var deletes atomic.Int32
			mux := http.NewServeMux()
			mux.HandleFunc("POST /v1/campaigns", func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") != "Bearer test-token" {
					http.Error(w, "no token", http.StatusUnauthorized)
					return
				}
				w.WriteHeader(http.StatusCreated)
				w.Write([]byte(`{"campaign_id": "demo", "state_dir": "/state/demo", "attestation": {"ok": true, "path": "/state/demo/attestation.json"}, "workspaces": ` + tt.workspaces + `}`))
			})
			mux.HandleFunc("GET /v1/campaigns/demo/attestation", func(w http.ResponseWriter, r *http.Request) {
				if tt.attestation == "" {
					http.Error(w, `{"detail": "broken"}`, http.StatusInternalServerError)
					return
				}
				w.Write([]byte(tt.attestation))
			})
			mux.HandleFunc("DELETE /v1/campaigns/demo", func(w http.ResponseWriter, r *http.Request) {
				deletes.Add(1)
				w.WriteHeader(tt.deleteStatus)
				w.Write([]byte(tt.deleteBody))
			})
			// The campaign's view names its cleanup report's file.
			mux.HandleFunc("GET /v1/campaigns/demo", func(w http.ResponseWriter, r *http.Request) {
				w.Write([]byte(`{"campaign_id": "demo", "cleanup": {"ok": true, "status": "verified", "path": "` + cleanupReport + `"}}`))
			})
			api := httptest.NewServer(mux)
			defer api.Close()

			result := filepath.Join(t.TempDir(), "result.json")
			cmd := exec.Command("python3", "testdata/clients/launcher_demo.py", "--api", api.URL, "--image", "sha256:0",
				"--oracles", "testdata/oracles", "--campaign", "demo", "--result", result, "software/median@7=code")
			cmd.Env = append(os.Environ(), "AGENTPEN_TOKEN=test-token")
			out, err := cmd.CombinedOutput()
			code := 0
			if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			var res demoResult
			b, rerr := os.ReadFile(result)
			if rerr == nil {
				rerr = json.Unmarshal(b, &res)
			}
			if rerr != nil {
				t.Fatalf("result.json: %v\n%s", rerr, out)
			}
			wantCode := 1
			if tt.wantOK {
				wantCode = 0
			}
			if code != wantCode || res.OK != tt.wantOK || res.Cleanup.Status != tt.wantCleanup || deletes.Load() != 1 {
				t.Errorf("exit %d, ok %v, cleanup %q, %d deletes; want exit %d, ok %v, cleanup %q, 1 delete\n%s",
					code, res.OK, res.Cleanup.Status, deletes.Load(), wantCode, tt.wantOK, tt.wantCleanup, out)
			}
			if res.Cleanup.Report != cleanupReport || !strings.Contains(string(out), "cleanup report:     "+cleanupReport+"\n") {
				t.Errorf("the cleanup report is %q, want the campaign's %q, in result.json and the table\n%s", res.Cleanup.Report, cleanupReport, out)
			}
			if !strings.Contains(string(out), "cleanup:            "+tt.wantCleanup) {
				t.Errorf("the table's cleanup line does not say %q:\n%s", tt.wantCleanup, out)
			}
			for _, w := range res.Workspaces {
				if w.Error == "" || w.Reward != 0 {
					t.Errorf("a failed episode reads %+v: want its error and reward 0", w)
				}
			}
		})
	}
}
