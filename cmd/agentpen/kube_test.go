package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentpen/agentpen/internal/cli"
)

// fakeAPIServer answers what kube.Open asks (the server's version, the
// kube-system namespace) and counts every other request: the cluster a
// command must not touch.
func fakeAPIServer(t *testing.T) (kubeconfig string, others *atomic.Int32) {
	t.Helper()
	others = new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/version":
			fmt.Fprint(w, `{"major":"1","minor":"37","gitVersion":"v1.37.2"}`)
		case "/api/v1/namespaces/kube-system":
			fmt.Fprint(w, `{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"kube-system","uid":"6b9c3f0e-0000-4000-8000-000000000001"}}`)
		default:
			others.Add(1)
			http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","code":403}`, http.StatusForbidden)
		}
	}))
	t.Cleanup(srv.Close)
	kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: %s\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\nusers:\n- name: u\n  user: {}\ncurrent-context: c\n", srv.URL)
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig, others
}

// TestClusterCampaignsRefusedUntilAttestable: agentpen up and serve on a
// cluster, whose campaigns the attestation cannot judge yet, exit 2
// saying so before they make anything: the cluster is asked nothing but
// who it is, and the state root holds no campaign. up used to bring the
// campaign up only to remove it, and serve to accept every create and
// refuse it after its bring-up.
func TestClusterCampaignsRefusedUntilAttestable(t *testing.T) {
	kubeconfig, others := fakeAPIServer(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	env := map[string]string{"HOME": dir, "DOCKER_HOST": "", "AGENTPEN_API_KEY": testAPIKey, "AGENTPEN_SERVE_TOKEN": "serve-test-token-5d0c8e1a47b93f26a1"}
	getenv := func(k string) string { return env[k] }
	spec := filepath.Join(dir, "spec.json")
	if err := os.WriteFile(spec, []byte(`{"campaign_id":"on-a-cluster","server":{"image":"agentpen/workbench:dev"},"workspaces":[{"task_id":"software/median","image":"agentpen/workbench:dev"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"up", "--state-root", state, "--kubeconfig", kubeconfig, spec},
		{"serve", "--listen", "127.0.0.1:0", "--state-root", state, "--kubeconfig", kubeconfig},
	} {
		// A serve that started would serve until the deadline, and fail.
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		var out, errb bytes.Buffer
		err := run(ctx, args, &out, &errb, getenv)
		cancel()
		msg := cli.Message("agentpen", err)
		if exitCode(err) != exitBadInput || !strings.Contains(msg, "cannot be attested") || !strings.Contains(msg, "nothing was made") {
			t.Fatalf("%s: exit %d, message %q; want %d saying the campaigns cannot be attested", args[0], exitCode(err), msg, exitBadInput)
		}
	}
	if n := others.Load(); n != 0 {
		t.Fatalf("the cluster was asked %d requests beyond its identity", n)
	}
	if entries, err := os.ReadDir(filepath.Join(state, "campaigns")); err == nil && len(entries) != 0 {
		t.Fatalf("the state root holds %d campaigns after the refusals", len(entries))
	}
}
