package docker

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/dockerfake"
	"github.com/docker/docker/api/types/system"
)

func TestConnectFaults(t *testing.T) {
	host, err := ResolveHost("unix:///run/user/1000/docker.sock", false)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		script  func(*dockerfake.Daemon)
		wantErr error
	}{
		{"daemon_down", func(d *dockerfake.Daemon) {
			d.On("HEAD /_ping", dockerfake.Reply{Drop: true})
			d.On("GET /_ping", dockerfake.Reply{Drop: true})
		}, ErrDaemonUnreachable},
		{"ping_500", func(d *dockerfake.Daemon) {
			d.On("HEAD /_ping", dockerfake.Reply{Status: 500})
			d.On("GET /_ping", dockerfake.Reply{Status: 500, Body: "boom"})
		}, ErrDaemonUnreachable},
		{"not_rootless", func(d *dockerfake.Daemon) {
			d.SetInfo(map[string]any{"SecurityOptions": []string{"name=seccomp,profile=default", "name=apparmor"}})
		}, ErrNotRootless},
		{"lookalike_option", func(d *dockerfake.Daemon) {
			d.SetInfo(map[string]any{"SecurityOptions": []string{"name=rootlessx", "name=seccomp,profile=rootless"}})
		}, ErrNotRootless},
		{"no_security_options", func(d *dockerfake.Daemon) { d.SetInfo(map[string]any{"SecurityOptions": nil}) }, ErrNotRootless},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := dockerfake.New()
			tt.script(fake)
			d, err := connect(t.Context(), host, fake.Client())
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("connect = %v, %v; want %v", d, err, tt.wantErr)
			}
			if d != nil {
				t.Fatalf("a refused daemon returned a client")
			}
		})
	}
	t.Run("info_500", func(t *testing.T) {
		fake := dockerfake.New()
		fake.On("GET /info", dockerfake.Reply{Status: 500, Body: "boom"})
		_, err := connect(t.Context(), host, fake.Client())
		if err == nil || !strings.Contains(err.Error(), "info unix:///run/user/1000/docker.sock") {
			t.Fatalf("got %v, want an error naming the /info call and the host", err)
		}
	})
	t.Run("zero_host", func(t *testing.T) {
		if _, err := Connect(t.Context(), Host{}); !errors.Is(err, ErrHostUnset) {
			t.Fatalf("got %v, want ErrHostUnset", err)
		}
	})
}

func TestConnectIdentity(t *testing.T) {
	host, _ := ResolveHost("unix:///run/user/1000/docker.sock", false)
	fake := dockerfake.New()
	d, err := connect(t.Context(), host, fake.Client())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	got := d.Daemon()
	if !got.Rootless || got.ID != "FAKE:ROOTLESS" || got.ServerVersion != "20.10.24+dfsg1" || got.APIVersion != dockerfake.APIVersion {
		t.Fatalf("identity = %+v", got)
	}
	// cgroup driver "none": the daemon says MemoryLimit, but nothing enforces it.
	if got.MemoryLimitEnforced || got.PidsLimitEnforced {
		t.Fatalf("limits reported enforceable without cgroups: %+v", got)
	}
	if d.Host() != host {
		t.Fatalf("host = %v", d.Host())
	}
	if calls := fake.Calls(); len(calls) < 2 || calls[0].Path != "/_ping" {
		t.Fatalf("calls %v; want the ping first", calls)
	}
	var _ http.RoundTripper = fake.Client().Transport
}

func TestDaemonFromInfoLimits(t *testing.T) {
	info := system.Info{
		CgroupDriver: "systemd", CgroupVersion: "2", MemoryLimit: true, PidsLimit: true,
		SecurityOptions: []string{"name=rootless"},
	}
	d := daemonFromInfo(info)
	if !d.MemoryLimitEnforced || !d.PidsLimitEnforced || !d.Rootless {
		t.Fatalf("cgroup v2 with limits: %+v", d)
	}
	info.PidsLimit = false
	if d := daemonFromInfo(info); d.PidsLimitEnforced || !d.MemoryLimitEnforced {
		t.Fatalf("PidsLimit false: %+v", d)
	}
}
