package attest

import (
	"strings"
	"testing"
)

// TestJudgeIsolation: an episode probe passes only with namespaces other
// than the server's, the loopback interface alone and vsock denied; the
// uid-only sandbox fails and says it is weaker.
func TestJudgeIsolation(t *testing.T) {
	t.Parallel()
	good := EpisodeIsolation{Sandbox: "namespaces", ServerPidNS: "pid:[1]", ServerNetNS: "net:[2]", EpisodePidNS: "pid:[3]", EpisodeNetNS: "net:[4]",
		Interfaces: []string{"lo"}, VSock: "denied: Address family not supported by protocol"}
	tests := []struct {
		name string
		edit func(i *EpisodeIsolation)
		why  string // "" passes
	}{
		{"isolated", func(*EpisodeIsolation) {}, ""},
		{"uid_only", func(i *EpisodeIsolation) {
			i.Sandbox, i.EpisodePidNS, i.EpisodeNetNS, i.Interfaces = "uid-only", i.ServerPidNS, i.ServerNetNS, []string{"eth0", "lo"}
		}, "uid-only sandbox, which is weaker"},
		{"server_pid_ns", func(i *EpisodeIsolation) { i.EpisodePidNS = i.ServerPidNS }, "PID namespace"},
		{"server_net_ns", func(i *EpisodeIsolation) { i.EpisodeNetNS = i.ServerNetNS }, "network namespace"},
		{"unnamed_ns", func(i *EpisodeIsolation) { i.EpisodeNetNS = "" }, "network namespace"},
		{"eth0", func(i *EpisodeIsolation) { i.Interfaces = []string{"eth0", "lo"} }, "interfaces: eth0, lo"},
		{"no_interfaces", func(i *EpisodeIsolation) { i.Interfaces = nil }, "interfaces"},
		{"vsock", func(i *EpisodeIsolation) { i.VSock = "opened" }, "vsock: opened"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			iso := good
			iso.Interfaces = append([]string{}, good.Interfaces...)
			tt.edit(&iso)
			pass, why := judgeIsolation(probeResult{Outcome: "found", Isolation: &iso})
			if pass != (tt.why == "") || (tt.why != "" && !strings.Contains(why, tt.why)) {
				t.Fatalf("pass %v (%s), want %q", pass, why, tt.why)
			}
		})
	}
	if pass, _ := judgeIsolation(probeResult{Outcome: "error", Error: "timeout"}); pass {
		t.Fatal("a probe without a finding passed")
	}
}

// TestSeccompDigest: an inline seccomp profile is recorded and compared
// by the digest of its text, so two profiles differing in one rule differ
// and the report never carries the profile itself.
func TestSeccompDigest(t *testing.T) {
	t.Parallel()
	a := `{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read"],"action":"SCMP_ACT_ALLOW"}]}`
	b := strings.Replace(a, `"read"`, `"read","ptrace"`, 1)
	_, oa := splitNNP([]string{"no-new-privileges", "seccomp=" + a})
	_, ob := splitNNP([]string{"seccomp=" + b, "no-new-privileges"})
	_, named := splitNNP([]string{"seccomp=unconfined"})
	if len(oa) != 1 || !strings.HasPrefix(oa[0], "seccomp=sha256:") || len(oa[0]) != len("seccomp=sha256:")+64 {
		t.Fatalf("recorded %q", oa)
	}
	if oa[0] == ob[0] {
		t.Fatal("two profiles have one digest")
	}
	if named[0] != "seccomp=unconfined" {
		t.Fatalf("a named profile became %q", named)
	}
}
