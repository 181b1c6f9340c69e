package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/internal/cli"
	"github.com/agentpen/agentpen/internal/testkit/dockerfake"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

// serveFakeDaemon serves a fake daemon with the given security options on
// a unix socket.
func serveFakeDaemon(t *testing.T, securityOptions []string) string {
	t.Helper()
	fake := dockerfake.New()
	fake.SetInfo(map[string]any{"SecurityOptions": securityOptions, "CgroupDriver": "cgroupfs"})
	return fake.ServeUnix(t)
}

// TestDoctorRefusals: every DOCKER_HOST and daemon problem is one line on
// stderr, exactly this text: the value once, what is wrong, and the fix.
func TestDoctorRefusals(t *testing.T) {
	rootful := serveFakeDaemon(t, []string{"name=seccomp,profile=default"})
	down := "unix://" + filepath.Join(t.TempDir(), "rootless", "docker.sock")
	const fix = `; start or find the rootless daemon: eval "$(scripts/rootless-docker.sh)"`
	tests := []struct {
		name string
		host string
		args []string
		want string
		code int
	}{
		{"unset", "", nil, "agentpen doctor: DOCKER_HOST is not set (agentpen uses no default daemon)" + fix, 2},
		{"rootful_socket", "unix:///var/run/docker.sock", nil, `agentpen doctor: DOCKER_HOST "unix:///var/run/docker.sock": the shared rootful Docker socket is forbidden` + fix, 2},
		{"tcp", "tcp://127.0.0.1:2375", nil, `agentpen doctor: DOCKER_HOST "tcp://127.0.0.1:2375": not a unix socket (tcp, ssh and other schemes are refused)` + fix, 2},
		{"unsafe", "unix:///run/user/1/../docker.sock", nil, `agentpen doctor: DOCKER_HOST "unix:///run/user/1/../docker.sock": not a clean absolute socket path` + fix, 2},
		{"custom_not_allowed", "unix:///tmp/x/d.sock", nil, `agentpen doctor: DOCKER_HOST "unix:///tmp/x/d.sock": not recognisably a rootless daemon's socket (/run/user/<uid>/docker.sock); if it is one, pass --allow-custom-socket; otherwise start or find the rootless daemon: eval "$(scripts/rootless-docker.sh)"`, 2},
		{"daemon_down", down, nil, "agentpen doctor: docker daemon unreachable at " + down + ": no such file or directory" + fix, 3},
		{"not_rootless", rootful, nil, "agentpen doctor: docker daemon is not rootless: " + rootful + " answers as server 20.10.24+dfsg1 with security options [name=seccomp,profile=default]" + fix, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			env := map[string]string{"DOCKER_HOST": tt.host}
			err := run(t.Context(), append([]string{"doctor"}, tt.args...), &out, &errb, func(k string) string { return env[k] })
			if err == nil {
				t.Fatalf("doctor succeeded; stdout %q", out.String())
			}
			if got := errb.String() + cli.Message("agentpen", err); got != tt.want+"\n" {
				t.Fatalf("stderr\n%s\nwant\n%s", got, tt.want)
			}
			if got := exitCode(err); got != tt.code {
				t.Fatalf("exit %d, want %d", got, tt.code)
			}
		})
	}
}

