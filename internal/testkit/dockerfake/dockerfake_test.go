package dockerfake

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

func get(t *testing.T, c *http.Client, method, url, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestModelAndScripts(t *testing.T) {
	d := New()
	c := d.Client()
	st, body := get(t, c, "POST", "http://docker/v1.41/containers/create?name=a", `{"Image":"img","Labels":{"k":"v"}}`)
	if st != 201 {
		t.Fatalf("create: %d %s", st, body)
	}
	var created struct{ Id string }
	json.Unmarshal([]byte(body), &created)
	if st, _ := get(t, c, "POST", "http://docker/v1.41/containers/create?name=a", `{}`); st != 409 {
		t.Fatalf("a second create of one name: %d, want 409", st)
	}
	if st, body := get(t, c, "GET", "http://docker/v1.41/containers/a/json", ""); st != 200 || !strings.Contains(body, created.Id) {
		t.Fatalf("inspect by name: %d %s", st, body)
	}
	// Scripted: the first delete fails, the next passes to the model.
	d.On("DELETE /containers/{id}", Reply{Status: 500, Body: "busy"}, Pass)
	if st, body := get(t, c, "DELETE", "http://docker/v1.41/containers/"+created.Id, ""); st != 500 || !strings.Contains(body, `"message":"busy"`) {
		t.Fatalf("scripted delete: %d %s", st, body)
	}
	if st, _ := get(t, c, "DELETE", "http://docker/v1.41/containers/"+created.Id, ""); st != 204 {
		t.Fatalf("second delete: %d", st)
	}
	if len(d.Containers()) != 0 {
		t.Fatalf("model still holds %v", d.Containers())
	}
	if n := len(d.CallsTo("DELETE /containers/{id}")); n != 2 {
		t.Fatalf("recorded %d deletes, want 2", n)
	}
	// Apply: the model acts, the client hears an error.
	d.On("POST /networks/create", Reply{Status: 500, Body: "timeout", Apply: true})
	if st, _ := get(t, c, "POST", "http://docker/v1.41/networks/create", `{"Name":"n","Labels":{"a":"b"}}`); st != 500 {
		t.Fatalf("applied create: %d", st)
	}
	if nets := d.Networks(); len(nets) != 1 || nets[0].Labels["a"] != "b" {
		t.Fatalf("applied create left %v", nets)
	}
	if st, body := get(t, c, "GET", `http://docker/v1.41/networks?filters={"label":{"a=b":true}}`, ""); st != 200 || !strings.Contains(body, `"Name":"n"`) {
		t.Fatalf("label-filtered list: %d %s", st, body)
	}
	if st, body := get(t, c, "GET", `http://docker/v1.41/networks?filters={"label":{"a=c":true}}`, ""); st != 200 || strings.Contains(body, `"Name":"n"`) {
		t.Fatalf("a filter that does not match listed it: %s", body)
	}
}

func TestServeUnix(t *testing.T) {
	d := New()
	host := d.ServeUnix(t)
	if !strings.HasPrefix(host, "unix://") || !strings.Contains(host, "/rootless/") {
		t.Fatalf("host %q", host)
	}
	sock := strings.TrimPrefix(host, "unix://")
	c := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		DisableKeepAlives: true,
	}}
	if st, body := get(t, c, "GET", "http://docker/_ping", ""); st != 200 || body != "OK" {
		t.Fatalf("ping over the socket: %d %q", st, body)
	}
	d.On("GET /_ping", Reply{Drop: true})
	req, _ := http.NewRequest("GET", "http://docker/_ping", nil)
	if resp, err := c.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("a dropped connection answered")
	}
}

// TestInFlightAndSetRunning: a call the client gave up on is in flight
// until the fake carried it out, and SetRunning is what inspect says.
func TestInFlightAndSetRunning(t *testing.T) {
	d := New()
	release := make(chan struct{})
	d.OnFunc("POST /containers/create", func(Call) Reply { <-release; return Pass })
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://docker/v1.41/containers/create?name=late", strings.NewReader(`{"Image":"img"}`))
	errc := make(chan error, 1)
	go func() { _, err := d.Client().Do(req); errc <- err }()
	testenv.WaitFor(t, "the call sent", func() bool { return d.InFlight() == 1 })
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("the cancelled call returned no error")
	}
	if d.InFlight() != 1 || len(d.Containers()) != 0 {
		t.Fatalf("given up on, not carried out: in flight %d, containers %v", d.InFlight(), d.Containers())
	}
	close(release)
	testenv.WaitFor(t, "the call carried out", func() bool { return d.InFlight() == 0 })
	cs := d.Containers()
	if len(cs) != 1 || cs[0].Name != "late" {
		t.Fatalf("once carried out: %v", cs)
	}
	d.SetRunning("late", true)
	if _, body := get(t, d.Client(), "GET", "http://docker/v1.41/containers/late/json", ""); !strings.Contains(body, `"Running":true`) {
		t.Fatalf("inspect after SetRunning(true): %s", body)
	}
	d.SetRunning(cs[0].ID, false)
	if _, body := get(t, d.Client(), "GET", "http://docker/v1.41/containers/late/json", ""); !strings.Contains(body, `"Running":false`) {
		t.Fatalf("inspect after SetRunning(false): %s", body)
	}
}
