package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/internal/cli"
	"github.com/agentpen/agentpen/internal/dockerfake"
	"github.com/agentpen/agentpen/internal/testenv"
)

// serveFakeDaemon serves a fake daemon with the given security options on
// a unix socket.
func serveFakeDaemon(t *testing.T, securityOptions []string) string {
	t.Helper()
	fake := dockerfake.New()
	fake.SetInfo(map[string]any{"SecurityOptions": securityOptions, "CgroupDriver": "cgroupfs"})
	return fake.ServeUnix(t)
}

func TestDoctorRefusals(t *testing.T) {
	rootful := serveFakeDaemon(t, []string{"name=seccomp,profile=default"})
	down := "unix://" + filepath.Join(t.TempDir(), "rootless", "docker.sock")
	tests := []struct {
		name    string
		host    string
		args    []string
		wantMsg string
	}{
		{"unset", "", nil, "DOCKER_HOST must be explicitly set"},
		{"rootful_socket", "unix:///var/run/docker.sock", nil, "the shared rootful Docker socket is forbidden"},
		{"tcp", "tcp://127.0.0.1:2375", nil, "must be a unix socket"},
		{"custom_not_allowed", "unix:///tmp/x/d.sock", nil, "not recognisably rootless"},
		{"daemon_down", down, nil, "docker daemon unreachable"},
		{"not_rootless", rootful, nil, "docker daemon is not rootless"},
		{"bad_flag", "", []string{"--nope"}, "flag provided but not defined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			env := map[string]string{"DOCKER_HOST": tt.host}
			err := run(t.Context(), append([]string{"doctor"}, tt.args...), &out, &errb, func(k string) string { return env[k] })
			if err == nil {
				t.Fatalf("doctor succeeded; stdout %q", out.String())
			}
			msg := errb.String() + err.Error()
			if !strings.Contains(msg, tt.wantMsg) {
				t.Fatalf("message %q does not contain %q", msg, tt.wantMsg)
			}
			lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
			if errors.Is(err, cli.ErrReported) && len(lines) != 1 {
				t.Fatalf("want a one-line reason, got %q", errb.String())
			}
		})
	}
}

func TestDoctorJSONFailure(t *testing.T) {
	var out, errb bytes.Buffer
	err := run(t.Context(), []string{"doctor", "--json"}, &out, &errb, func(string) string { return "unix:///run/docker.sock" })
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
