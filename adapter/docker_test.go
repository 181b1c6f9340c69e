package adapter

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/system"
)

// fakeDaemon answers the SDK's requests at the transport, as the moby
// client's own tests do: the real SDK types, a scripted daemon.
type fakeDaemon struct {
	pingStatus int
	info       *system.Info
	infoStatus int
	calls      []string
}

func (f *fakeDaemon) RoundTrip(req *http.Request) (*http.Response, error) {
	f.calls = append(f.calls, req.Method+" "+req.URL.Path)
	resp := func(status int, body string) *http.Response {
		h := http.Header{}
		h.Set("Api-Version", "1.41")
		h.Set("Content-Type", "application/json")
		return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(body)), Request: req}
	}
	switch {
	case strings.HasSuffix(req.URL.Path, "/_ping"):
		if f.pingStatus == -1 {
			return nil, errors.New("dial unix: connection refused")
		}
		return resp(f.pingStatus, "OK"), nil
	case strings.HasSuffix(req.URL.Path, "/info"):
		if f.infoStatus != http.StatusOK {
			return resp(f.infoStatus, `{"message":"boom"}`), nil
		}
		b, _ := json.Marshal(f.info)
		return resp(http.StatusOK, string(b)), nil
	}
	return resp(http.StatusNotFound, `{"message":"page not found"}`), nil
}

func rootlessInfo() *system.Info {
	return &system.Info{
		ID: "RBWB:ONUJ", Name: "vm", ServerVersion: "20.10.24+dfsg1",
		DockerRootDir: "/home/agentpen/.local/share/docker", CgroupDriver: "none", CgroupVersion: "1",
		SecurityOptions: []string{"name=seccomp,profile=default", "name=rootless"},
		MemoryLimit:     true, PidsLimit: true,
		Warnings: []string{"WARNING: Running in rootless-mode without cgroups."},
	}
}

func TestConnectFaults(t *testing.T) {
	host, err := ResolveHost("unix:///run/user/1000/docker.sock", false)
	if err != nil {
		t.Fatal(err)
	}
	rootful := rootlessInfo()
	rootful.SecurityOptions = []string{"name=seccomp,profile=default", "name=apparmor"}
	lookalike := rootlessInfo()
	lookalike.SecurityOptions = []string{"name=rootlessx", "name=seccomp,profile=rootless"}
	tests := []struct {
		name    string
		fake    *fakeDaemon
		wantErr error
	}{
		{"daemon_down", &fakeDaemon{pingStatus: -1}, ErrDaemonUnreachable},
		{"ping_500", &fakeDaemon{pingStatus: 500}, ErrDaemonUnreachable},
		{"not_rootless", &fakeDaemon{pingStatus: 200, info: rootful, infoStatus: 200}, ErrNotRootless},
		{"lookalike_option", &fakeDaemon{pingStatus: 200, info: lookalike, infoStatus: 200}, ErrNotRootless},
		{"no_security_options", &fakeDaemon{pingStatus: 200, info: &system.Info{ID: "x"}, infoStatus: 200}, ErrNotRootless},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := connect(t.Context(), host, &http.Client{Transport: tt.fake})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("connect = %v, %v; want %v", d, err, tt.wantErr)
			}
			if d != nil {
				t.Fatalf("a refused daemon returned a client")
			}
		})
	}
	t.Run("info_500", func(t *testing.T) {
		_, err := connect(t.Context(), host, &http.Client{Transport: &fakeDaemon{pingStatus: 200, infoStatus: 500}})
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
	fake := &fakeDaemon{pingStatus: 200, info: rootlessInfo(), infoStatus: 200}
	d, err := connect(t.Context(), host, &http.Client{Transport: fake})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	got := d.Daemon()
	if !got.Rootless || got.ID != "RBWB:ONUJ" || got.ServerVersion != "20.10.24+dfsg1" || got.APIVersion != "1.41" {
		t.Fatalf("identity = %+v", got)
	}
	// cgroup driver "none": the daemon says MemoryLimit, but nothing enforces it.
	if got.MemoryLimitEnforced || got.PidsLimitEnforced {
		t.Fatalf("limits reported enforceable without cgroups: %+v", got)
	}
	if d.Host() != host {
		t.Fatalf("host = %v", d.Host())
	}
}

func TestDaemonFromInfoLimits(t *testing.T) {
	info := rootlessInfo()
	info.CgroupDriver, info.CgroupVersion = "systemd", "2"
	d := daemonFromInfo(*info)
	if !d.MemoryLimitEnforced || !d.PidsLimitEnforced {
		t.Fatalf("cgroup v2 with limits: %+v", d)
	}
	info.PidsLimit = false
	if d := daemonFromInfo(*info); d.PidsLimitEnforced || !d.MemoryLimitEnforced {
		t.Fatalf("PidsLimit false: %+v", d)
	}
}
