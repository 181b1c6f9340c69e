package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/workbench/probe"
)

// TestProbeCommand: `workbench probe` prints one JSON line and returns
// nil (exit 0) for an expected status, errProbeFailed (exit 1) otherwise,
// errUsage (exit 2) for bad flags; a --header-env value reaches the
// server and never the output.
func TestProbeCommand(t *testing.T) {
	const secret = "probe-secret-91c2"
	t.Setenv("WB_PROBE_KEY", secret)
	t.Setenv("WB_PROBE_EMPTY", "")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health":
			w.Write([]byte(`{"status":"healthy"}`))
		case "/keyed":
			if r.Header.Get("X-API-Key") != secret || r.Method != http.MethodPost {
				w.WriteHeader(401)
				return
			}
			w.WriteHeader(204)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	for _, tt := range []struct {
		name   string
		args   []string
		want   error // nil, errProbeFailed or errUsage
		status int
	}{
		{name: "ok", args: []string{srv.URL + "/health"}, status: 200},
		{name: "flags_before_url", args: []string{"--expect-status", "200", srv.URL + "/health"}, status: 200},
		{name: "flags_after_url", args: []string{srv.URL + "/health", "--expect-status", "201,202"}, want: errProbeFailed, status: 200},
		{name: "not_found", args: []string{srv.URL + "/nope"}, want: errProbeFailed, status: 404},
		{name: "not_found_expected", args: []string{srv.URL + "/nope", "--expect-status=404"}, status: 404},
		{name: "header_env", args: []string{"--method", "POST", "--header-env", "X-API-Key=WB_PROBE_KEY", srv.URL + "/keyed"}, status: 204},
		{name: "header_plain", args: []string{srv.URL + "/keyed", "--method=post", "--header", "X-API-Key=" + secret}, status: 204},
		{name: "wrong_method", args: []string{srv.URL + "/keyed", "--header-env", "X-API-Key=WB_PROBE_KEY"}, want: errProbeFailed, status: 401},
		{name: "no_url", args: []string{"--method", "GET"}, want: errUsage},
		{name: "two_urls", args: []string{srv.URL, srv.URL}, want: errUsage},
		{name: "bad_status", args: []string{srv.URL, "--expect-status", "2000"}, want: errUsage},
		{name: "bad_method", args: []string{srv.URL, "--method", "DELETE"}, want: errUsage},
		{name: "bad_timeout", args: []string{srv.URL, "--timeout", "0s"}, want: errUsage},
		{name: "bad_scheme", args: []string{"file:///etc/passwd"}, want: errUsage},
		{name: "header_env_unset", args: []string{srv.URL, "--header-env", "X-API-Key=WB_PROBE_UNSET_VAR"}, want: errUsage},
		{name: "header_env_empty", args: []string{srv.URL, "--header-env", "X-API-Key=WB_PROBE_EMPTY"}, want: errUsage},
		{name: "header_env_bad_name", args: []string{srv.URL, "--header-env", "X-API-Key=1-bad"}, want: errUsage},
		{name: "header_without_value", args: []string{srv.URL, "--header", "X-API-Key"}, want: errUsage},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(t.Context(), append([]string{"probe"}, tt.args...), &stdout, &stderr, os.Getenv)
			if !matchesWant(err, tt.want) {
				t.Fatalf("err = %v, want %v\nstderr: %s", err, tt.want, stderr.String())
			}
			if strings.Contains(stdout.String()+stderr.String()+errString(err), secret) {
				t.Errorf("output holds the header value:\n%s%s", stdout.String(), stderr.String())
			}
			if errors.Is(tt.want, errUsage) {
				if stdout.Len() != 0 {
					t.Errorf("bad flags printed a result: %s", stdout.String())
				}
				return
			}
			var res struct {
				URL, Method, Error string
				Status             int
				OK                 bool
				LatencyMS          *float64 `json:"latency_ms"`
			}
			lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
			if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &res) != nil {
				t.Fatalf("stdout is not one JSON line: %q", stdout.String())
			}
			if res.Status != tt.status || res.OK != (tt.want == nil) || res.LatencyMS == nil || (res.Error == "") != res.OK {
				t.Errorf("result %s, want status %d ok %v", lines[0], tt.status, tt.want == nil)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestProbeBatchCommand: --batch runs every probe and exits 0 whatever the
// outcomes; a bad batch, or a batch with a URL, is a usage error.
func TestProbeBatchCommand(t *testing.T) {
	const secret = "probe-batch-secret-77"
	t.Setenv("WB_PROBE_BATCH_KEY", secret)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-API-Key") != secret {
			w.WriteHeader(401)
		}
	}))
	defer srv.Close()
	batch := `{"probes":[{"id":"h","kind":"http","url":"` + srv.URL + `/x","header_env":{"X-API-Key":"WB_PROBE_BATCH_KEY"}},` +
		`{"id":"n","kind":"http","url":"` + srv.URL + `/x","method":"POST","expect":[401]},{"id":"s","kind":"socket"}]}`
	var stdout bytes.Buffer
	if err := run(t.Context(), []string{"probe", "--batch", batch}, &stdout, io.Discard, os.Getenv); err != nil {
		t.Fatal(err)
	}
	var res struct {
		Results []struct {
			ID, Outcome string
			Status      int
		}
		Binary *probe.Binary
	}
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil || len(res.Results) != 3 {
		t.Fatalf("stdout %q: %v", stdout.String(), err)
	}
	// The batch names the binary that ran it: this test's executable.
	exe, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(exe); res.Binary == nil || res.Binary.Digest != "sha256:"+hex.EncodeToString(sum[:]) || res.Binary.Version == "" || res.Binary.Commit == "" {
		t.Errorf("the batch's binary: %+v, want this executable's digest and version", res.Binary)
	}
	if r := res.Results[0]; r.ID != "h" || r.Outcome != "reply" || r.Status != 200 {
		t.Errorf("keyed probe %+v", r)
	}
	if r := res.Results[1]; r.Status != 401 {
		t.Errorf("unkeyed probe %+v", r)
	}
	if strings.Contains(stdout.String(), secret) {
		t.Fatal("the output holds the key")
	}
	for _, args := range [][]string{
		{"probe", "--batch", "{"},
		{"probe", "--batch", `{"probes":[]}`},
		{"probe", "--batch", `{"probes":[{"id":"a","kind":"socket"}],"extra":1}`},
		{"probe", "--batch", `{"probes":[{"id":"a","kind":"socket"}]}`, srv.URL},
		{"probe"},
	} {
		err := run(t.Context(), args, io.Discard, io.Discard, os.Getenv)
		if !errors.Is(err, errUsage) && !matchesWant(err, errUsage) {
			t.Errorf("%q: err %v, want a usage error", args, err)
		}
	}
}

