package attest

import (
	"strings"
	"testing"

	"github.com/agentpen/agentpen/workbench/probe/wire"
)

// TestJudgeIsolation: an episode probe passes only with namespaces other
// than the server's, the loopback interface alone and vsock denied; the
// uid-only sandbox fails and says it is weaker.
func TestJudgeIsolation(t *testing.T) {
	t.Parallel()
	good := EpisodeIsolation{Sandbox: "namespaces", ServerFrom: "process", ServerPidNS: "pid:[1]", ServerNetNS: "net:[2]", EpisodePidNS: "pid:[3]", EpisodeNetNS: "net:[4]",
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
		// The probe was asked for the serving process's namespaces: an
		// answer that compared with its own exec's is not that.
		{"server_from_exec", func(i *EpisodeIsolation) { i.ServerFrom = "exec" }, `read from "exec", not the "process" asked`},
		{"server_from_unsaid", func(i *EpisodeIsolation) { i.ServerFrom = "" }, ""}, // a workbench before SelfNS read the process
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			iso := good
			iso.Interfaces = append([]string{}, good.Interfaces...)
			tt.edit(&iso)
			pass, why := judgeIsolation(probe{}, wire.Outcome{Outcome: "found", Isolation: &iso})
			if pass != (tt.why == "") || (tt.why != "" && !strings.Contains(why, tt.why)) {
				t.Fatalf("pass %v (%s), want %q", pass, why, tt.why)
			}
		})
	}
	if pass, _ := judgeIsolation(probe{}, wire.Outcome{Outcome: "error", Error: "timeout"}); pass {
		t.Fatal("a probe without a finding passed")
	}
	// A cluster's probe (SelfNS) compares with its exec's own namespaces,
	// and says so.
	self := probe{req: wire.Request{Kind: wire.KindEpisode, SelfNS: true}}
	iso := good
	iso.ServerFrom = ""
	if pass, why := judgeIsolation(self, wire.Outcome{Outcome: "found", Isolation: &iso}); pass || !strings.Contains(why, `not the "exec" asked`) {
		t.Fatalf("an unsaid reading passed for an exec's: %v %s", pass, why)
	}
	iso = good
	if pass, why := judgeIsolation(self, wire.Outcome{Outcome: "found", Isolation: &iso}); pass || !strings.Contains(why, `not the "exec" asked`) {
		t.Fatalf("a process reading passed for an exec's: %v %s", pass, why)
	}
	iso.ServerFrom = "exec"
	if pass, why := judgeIsolation(self, wire.Outcome{Outcome: "found", Isolation: &iso}); !pass {
		t.Fatalf("an exec's reading failed: %s", why)
	}
}

// TestJudgeEpisodeUID: on a cluster, an episode's own uid proves the
// block: inside it passes, below, past its end or unreported fails.
func TestJudgeEpisodeUID(t *testing.T) {
	t.Parallel()
	pr := probe{want: wantEpisodeUID, uid: 20064}
	for uid, want := range map[int]bool{20064: true, 20127: true, 20128: false, 20063: false, 0: false} {
		iso := EpisodeIsolation{EpisodeUID: uid}
		if pass, why := judge(pr, wire.Outcome{Outcome: "found", Isolation: &iso}); pass != want {
			t.Errorf("episode uid %d: pass %v, want %v (%s)", uid, pass, want, why)
		}
	}
	if pass, _ := judge(probe{want: wantEpisodeUID}, wire.Outcome{Outcome: "found", Isolation: &EpisodeIsolation{EpisodeUID: 20000}}); pass {
		t.Error("a workspace without a journalled block passed")
	}
	if pass, _ := judge(pr, wire.Outcome{Outcome: "error", Error: "refused"}); pass {
		t.Error("an episode that did not run passed")
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
