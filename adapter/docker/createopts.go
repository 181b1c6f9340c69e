package docker

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"

	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/campaign"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/go-connections/nat"
)

// WorkspaceCaps are the only capabilities a workspace container keeps; all
// others are dropped. The workbench's sandbox needs exactly these
// (measured in docs: each one's absence breaks a check):
//   - CAP_SETUID, CAP_SETGID: the maps of each episode's user namespace,
//     and the launcher's drop to the episode's uid with setgroups([]),
//     setgid and setuid; without them nothing runs as the uid.
//   - CAP_CHOWN: the uid-only sandbox gives each episode's workspace to
//     its uid.
//   - CAP_KILL: the uid-only sandbox kills a run's session, whose
//     processes it does not own.
var WorkspaceCaps = []string{"CAP_CHOWN", "CAP_KILL", "CAP_SETGID", "CAP_SETUID"}

// Resource requests of a workspace. Rootless Docker on cgroup v1 records and
// does not enforce them; the attestation says which are enforced.
const (
	WorkspaceMemory    = 2 << 30 // bytes
	WorkspacePidsLimit = 512
)

// workspaceTmpfs are the writable places of a workspace's read-only root.
// Sizes are explicit (an unsized tmpfs is half the host's memory) and so are
// modes; Docker adds noexec unless "exec" is given. The episode server's
// own tree (episode homes and workspaces, the uid locks) has a tmpfs of its
// own, so one episode filling it (a run may write a file up to
// sandbox.DefaultLimits.FileSize) cannot leave /run, where the runtime
// keeps its state, without room; 512 MiB holds every session at once
// writing its largest file many times over, and all five tmpfs together
// stay well under WorkspaceMemory, which their pages are charged to.
var workspaceTmpfs = map[string]string{
	"/tmp":                 "rw,nosuid,nodev,noexec,size=256m,mode=1777",
	"/var/tmp":             "rw,nosuid,nodev,noexec,size=64m,mode=1777",
	"/dev/shm":             "rw,nosuid,nodev,noexec,size=64m,mode=1777",
	"/run":                 "rw,nosuid,nodev,noexec,size=16m,mode=0755",
	"/run/agent-workbench": "rw,nosuid,nodev,noexec,size=512m,mode=0711",
}

// Container logs are bounded: agent code can make the grader or its
// workspace's server log a line per request it sends, and the daemon's
// default json-file log grows without limit on the host's disk. LogMaxSize
// per file, LogMaxFiles files (the oldest dropped).
const (
	LogMaxSize  = "10m"
	LogMaxFiles = "3"
)

// boundedLogs is the log configuration of every container agentpen
// creates: json-file (what docker logs reads), rotated.
func boundedLogs() container.LogConfig {
	return container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": LogMaxSize, "max-file": LogMaxFiles}}
}

// workspaceSysctls bound System V shared memory in a workspace's own IPC
// namespace: the kernel's defaults let one process make segments of
// terabytes, and a segment outlives its creator and counts against no
// rlimit (RLIMIT_AS bounds what a process maps, not what it leaves), so
// agent code filled 3.6 GB of host memory with four segments. 64 MiB per
// segment and in all (shmall is in 4 KiB pages), and a segment no process
// has attached is removed at once (shm_rmid_forced), so nothing of it
// outlives the run that made it. Python's standard library does not use
// System V shared memory.
var workspaceSysctls = map[string]string{
	"kernel.shmmax":          "67108864",
	"kernel.shmall":          "16384",
	"kernel.shm_rmid_forced": "1",
}

// containerSpec is everything ContainerCreate takes, built from a plan
// before any call.
type containerSpec struct {
	Name       string
	Role       string
	Config     *container.Config
	HostConfig *container.HostConfig
	Networking *network.NetworkingConfig
}