// TestProbeEpisodeIsolation (root): an episode probe of a live server runs
// code as one of its episodes; in namespaces that code's PID and network
// namespaces are not the server's, it has lo alone and no vsock; with the
// uid-only sandbox it shares the server's network namespace, and the
// probe says which sandbox the server runs.
func TestProbeEpisodeIsolation(t *testing.T) {
	testenv.RequireRoot(t)
	for _, mode := range []string{"namespaces", "uid-only"} {
		t.Run(mode, func(t *testing.T) {
			ls := startServe(t, "--sandbox", mode)
			batch := `{"probes":[{"id":"e","kind":"episode","listen":"unix:` + ls.Socket + `","timeout_ms":20000}]}`
			var stdout bytes.Buffer
			if err := run(t.Context(), []string{"probe", "--batch", batch}, &stdout, io.Discard, os.Getenv); err != nil {
				t.Fatal(err)
			}
			var res probe.BatchResult
			if err := json.Unmarshal(stdout.Bytes(), &res); err != nil || len(res.Results) != 1 {
				t.Fatalf("%v: %s", err, stdout.String())
			}
			o := res.Results[0]
			iso := o.Isolation
			if o.Outcome != probe.OutcomeFound || iso == nil || iso.Sandbox != mode || iso.ServerPidNS == "" || iso.ServerNetNS == "" {
				t.Fatalf("result %+v %+v", o, iso)
			}
			isolated := iso.EpisodePidNS != iso.ServerPidNS && iso.EpisodeNetNS != iso.ServerNetNS &&
				slices.Equal(iso.Interfaces, []string{"lo"}) && strings.HasPrefix(iso.VSock, "denied")
			if isolated != (mode == "namespaces") {
				t.Fatalf("%s: isolated %v: %+v", mode, isolated, iso)
			}
			if !strings.HasPrefix(iso.VSock, "denied") {
				t.Fatalf("vsock %q: the filter denies it in every mode", iso.VSock)
			}
		})
	}
}