// TestDaemonErrorsEveryCommand: every command that talks to the daemon
// prints a DOCKER_HOST problem once, after its own name, ending with the
// fix, and exits 2.
func TestDaemonErrorsEveryCommand(t *testing.T) {
	env := map[string]string{"DOCKER_HOST": "tcp://127.0.0.1:2375", "HOME": t.TempDir()}
	const want = `: DOCKER_HOST "tcp://127.0.0.1:2375": not a unix socket (tcp, ssh and other schemes are refused); start or find the rootless daemon: eval "$(scripts/rootless-docker.sh)"`
	spec := filepath.Join(t.TempDir(), "spec.json")
	if err := os.WriteFile(spec, []byte(`{"campaign_id":"c1","server":{"image":"sha256:`+strings.Repeat("a", 64)+`"},"workspaces":[{"task_id":"sql/top_customer","image":"sha256:`+strings.Repeat("a", 64)+`"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"up", spec}, {"down", "c1"}, {"attest", "c1"}, {"cleanup", "verify", "c1"}, {"ls"}, {"orphans"}} {
		t.Run(args[0], func(t *testing.T) {
			var out, errb bytes.Buffer
			err := run(t.Context(), args, &out, &errb, func(k string) string { return env[k] })
			cmd := "agentpen " + args[0]
			if args[0] == "cleanup" {
				cmd += " verify"
			}
			if got := errb.String() + cli.Message("agentpen", err); got != cmd+want || exitCode(err) != 2 || out.Len() != 0 {
				t.Fatalf("exit %d, stdout %q, stderr\n%s\nwant\n%s", exitCode(err), out.String(), got, cmd+want)
			}
		})
	}
}

func TestDoctorJSONFailure(t *testing.T) {
	var out, errb bytes.Buffer
	env := map[string]string{"DOCKER_HOST": "unix:///run/docker.sock"}
	err := run(t.Context(), []string{"doctor", "--json"}, &out, &errb, func(k string) string { return env[k] })
	if err == nil || cli.ExitCode(err) != 1 {
		t.Fatalf("err = %v", err)
	}
	var rep doctorReport
	if jerr := json.Unmarshal(out.Bytes(), &rep); jerr != nil || rep.OK || !strings.Contains(rep.Error, "rootful") {
		t.Fatalf("report %q (%v)", out.String(), jerr)
	}
}

func TestUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if err := run(t.Context(), nil, &out, &errb, os.Getenv); cli.ExitCode(err) != 2 {
		t.Fatalf("no command: %v", err)
	}
	if err := run(t.Context(), []string{"frobnicate"}, &out, &errb, os.Getenv); cli.ExitCode(err) != 2 || !strings.Contains(err.Error(), "frobnicate") {
		t.Fatalf("unknown command: %v", err)
	}
	out.Reset()
	if err := run(t.Context(), []string{"help"}, &out, &errb, os.Getenv); err != nil || !strings.Contains(out.String(), "doctor") {
		t.Fatalf("help: %v %q", err, out.String())
	}
}

func TestDoctorRealDaemon(t *testing.T) {
	host := testenv.RequireDocker(t)
	var out, errb bytes.Buffer
	getenv := func(k string) string {
		if k == "DOCKER_HOST" {
			return host
		}
		return ""
	}
	args := []string{"doctor", "--json"}
	if os.Getenv("AGENTPEN_ALLOW_CUSTOM_SOCKET") == "1" {
		args = append(args, "--allow-custom-socket")
	}
	if err := run(t.Context(), args, &out, &errb, getenv); err != nil {
		t.Fatalf("doctor: %v\n%s", err, errb.String())
	}
	var rep doctorReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Daemon == nil || !rep.Daemon.Rootless || rep.Daemon.ID == "" || rep.Daemon.ServerVersion == "" {
		t.Fatalf("report = %+v", rep)
	}
	out.Reset()
	if err := run(t.Context(), args[:1], &out, &errb, getenv); err != nil || !strings.Contains(out.String(), "rootless        yes") {
		t.Fatalf("text doctor: %v %q", err, out.String())
	}
}

// TestNoSuchCampaign: down, attest and cleanup verify of an id the state
// root has no journal of say so once, with where to look, and exit 2.
func TestNoSuchCampaign(t *testing.T) {
	host := serveFakeDaemon(t, []string{"name=rootless"})
	state := t.TempDir()
	env := map[string]string{"DOCKER_HOST": host, "XDG_STATE_HOME": state}
	dir := filepath.Join(state, "agentpen", "campaigns", "nosuch-2369bfb38b")
	for _, args := range [][]string{{"down", "nosuch"}, {"attest", "nosuch"}, {"cleanup", "verify", "nosuch"}} {
		t.Run(args[0], func(t *testing.T) {
			var out, errb bytes.Buffer
			err := run(t.Context(), args, &out, &errb, func(k string) string { return env[k] })
			want := "agentpen " + strings.Join(args[:len(args)-1], " ") + `: no such campaign "nosuch": nothing in ` + dir +
				" (agentpen ls lists this state root's campaigns; --state-root names another)"
			if got := errb.String() + cli.Message("agentpen", err); got != want || exitCode(err) != 2 || out.Len() != 0 {
				t.Fatalf("exit %d, stdout %q, got\n%s\nwant\n%s", exitCode(err), out.String(), got, want)
			}
		})
	}
}
