package grader

import (
	"context"
	"errors"
	"github.com/agentpen/agentpen/workbench/tasks"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentpen/agentpen/workbench/episode"
)

func TestNewClientValidates(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		cfg  ClientConfig
		ok   bool
	}{
		{name: "ok", cfg: ClientConfig{URL: "http://grader:8080", Key: "k"}, ok: true},
		{name: "ok_https_prefix", cfg: ClientConfig{URL: "https://grader/api/", Key: "k", Attempts: 1, Timeout: time.Second}, ok: true},
		{name: "no_key", cfg: ClientConfig{URL: "http://grader:8080"}},
		{name: "key_with_newline", cfg: ClientConfig{URL: "http://grader:8080", Key: "k\r\nX-Evil: 1"}},
		{name: "no_url", cfg: ClientConfig{Key: "k"}},
		{name: "ftp", cfg: ClientConfig{URL: "ftp://grader", Key: "k"}},
		{name: "no_host", cfg: ClientConfig{URL: "http:///v1", Key: "k"}},
		{name: "user_info", cfg: ClientConfig{URL: "http://user:secret@grader", Key: "k"}},
		{name: "query", cfg: ClientConfig{URL: "http://grader/?a=b", Key: "k"}},
		{name: "fragment", cfg: ClientConfig{URL: "http://grader/#x", Key: "k"}},
		{name: "negative_timeout", cfg: ClientConfig{URL: "http://grader", Key: "k", Timeout: -1}},
		{name: "three_attempts", cfg: ClientConfig{URL: "http://grader", Key: "k", Attempts: 3}},
		{name: "ok_unix", cfg: ClientConfig{URL: "unix:///run/agentpen/grader/grader.sock", Key: "k"}, ok: true},
		{name: "unix_relative", cfg: ClientConfig{URL: "unix:run/grader.sock", Key: "k"}},
		{name: "unix_host", cfg: ClientConfig{URL: "unix://host/run/grader.sock", Key: "k"}},
		{name: "unix_dotdot", cfg: ClientConfig{URL: "unix:///run/../etc/grader.sock", Key: "k"}},
		{name: "unix_query", cfg: ClientConfig{URL: "unix:///run/grader.sock?x=1", Key: "k"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewClient(tt.cfg)
			if (err == nil) != tt.ok {
				t.Fatalf("NewClient(%+v): err = %v, want ok %v", tt.cfg, err, tt.ok)
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("error repeats the URL's password: %v", err)
			}
		})
	}
}