// TestProbeBatchesCommand: --batches answers each batch of stdin on its
// own line, before it reads the next (a batch sent after the answer to
// the one before is run after it), exits at the end of stdin, and stops
// with a usage error at a bad batch, the batches before it answered.
func TestProbeBatchesCommand(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Hits", strconv.Itoa(int(hits.Add(1))))
	}))
	defer srv.Close()
	batch := func(id string) string {
		return `{"probes":[{"id":"` + id + `","kind":"http","url":"` + srv.URL + `/x"}]}` + "\n"
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := runProbe(t.Context(), []string{"--batches"}, inR, outW, os.Getenv)
		outW.Close()
		done <- err
	}()
	lines := bufio.NewScanner(outR)
	var binaries []string
	for _, id := range []string{"first", "second"} {
		if _, err := io.WriteString(inW, batch(id)); err != nil {
			t.Fatal(err)
		}
		if !lines.Scan() {
			t.Fatalf("no answer to batch %s: %v", id, lines.Err())
		}
		var res struct {
			Results []struct{ ID, Outcome string }
			Binary  *probe.Binary
		}
		if err := json.Unmarshal(lines.Bytes(), &res); err != nil || len(res.Results) != 1 || res.Results[0].ID != id || res.Results[0].Outcome != "reply" || res.Binary == nil || res.Binary.Digest == "" {
			t.Fatalf("answer to batch %s: %q (%v)", id, lines.Text(), err)
		}
		binaries = append(binaries, res.Binary.Digest)
		// Answered before the next batch is sent: one request so far per batch.
		if n := hits.Load(); int(n) != len(binaries) {
			t.Fatalf("after batch %s the server saw %d requests, want %d", id, n, len(binaries))
		}
	}
	if binaries[0] != binaries[1] {
		t.Errorf("the batches name two binaries: %q", binaries)
	}
	inW.Close()
	if err := <-done; err != nil {
		t.Fatalf("at the end of stdin: %v, want exit 0", err)
	}
	if lines.Scan() {
		t.Errorf("more output after the last batch: %q", lines.Text())
	}

	var out bytes.Buffer
	err := runProbe(t.Context(), []string{"--batches"}, strings.NewReader(batch("ok")+"{\n"+batch("never")), &out, os.Getenv)
	if !errors.Is(err, errUsage) && !matchesWant(err, errUsage) {
		t.Errorf("a bad batch: err %v, want a usage error", err)
	}
	if n := strings.Count(out.String(), "\n"); n != 1 || !strings.Contains(out.String(), `"ok"`) || strings.Contains(out.String(), `"never"`) {
		t.Errorf("a bad second batch: output %q, want the first batch's answer alone", out.String())
	}
	for _, args := range [][]string{{"--batches", srv.URL}, {"--batches", "--batch", batch("x")}} {
		if err := runProbe(t.Context(), args, strings.NewReader(""), io.Discard, os.Getenv); !errors.Is(err, errUsage) && !matchesWant(err, errUsage) {
			t.Errorf("%q: err %v, want a usage error", args, err)
		}
	}
}
