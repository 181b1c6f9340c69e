package docker

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/dockerfake"
)

// noLock is a BringUp.Lock that holds nothing (one test at a time).
func noLock(context.Context, string) (func(), error) { return func() {}, nil }

// TestServerReadyOnTheHostSocket: the default readiness command of
// topology none asks the grader's /health on its socket, which the host
// holds: the server is asked there, from the host, until it answers 200,
// and never by an exec; a server given its own command, or one on a
// network, is asked by exec.
func TestServerReadyOnTheHostSocket(t *testing.T) {
	a, fake := fakeAdapter(t)
	d := dk(a.Adapter)
	p, err := campaign.NewPlan(fakeSpec("ready-host-socket", 1))
	if err != nil {
		t.Fatal(err)
	}
	p.Bind(1, campaign.NewInstance())
	l, err := d.Layout(t.Context(), driver.BringUp{Plan: p, Agents: []int{0}, Campaign: true, Lock: noLock})
	if err != nil {
		t.Fatal(err)
	}
	if l.Done != nil {
		l.Done()
	}
	c := l.Server.Main.Spec.(*containerPlan)
	if want := filepath.Join(d.runRoot(p.Instance), "grader", "grader.sock"); c.graderSocket != want {
		t.Fatalf("the server's readiness socket %q, want %q", c.graderSocket, want)
	}
	for name, edit := range map[string]func(*campaign.CampaignSpec){
		"own command": func(s *campaign.CampaignSpec) { s.Server.ReadyCommand = []string{"true"} },
		"per-agent":   func(s *campaign.CampaignSpec) { s.Server.AgentReachable = true },
	} {
		s := fakeSpec("ready-by-exec", 1)
		edit(&s)
		p, err := campaign.NewPlan(s)
		if err != nil {
			t.Fatal(err)
		}
		p.Bind(1, campaign.NewInstance())
		l, err := d.Layout(t.Context(), driver.BringUp{Plan: p, Agents: []int{0}, Campaign: true, Lock: noLock})
		if err != nil {
			t.Fatal(err)
		}
		if l.Done != nil {
			l.Done()
		}
		if c := l.Server.Main.Spec.(*containerPlan); c.graderSocket != "" {
			t.Errorf("%s: asked on the host socket %q, want by exec", name, c.graderSocket)
		}
	}

	// A grader that answers 503 twice, then 200.
	sock := filepath.Join(t.TempDir(), "grader.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var asked atomic.Int32
	status := atomic.Int32{}
	status.Store(http.StatusServiceUnavailable)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		if asked.Add(1) > 2 {
			w.WriteHeader(int(status.Load()))
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	o := &driver.Object{Kind: campaign.KindContainer, Role: campaign.RoleServer, Name: "grader", ID: "0123456789ab", Spec: &containerPlan{graderSocket: sock, ready: []string{"never-run"}}}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if err := d.Ready(ctx, o); !errors.Is(err, driver.ErrNotReady) {
		t.Fatalf("a grader answering 503: %v, want not ready", err)
	}
	status.Store(http.StatusOK)
	if err := d.Ready(t.Context(), o); err != nil {
		t.Fatalf("a grader answering 200: %v", err)
	}
	if n := asked.Load(); n < 3 {
		t.Errorf("the grader was asked %d times", n)
	}
	if execs := slices.DeleteFunc(fake.Calls(), func(c dockerfake.Call) bool { return !strings.Contains(c.Path, "/exec") }); len(execs) > 0 {
		t.Errorf("the server was asked by exec: %v", execs)
	}
}