// networkCreateOptions creates one agent's network on subnet (agentpen
// chooses subnets itself: the daemon's default pool holds only 30
// networks, and a campaign of 64 agents needs 64).
func networkCreateOptions(n campaign.NetworkPlan, subnet netip.Prefix) network.CreateOptions {
	return network.CreateOptions{
		Driver:   "bridge",
		Internal: n.Internal,
		Labels:   clone(n.Labels),
		IPAM:     &network.IPAM{Driver: "default", Config: []network.IPAMConfig{{Subnet: subnet.String()}}},
	}
}

// networking joins a container to one network under alias, or to none.
func networking(netName, alias string) (container.NetworkMode, *network.NetworkingConfig) {
	if netName == "" {
		return container.NetworkMode("none"), nil
	}
	return container.NetworkMode(netName), &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
		netName: {Aliases: []string{alias}},
	}}
}

// serverSpec builds the server container. apiKey is the value of
// Spec.APIKeyEnv in agentpen's environment ("" when unset; the variable is
// then passed unset). It goes into the create call only, never a log or
// the journal. dockerSocket is the rootless daemon's socket path;
// graderDir the host directory of its unix socket (TopologyNone), mounted
// read-write at campaign.GraderDir. With TopologyPerAgent it joins the
// first agent's network here and the others after it is created.
func serverSpec(p *campaign.Plan, apiKey string, secrets map[string]string, dockerSocket, graderDir string) containerSpec {
	s := p.Server.Spec
	env := []string{}
	for _, k := range sortedKeys(s.ExtraEnv) {
		env = append(env, k+"="+s.ExtraEnv[k])
	}
	if apiKey != "" {
		env = append(env, s.APIKeyEnv+"="+apiKey)
	}
	for _, k := range s.SecretEnv {
		if v, ok := secrets[k]; ok {
			env = append(env, k+"="+v)
		}
	}
	env = append(env, "AGENTPEN_API_KEY_ENV="+s.APIKeyEnv, "AGENTPEN_ROLE="+campaign.RoleServer)
	first := ""
	if len(p.Networks) > 0 {
		first = p.Networks[0].Name
	}
	mode, nc := networking(first, p.Server.Alias)
	hc := &container.HostConfig{
		Init:          ptr(true),
		NetworkMode:   mode,
		CapDrop:       []string{"ALL"},
		SecurityOpt:   []string{"no-new-privileges"},
		RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyDisabled},
		LogConfig:     boundedLogs(),
	}
	if s.MountDockerSocket {
		hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: dockerSocket, Target: campaign.DockerSocketTarget})
		env = append(env, "DOCKER_HOST=unix://"+campaign.DockerSocketTarget)
	}
	if s.DataHostPath != "" {
		hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: s.DataHostPath, Target: s.DataContainerPath, ReadOnly: true})
	}
	if p.Topology == campaign.TopologyNone {
		hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: graderDir, Target: campaign.GraderDir})
	}
	cfg := &container.Config{
		Image:  s.Image,
		Cmd:    slices.Clone(s.Command),
		Env:    env,
		Labels: clone(p.Server.Labels),
	}
	if p.Server.Publish.IsValid() {
		port := nat.Port(strconv.Itoa(p.Server.Port) + "/tcp")
		cfg.ExposedPorts = nat.PortSet{port: struct{}{}}
		hc.PortBindings = nat.PortMap{port: {{HostIP: p.Server.Publish.Addr().String(), HostPort: strconv.Itoa(int(p.Server.Publish.Port()))}}}
	}
	return containerSpec{Name: p.Server.Name, Role: campaign.RoleServer, Config: cfg, HostConfig: hc, Networking: nc}
}

