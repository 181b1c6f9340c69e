package docker

import (
	"encoding/json"
	"sync"

	"github.com/moby/profiles/seccomp"
	"github.com/opencontainers/runtime-spec/specs-go"
)

// namespaceCalls are what the workbench's namespaces sandbox does that
// Docker's default profile allows only with CAP_SYS_ADMIN (which the
// workspace never has): clone with namespace flags and unshare (new user,
// mount, network, PID and IPC namespaces), setns (every run of an
// episode enters its namespaces), mount and mount_setattr (in an
// episode's own mount namespace). Inside a user namespace of its own
// container root has capabilities over that namespace only; mapping uid
// 0 into one needs CAP_SETFCAP, which the workspace does not have. The
// workbench's own filter denies all of these to episode code.
var namespaceCalls = []string{"clone", "unshare", "setns", "mount", "mount_setattr"}

// workspaceSeccomp is the workspace container's seccomp profile, as the
// JSON the create call passes inline (seccomp=<json>): Docker's default
// profile from github.com/moby/profiles/seccomp (pinned in go.mod, so
// the profile changes only with that version) plus namespaceCalls. It
// denies AF_VSOCK sockets, as the default does. The daemon returns the
// string as given, so the attestation compares digests of it.
var workspaceSeccomp = sync.OnceValue(func() string {
	p := seccomp.DefaultProfile()
	p.Syscalls = append(p.Syscalls, &seccomp.Syscall{
		LinuxSyscall: specs.LinuxSyscall{Names: namespaceCalls, Action: specs.ActAllow},
		Comment:      "agentpen: the workbench's namespaces sandbox (its own filter denies these to episode code)",
	})
	b, err := json.Marshal(p)
	if err != nil {
		panic("adapter: the seccomp profile does not encode: " + err.Error())
	}
	return string(b)
})

// WorkspaceSeccomp returns the workspace's seccomp profile (Docker's
// default plus namespaceCalls) as JSON: what a Docker create passes
// inline, and what a Kubernetes node installs as the Localhost profile a
// workspace pod names (scripts/kube-node.sh, docs/kubernetes.md).
func WorkspaceSeccomp() string { return workspaceSeccomp() }

// workspaceSecurityOpt are the workspace container's security options.
func workspaceSecurityOpt() []string {
	return []string{"no-new-privileges", "seccomp=" + workspaceSeccomp()}
}

// Docker's default masked and read-only paths (moby's oci defaults, the
// daemon's own when none are given), asked for explicitly so that the
// attestation compares them with what was planned: episodes keep the
// container's /proc (docs/decisions.md, "Sandbox and isolation"), so
// these stay masked; lifting them would let episodes mount a /proc of
// their own, and expose /proc/kcore, /proc/keys, /sys/firmware and the
// rest to the container's root.
var (
	workspaceMaskedPaths = []string{"/proc/asound", "/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
		"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware"}
	workspaceReadonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
)