// TestClientOverUnixSocket: a grader on a unix socket (a campaign without
// networks) grades as one on TCP does.
func TestClientOverUnixSocket(t *testing.T) {
	srv, err := NewServer(ServerConfig{Key: testKey, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "grader.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv.Handler()}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	c, err := NewClient(ClientConfig{URL: "unix://" + sock, Key: testKey})
	if err != nil {
		t.Fatal(err)
	}
	task, err := tasks.Build("data/csv_region_total@2")
	if err != nil {
		t.Fatal(err)
	}
	credit, reason, err := c.ScoreAnswer(t.Context(), task.TaskID, "0")
	if err != nil {
		t.Fatalf("score over the socket: %v", err)
	}
	if credit != 0 || reason == "" {
		t.Fatalf("grade of a wrong answer: %v %q", credit, reason)
	}
}

// TestClientFailures: each failure of the grader becomes an *Error that
// names the route and the status or failure, is tried once more only when
// that may help (no response, 502/503/504; never after a timeout), and
// never names the grader's address or the key.
func TestClientFailures(t *testing.T) {
	t.Parallel()
	const key = "client-test-key-c0ffee5a9d13"
	for _, tt := range []struct {
		name      string
		handler   func(n int64, w http.ResponseWriter, r *http.Request)
		attempts  int
		wantCalls int64
		wantErr   string // substring of the error; "" means success
		status    int
		timeout   time.Duration // 0 means 10 s: the reply comes at once
	}{
		{name: "unauthorized_not_retried", wantCalls: 1, status: 401, wantErr: "grader POST /v1/score: status 401 (unauthorized): missing or wrong API key",
			handler: func(_ int64, w http.ResponseWriter, _ *http.Request) {
				writeError(w, 401, "unauthorized", "missing or wrong API key")
			}},
		{name: "internal_not_retried", wantCalls: 1, status: 500, wantErr: "status 500 (internal)",
			handler: func(_ int64, w http.ResponseWriter, _ *http.Request) {
				writeError(w, 500, "internal", "internal error")
			}},
		{name: "unavailable_retried_then_ok", wantCalls: 2,
			handler: func(n int64, w http.ResponseWriter, _ *http.Request) {
				if n == 1 {
					http.Error(w, "busy", http.StatusServiceUnavailable)
					return
				}
				writeJSON(w, 200, verdict{Credit: 0.5, Reason: "some items are missing"})
			}},
		{name: "unavailable_twice", wantCalls: 2, status: 503, wantErr: "status 503: Service Unavailable",
			handler: func(_ int64, w http.ResponseWriter, _ *http.Request) {
				http.Error(w, "busy", http.StatusServiceUnavailable)
			}},
		{name: "one_attempt_only", attempts: 1, wantCalls: 1, status: 502, wantErr: "status 502",
			handler: func(_ int64, w http.ResponseWriter, _ *http.Request) { http.Error(w, "x", http.StatusBadGateway) }},
		{name: "timeout_not_retried", wantCalls: 1, wantErr: "no reply within 2s", timeout: 2 * time.Second,
			handler: func(_ int64, _ http.ResponseWriter, r *http.Request) {
				// The body read, the server notices the client going away.
				io.Copy(io.Discard, r.Body)
				select {
				case <-r.Context().Done():
				case <-time.After(time.Minute):
				}
			}},
		{name: "credit_out_of_range", wantCalls: 1, wantErr: "bad reply",
			handler: func(_ int64, w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, verdict{Credit: 1.5}) }},
		// A 200 that is not a verdict (another service at the URL, a
		// broken grader) is a failure, not a grade of 0.
		{name: "empty_object_is_no_verdict", wantCalls: 1, wantErr: "bad reply",
			handler: func(_ int64, w http.ResponseWriter, _ *http.Request) { w.Write([]byte(`{}`)) }},
		{name: "null_is_no_verdict", wantCalls: 1, wantErr: "bad reply",
			handler: func(_ int64, w http.ResponseWriter, _ *http.Request) { w.Write([]byte(`null`)) }},
		{name: "other_service_is_no_verdict", wantCalls: 1, wantErr: "bad reply",
			handler: func(_ int64, w http.ResponseWriter, _ *http.Request) { w.Write([]byte(`{"status":"ok"}`)) }},
		{name: "not_json", wantCalls: 1, status: 200, wantErr: "bad reply",
			handler: func(_ int64, w http.ResponseWriter, _ *http.Request) { w.Write([]byte("<html>")) }},
		{name: "reply_too_large", wantCalls: 1, status: 200, wantErr: "reply too large",
			handler: func(_ int64, w http.ResponseWriter, _ *http.Request) {
				w.Write([]byte(`{"credit":1,"reason":"`))
				w.Write(make([]byte, maxResponseBytes+10))
			}},
		{name: "connection_dropped_retried", wantCalls: 2, wantErr: "no response",
			handler: func(_ int64, w http.ResponseWriter, _ *http.Request) {
				c, _, err := http.NewResponseController(w).Hijack()
				if err == nil {
					c.Close()
				}
			}},
		{name: "redirect_not_followed", wantCalls: 1, status: 307, wantErr: "status 307",
			handler: func(_ int64, w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "http://127.0.0.1:9/steal", http.StatusTemporaryRedirect)
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int64
			var sawKey atomic.Bool
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				sawKey.Store(r.Header.Get(KeyHeader) == key)
				tt.handler(calls.Add(1), w, r)
			}))
			defer hs.Close()
			timeout := tt.timeout
			if timeout == 0 {
				timeout = 10 * time.Second
			}
			c, err := NewClient(ClientConfig{URL: hs.URL, Key: key, Timeout: timeout, Attempts: tt.attempts})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			credit, _, err := c.ScoreAnswer(context.Background(), "logs/error_count", "1")
			// A call never outlasts its attempts' timeouts (two at most),
			// with room for a loaded machine: it does not hang. Only the
			// case about a timeout has a short one; the others' replies
			// come at once, but a loaded machine (a reply too large is
			// read to its bound first) can take seconds to deliver them.
			if d, limit := time.Since(start), 2*timeout+3*time.Second; d > limit {
				t.Errorf("call took %v, over its timeouts' %v", d, limit)
			}
			if got := calls.Load(); got != tt.wantCalls {
				t.Errorf("grader saw %d calls, want %d", got, tt.wantCalls)
			}
			if !sawKey.Load() {
				t.Error("the grader did not get the key")
			}
			if tt.wantErr == "" {
				if err != nil || credit != 0.5 {
					t.Fatalf("got %v, %v; want 0.5", credit, err)
				}
				return
			}
			var ge *Error
			if !errors.As(err, &ge) || !strings.Contains(err.Error(), tt.wantErr) || ge.Status != tt.status || ge.Route != RouteScore {
				t.Fatalf("err = %v (%#v), want *Error for %s with status %d containing %q", err, ge, RouteScore, tt.status, tt.wantErr)
			}
			if credit != 0 {
				t.Errorf("credit %v with an error", credit)
			}
			host := strings.TrimPrefix(hs.URL, "http://")
			h, p, _ := net.SplitHostPort(host)
			for _, s := range []string{key, host, h, ":" + p} {
				if strings.Contains(err.Error(), s) {
					t.Errorf("error %q names %q", err, s)
				}
			}
		})
	}
}

// TestClientGraderDown: with nothing listening, every call fails as
// "no response (connection refused)", after two attempts.
func TestClientGraderDown(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var tries atomic.Int64
	tr := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		tries.Add(1)
		return http.DefaultTransport.RoundTrip(r)
	})
	c, err := NewClient(ClientConfig{URL: "http://" + addr, Key: "k", Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.HiddenInputs(context.Background(), "software/median")
	if err == nil || err.Error() != "grader POST /v1/cases: no response (connection refused)" {
		t.Fatalf("err = %v", err)
	}
	if tries.Load() != 2 {
		t.Errorf("%d attempts, want 2", tries.Load())
	}
	_, _, err = c.Judge(context.Background(), "software/median", nil, []episode.Output{{}})
	if err == nil || !strings.HasPrefix(err.Error(), "grader POST /v1/judge: no response") {
		t.Fatalf("err = %v", err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