// workspaceSpec builds one workspace container. runDir is the host
// directory (0700, owned by the daemon's user) mounted at /run/workbench;
// graderDir the server's socket directory (TopologyNone), mounted
// read-only at campaign.GraderDir. apiKey (the value of the server's
// APIKeyEnv, "" when unset) lets the workspace's episode server call the
// grader; it goes into the create call only, and only where the workbench
// serves (AgentPlan.NeedsKey): a launcher's own command is the agent. The workspace joins its own
// network, or none.
func workspaceSpec(p *campaign.Plan, a campaign.AgentPlan, runDir, graderDir, apiKey string) containerSpec {
	env := make([]string, 0, len(a.Env)+1)
	for _, k := range sortedKeys(a.Env) {
		env = append(env, k+"="+a.Env[k])
	}
	if apiKey != "" && a.NeedsKey {
		env = append(env, p.Server.Spec.APIKeyEnv+"="+apiKey)
	}
	mode, nc := networking(a.Network, a.Alias)
	hc := &container.HostConfig{
		Init:           ptr(true),
		NetworkMode:    mode,
		CapDrop:        []string{"ALL"},
		CapAdd:         slices.Clone(WorkspaceCaps),
		SecurityOpt:    workspaceSecurityOpt(),
		MaskedPaths:    slices.Clone(workspaceMaskedPaths),
		ReadonlyPaths:  slices.Clone(workspaceReadonlyPaths),
		ReadonlyRootfs: true,
		Tmpfs:          clone(workspaceTmpfs),
		RestartPolicy:  container.RestartPolicy{Name: container.RestartPolicyDisabled},
		LogConfig:      boundedLogs(),
		Sysctls:        clone(workspaceSysctls),
		Resources: container.Resources{
			Memory:    WorkspaceMemory,
			PidsLimit: ptr(int64(WorkspacePidsLimit)),
		},
		Mounts: []mount.Mount{{Type: mount.TypeBind, Source: runDir, Target: campaign.WorkbenchRunDir}},
	}
	if a.Spec.WorkspaceHostPath != "" {
		hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: a.Spec.WorkspaceHostPath, Target: campaign.DefaultWorkspaceTarget})
	}
	if p.Topology == campaign.TopologyNone {
		hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: graderDir, Target: campaign.GraderDir, ReadOnly: true})
	}
	cfg := &container.Config{
		Image:  a.Spec.Image,
		Cmd:    slices.Clone(a.Spec.Command),
		Env:    env,
		Labels: clone(a.Labels),
	}
	return containerSpec{Name: a.Name, Role: campaign.RoleWork, Config: cfg, HostConfig: hc, Networking: nc}
}

func ptr[T any](v T) *T { return &v }

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

func clone(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// String describes a spec without its environment values.
func (s containerSpec) String() string {
	return fmt.Sprintf("%s %s (image %s)", s.Role, s.Name, s.Config.Image)
}

// Settings are the hardening, limits and DNS the create calls ask for, by
// role, read from the very specs a bring-up uses.
func (d *Driver) Settings(p *campaign.Plan) map[string]attest.RoleSettings {
	from := func(hc *container.HostConfig) attest.RoleSettings {
		rs := attest.RoleSettings{
			CapAdd: slices.Clone(hc.CapAdd), CapDrop: slices.Clone(hc.CapDrop), SecurityOpt: slices.Clone(hc.SecurityOpt),
			MaskedPaths: slices.Clone(hc.MaskedPaths), ReadonlyPaths: slices.Clone(hc.ReadonlyPaths),
			ReadOnlyRoot: hc.ReadonlyRootfs, Tmpfs: clone(hc.Tmpfs), Init: hc.Init != nil && *hc.Init, Memory: hc.Memory,
		}
		if hc.PidsLimit != nil {
			rs.PidsLimit = *hc.PidsLimit
		}
		rs.DNS.Servers, rs.DNS.Search, rs.DNS.Options, rs.DNS.ExtraHosts = hc.DNS, hc.DNSSearch, hc.DNSOptions, hc.ExtraHosts
		return rs
	}
	out := map[string]attest.RoleSettings{campaign.RoleServer: from(serverSpec(p, "", nil, d.host.SocketPath, "/").HostConfig)}
	if len(p.Agents) > 0 {
		out[campaign.RoleWork] = from(workspaceSpec(p, p.Agents[0], "/", "/", "").HostConfig)
	}
	return out
}
