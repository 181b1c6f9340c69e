package grader

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/testlog"
	"github.com/agentpen/agentpen/workbench/tasks"
)

// countingCatalogue is package tasks, counting every Build: the grader's
// only way to a task, so a refused call must leave the count unchanged.
type countingCatalogue struct{ builds atomic.Int64 }

func (c *countingCatalogue) Build(id string) (*tasks.Task, error) {
	c.builds.Add(1)
	return tasks.Build(id)
}

// testServer is a grader service on a loopback httptest server, with its
// JSON log and its catalogue's build count.
type testServer struct {
	url  string
	cat  *countingCatalogue
	logs *testlog.Buffer
}

const testKey = "k3y-For-Tests-0f6c1a9e7d2b4c58a1"

func newTestServer(t *testing.T, key string) *testServer {
	t.Helper()
	ts := &testServer{cat: &countingCatalogue{}, logs: &testlog.Buffer{}}
	srv, err := NewServer(ServerConfig{
		Key:           key,
		InsecureNoKey: key == "",
		Catalogue:     ts.cat,
		Logger:        slog.New(slog.NewJSONHandler(ts.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	ts.url = hs.URL
	return ts
}

// reply is one raw HTTP reply.
type reply struct {
	status int
	header http.Header
	body   string
}

// do sends one request with the given headers (each "Name: value") and
// returns the reply.
func do(t *testing.T, method, url, body string, headers ...string) reply {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Add(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// keyAnswer is a non-code task's correct answer as an agent would write
// it.
func keyAnswer(t *tasks.Task) string {
	if t.Kind == tasks.KindSet || t.Kind == tasks.KindList {
		return strings.Join(t.Key.Items, "\n")
	}
	return t.Key.Answer
}

func newJSONLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// recorder is an http.RoundTripper that keeps every byte of every
// response it carries: status line, headers and the body as it is read.
type recorder struct {
	next http.RoundTripper

	mu        sync.Mutex
	b         bytes.Buffer
	responses int
	bodies    [][]byte // each response's body, as read
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.responses++
	r.b.WriteString(resp.Proto + " " + resp.Status + "\r\n")
	resp.Header.Write(&r.b)
	r.b.WriteString("\r\n")
	r.bodies = append(r.bodies, nil)
	i := len(r.bodies) - 1
	r.mu.Unlock()
	resp.Body = &teeBody{ReadCloser: resp.Body, r: r, i: i}
	return resp, nil
}

type teeBody struct {
	io.ReadCloser
	r *recorder
	i int
}

func (t *teeBody) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	t.r.mu.Lock()
	t.r.b.Write(p[:n])
	t.r.bodies[t.i] = append(t.r.bodies[t.i], p[:n]...)
	t.r.mu.Unlock()
	return n, err
}

// bodyList returns each response body recorded so far.
func (r *recorder) bodyList() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.bodies...)
}

// all returns everything recorded so far.
func (r *recorder) all() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.b.String()
}

// count returns how many responses were recorded.
func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.responses
}
