package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/internal/testkit/workbenchtest"
	"github.com/agentpen/agentpen/workbench/client"
)

func TestCheckDebugAddr(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:6060", true},
		{"127.0.0.2:0", true},
		{"[::1]:6060", true},
		{"localhost:6060", true},
		{"0.0.0.0:6060", false},
		{"[::]:6060", false},
		{":6060", false},
		{"10.0.0.1:6060", false},
		{"example.com:6060", false},
		{"127.0.0.1", false},
	} {
		t.Run(strings.NewReplacer(":", "_", ".", "_", "[", "", "]", "").Replace(tt.addr), func(t *testing.T) {
			err := checkDebugAddr(tt.addr)
			if (err == nil) != tt.ok || (err != nil && !matchesWant(err, errUsage)) {
				t.Fatalf("checkDebugAddr(%q) = %v, want ok %v (a usage error otherwise)", tt.addr, err, tt.ok)
			}
		})
	}
	for _, cmd := range []string{"serve", "grader"} {
		err := run(t.Context(), []string{cmd, "--debug-listen", "0.0.0.0:6060"}, io.Discard, io.Discard, os.Getenv)
		if !matchesWant(err, errUsage) || !strings.Contains(err.Error(), "loopback only") {
			t.Errorf("%s --debug-listen 0.0.0.0:6060: %v, want a usage error", cmd, err)
		}
	}
}

// debugAddr returns the address a live server logged for its profiles.
func debugAddr(t *testing.T, logs string) string {
	t.Helper()
	for _, line := range strings.Split(logs, "\n") {
		var rec struct{ Msg, Addr string }
		if json.Unmarshal([]byte(line), &rec) == nil && strings.HasPrefix(rec.Msg, "serving profiles") {
			return strings.TrimSuffix(rec.Addr, "/debug/pprof/")
		}
	}
	t.Fatalf("no profiling address in the log:\n%s", logs)
	return ""
}

// TestServeDebugListen (root): --debug-listen serves the heap profile on
// loopback to a normal client and closes episode code's connection at
// accept.
func TestServeDebugListen(t *testing.T) {
	testenv.RequireRoot(t)
	ls := startServe(t, "--debug-listen", "127.0.0.1:0")
	base := debugAddr(t, ls.Logs.String())
	resp, err := http.Get(base + "/debug/pprof/heap?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "heap profile") {
		t.Fatalf("heap profile: %d %.200q", resp.StatusCode, body)
	}
	ctx := t.Context()
	w := workbenchtest.Dial(t, ctx, ls.URL)
	if _, err := w.Reset(ctx, client.ResetOptions{TaskID: "logs/error_count"}); err != nil {
		t.Fatal(err)
	}
	code := fmt.Sprintf(`import urllib.request
try:
    urllib.request.urlopen(%q, timeout=5).read()
    print("PROFILE READ")
except Exception as e:
    print("refused", type(e).__name__)
`, base+"/debug/pprof/goroutine?debug=1")
	r, err := w.Step(ctx, "run_python", workbenchtest.Args(map[string]any{"code": code}))
	if err != nil {
		t.Fatal(err)
	}
	if out := r.Observation.Output; !strings.Contains(out, "refused") || strings.Contains(out, "PROFILE READ") {
		t.Errorf("episode code and the profiles: %q", out)
	}
}
