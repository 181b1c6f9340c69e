package campaign

import "slices"

// Egress is a campaign's network policy.
type Egress string

// The egress policies.
const (
	// EgressInternal (the default): the campaign network is Docker
	// Internal=true; containers reach only each other.
	EgressInternal Egress = "internal"
	// EgressNAT: an ordinary bridge with outbound NAT (seed 004's network);
	// only this policy allows a loopback port publish of the server.
	EgressNAT Egress = "nat"
)

// NATEgressExcept are the addresses egress nat never opens where the
// runtime routes by policy (a cluster's network policies): link-local,
// where clouds serve instance metadata and its credentials.
func NATEgressExcept() []string { return []string{"169.254.0.0/16"} }

// Defaults and fixed paths of a campaign.
const (
	// DefaultServerPort is ServerSpec.Port when zero.
	DefaultServerPort = 8080
	// DefaultAPIKeyEnv is ServerSpec.APIKeyEnv when empty.
	DefaultAPIKeyEnv = "AGENTPEN_API_KEY"
	// DockerSocketTarget is where ServerSpec.MountDockerSocket mounts the
	// daemon's socket in the server container.
	DockerSocketTarget = "/run/agentpen/docker.sock"
	// WorkbenchRunDir is a workspace's bind-mounted run directory,
	// WorkbenchSocket the episode server's unix socket in it, and
	// WorkbenchTaskFile the bind file (package workbench/bind: the task,
	// mode 0400, owned by container root) that binds the episode server
	// to the workspace's task, and WorkbenchResultsFile where the server
	// appends each ended episode's record (package workbench/results).
	WorkbenchRunDir      = "/run/workbench"
	WorkbenchSocket      = WorkbenchRunDir + "/wb.sock"
	WorkbenchTaskFile    = WorkbenchRunDir + "/task"
	WorkbenchResultsFile = WorkbenchRunDir + "/results.jsonl"
	// WorkbenchBinary is the workbench in its image: the episode server,
	// the grader and the attestation's probe. It holds every task's
	// answer key, so it is root's alone (mode 0700).
	WorkbenchBinary = "/usr/local/bin/workbench"
	// DefaultWorkspaceTarget is where WorkspaceSpec.WorkspaceHostPath is
	// mounted.
	DefaultWorkspaceTarget = "/workspace"
	// MaxWorkspaces bounds CampaignSpec.Workspaces.
	MaxWorkspaces = 64
)

// CampaignSpec is what a launcher asks for: one network, one server
// container and one workspace container per agent. Zero values take the
// documented defaults.
type CampaignSpec struct {
	// CampaignID names the campaign (see CheckID); it scopes every name.
	CampaignID string `json:"campaign_id" pattern:"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$" doc:"Names the campaign and scopes every resource name; its lock, journal and reports live under <state root>/campaigns/<id>-<hash>."`
	// Egress is "internal" (default) or "nat".
	Egress Egress `json:"egress,omitempty" enum:"internal,nat" default:"internal" doc:"internal: no outbound network (no network at all unless server.agent_reachable); nat: a network per workspace with outbound NAT."`
	// Labels are added to every resource; keys under io.agentpen. are refused.
	Labels map[string]string `json:"labels,omitempty" doc:"Added to every resource; keys under io.agentpen. are agentpen's own and refused."`
	// Server is the task-server (grader) container.
	Server ServerSpec `json:"server" doc:"The task-server (grader) container."`
	// Workspaces are the agents' containers, 1..MaxWorkspaces.
	Workspaces []WorkspaceSpec `json:"workspaces" minItems:"1" maxItems:"64" nullable:"false" doc:"One container per agent, 1..64."`
	// TTLSeconds and IdleTimeoutSeconds are the campaign's lifetime (see
	// Lifetime); 0 is none (agentpen serve gives its default).
	// Pool is how many ready, attested, never-claimed workspaces the
	// campaign keeps (see Plan.PoolAgent); 0 is none.
	Pool               int `json:"pool,omitempty" minimum:"0" maximum:"64" doc:"Keep this many ready, attested, never-used workspaces, made like workspaces[0] without its task: POST /v1/campaigns/{id}/workspaces (agentpen add) binds a task to one and returns its base_url at once; the pool refills in the background. Needs the default topology (egress internal, no agent_reachable) and workspaces[0] running the workbench without a workspace_host_path."`
	TTLSeconds         int `json:"ttl_seconds,omitempty" minimum:"0" maximum:"2592000" doc:"Remove the campaign this many seconds after its create was accepted (as DELETE does; reason ttl). 0 or absent: none with agentpen up; agentpen serve's default (--ttl) through the API, which also caps it (--max-ttl). At least 10."`
	IdleTimeoutSeconds int `json:"idle_timeout_seconds,omitempty" minimum:"0" maximum:"2592000" doc:"Remove the campaign once no episode traffic (a reset or a step, through the API's proxy or a workspace's socket) has reached it for this many seconds (reason idle). 0 or absent: none with agentpen up; agentpen serve's default (--idle-timeout) through the API, which also caps it (--max-idle-timeout), unless a workspace runs its own command (its activity is not seen: no default). At least 5."`
	// LauncherTimeoutSeconds ties the campaign to the launcher that
	// created it through agentpen serve (see Lifecycle.LauncherGone); 0 is
	// none. agentpen up, which has no launcher to watch, refuses it.
	LauncherTimeoutSeconds int `json:"launcher_timeout_seconds,omitempty" minimum:"0" maximum:"2592000" doc:"Tie the campaign to the launcher that creates it (through agentpen serve only; agentpen up refuses it): once that launcher's token has held no event stream of it (GET /v1/campaigns/{id}/events) and sent it no keepalive (POST /v1/campaigns/{id}/keepalive) for this many seconds, it is removed as DELETE removes it (reason launcher_gone). 0 or absent: not tied. At least 5."`
}

// ServerSpec describes the campaign's server container.
type ServerSpec struct {
	// Image is an image id, a repository digest or a local tag (see
	// CheckImage).
	Image string `json:"image" pattern:"^(sha256:[0-9a-f]{64}|[^@\\s]+@sha256:[0-9a-f]{64}|[^@\\s]+:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})$" doc:"The image: an image id (sha256:<64 hex>), repo@sha256:<repo digest>, or a local tag (repo:tag, not latest), resolved to the daemon's image id when the campaign is created; the containers and the attestation use that id (GET /v1/images, agentpen images list the local images)."`
	// Command overrides the image's command; empty means the workbench
	// grader ("grader --listen :Port").
	Command []string `json:"command,omitempty" nullable:"false" doc:"Overrides the image's command; empty: the workbench grader."`
	// Port is the port the server listens on inside the network (default 8080).
	Port int `json:"port,omitempty" minimum:"1" maximum:"65535" default:"8080" doc:"The port the server listens on (network topologies)."`
	// APIKeyEnv names the variable holding the API key (default
	// AGENTPEN_API_KEY). Its value is read from agentpen's own environment
	// at create time and never logged or stored.
	APIKeyEnv string `json:"api_key_env,omitempty" pattern:"^[A-Za-z_][A-Za-z0-9_]{0,127}$" default:"AGENTPEN_API_KEY" doc:"Names the variable of agentpen's own environment that holds the grader's API key (openssl rand -hex 32 makes one); read at create time, never logged or stored."`
	// MountDockerSocket mounts the rootless daemon's socket (and only it)
	// at DockerSocketTarget.
	MountDockerSocket bool `json:"mount_docker_socket,omitempty" doc:"Mount the rootless daemon's socket (and only it) at /run/agentpen/docker.sock in the server."`
	// DataHostPath, when set, is bind-mounted read-only at DataContainerPath
	// (default: the same path).
	DataHostPath      string `json:"data_host_path,omitempty" doc:"A host directory bind-mounted read-only in the server."`
	DataContainerPath string `json:"data_container_path,omitempty" doc:"Where data_host_path is mounted (default: the same path); not under /run/agentpen."`
	// AgentReachable says agent code must reach the server over the network
	// (a launcher's own server that agents call, as in seed 004). It gives
	// each workspace a network of its own that only it and the server join.
	// False (the default) with egress "internal": no network at all, the
	// server on a unix socket only workspaces' episode servers can reach.
	AgentReachable bool `json:"agent_reachable,omitempty" doc:"Agent code must reach the server over the network: each workspace gets a network of its own that only it and the server join. False with egress internal: no network at all, the grader on a unix socket."`
	// PublishLoopback ("127.0.0.1:18080") publishes Port on a loopback
	// address; only with egress "nat". Empty: nothing is published and host
	// calls go through docker exec.
	PublishLoopback string `json:"publish_loopback,omitempty" doc:"Publish the server's port on a loopback address (127.0.0.1:18080); only with egress nat."`
	// ReadyCommand is run in the server container (by docker exec) until it
	// exits 0; empty means the workbench probe of http://127.0.0.1:Port/health.
	ReadyCommand []string `json:"ready_command,omitempty" nullable:"false" doc:"Run in the server by docker exec until it exits 0; empty: the workbench probe of http://127.0.0.1:<port>/health."`
	// ExtraEnv is plain configuration (see CheckExtraEnv).
	ExtraEnv map[string]string `json:"extra_env,omitempty" doc:"Plain configuration variables (not secrets: they are visible to docker inspect and stored in the spec)."`
	// SecretEnv names variables passed through from agentpen's environment.
	SecretEnv []string `json:"secret_env,omitempty" nullable:"false" doc:"Names of variables passed through from agentpen's environment; their values are never logged or stored."`
}

// WorkspaceSpec describes one agent's workspace container.
type WorkspaceSpec struct {
	// TaskID is the benchmark task; it never appears anywhere the agent can
	// see: names, aliases, labels, env and paths use the opaque agent id.
	TaskID string `json:"task_id" pattern:"^[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,127}$" doc:"The benchmark task (workbench tasks lists the catalogue); never visible to the agent."`
	// AttemptID distinguishes retries of the same task (optional).
	AttemptID string `json:"attempt_id,omitempty" pattern:"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$" doc:"Distinguishes two workspaces of the same task."`
	// Image is as ServerSpec.Image.
	Image string `json:"image" pattern:"^(sha256:[0-9a-f]{64}|[^@\\s]+@sha256:[0-9a-f]{64}|[^@\\s]+:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})$" doc:"The image, as server.image."`
	// Command overrides the image's command; empty means the workbench
	// episode server on /run/workbench/wb.sock grading through the
	// campaign's grader (WorkbenchCommand), so no answer key enters the
	// workspace.
	Command []string `json:"command,omitempty" nullable:"false" doc:"Overrides the image's command; empty: the workbench episode server grading through the campaign's grader."`
	// WorkspaceHostPath, when set, is bind-mounted at /workspace.
	WorkspaceHostPath string `json:"workspace_host_path,omitempty" doc:"A host directory bind-mounted at /workspace."`
	// ExtraEnv and Labels are validated as the campaign's and must not spell
	// the task id.
	ExtraEnv map[string]string `json:"extra_env,omitempty" doc:"Plain configuration variables, as server.extra_env; must not spell the task id."`
	Labels   map[string]string `json:"labels,omitempty" doc:"Labels of this workspace, as the campaign's; must not spell the task id."`
	// Integrity declares what the workspace's integrity audit checks its
	// image against (see IntegritySpec).
	Integrity IntegritySpec `json:"integrity,omitzero" doc:"What the attestation's integrity audit checks this workspace's image against: its repositories' base commits, the files its agent must not read."`
}

// IntegritySpec declares what a workspace's integrity audit checks
// against: the repositories under GitRoot are found and each is audited,
// as the agent's uid, for history past its base (a branch, tag, stash,
// reflog entry or dangling object holding the fix): the base Bases
// declares for it, or its HEAD; and the agent's uid must not open any
// of ForbiddenPaths.
type IntegritySpec struct {
	// GitRoot is where repositories are searched (default
	// DefaultWorkspaceTarget).
	GitRoot string `json:"git_root,omitempty" default:"/workspace" doc:"Where the workspace's git repositories are searched (every one found is audited); absolute, not under /run, /proc or /sys."`
	// Bases maps a repository (its work tree's path, or a bare
	// repository's) to its base commit (40 hex); a repository not named
	// is audited against its HEAD, one named and not found fails.
	Bases map[string]string `json:"bases,omitempty" doc:"The base commit (40 lower-case hex) of each repository, by its work tree's path under git_root: anything the repository holds that the base does not reach fails the attestation. A repository not named is audited against its HEAD; one named must be there. At most 64."`
	// ForbiddenPaths are files the agent's uid must not be able to open
	// (an answer key, a solution, the grader's data baked into the
	// image).
	ForbiddenPaths []string `json:"forbidden_paths,omitempty" nullable:"false" doc:"Files the agent's uid must not be able to open (answer keys, solutions, the grader's data in the image): each one it can open fails the attestation. Absolute clean paths, at most 64."`
	// AllowedEgress names the canary classes (EgressClasses) the agent
	// may reach: each class not named is probed with a stand-in, and
	// one the agent reaches fails the attestation.
	AllowedEgress []string `json:"allowed_egress,omitempty" nullable:"false" doc:"The kinds of host outside the campaign a launcher's own command may reach (package_registry, code_host, launcher, metadata): the attestation stands in for each kind not named and fails when the agent's uid reaches it. A route out reaches every host, so under egress nat name each kind the agent may reach."`
}

// Canary classes: the kinds of host outside the campaign an agent could
// take the answer from, each stood in for by the integrity audit's
// network canaries (IntegritySpec.AllowedEgress names those allowed).
const (
	EgressPackageRegistry = "package_registry"
	EgressCodeHost        = "code_host"
	EgressLauncher        = "launcher"
	EgressMetadata        = "metadata"
)

// EgressClasses are the canary classes, in the order reports name them.
var EgressClasses = []string{EgressPackageRegistry, EgressCodeHost, EgressLauncher, EgressMetadata}

// Allows reports whether the spec allows the agent to reach class.
func (s IntegritySpec) Allows(class string) bool { return slices.Contains(s.AllowedEgress, class) }

// WorkbenchForbiddenPaths are the workbench image's own forbidden paths,
// which the integrity audit adds to a workspace's where the workbench
// serves: the binary holds every answer key.
var WorkbenchForbiddenPaths = []string{WorkbenchBinary}

// MaxIntegrityBases bounds IntegritySpec.Bases, and ForbiddenPaths.
const MaxIntegrityBases = 64

// Root is the directory the audit searches: GitRoot, or its default.
func (s IntegritySpec) Root() string {
	if s.GitRoot == "" {
		return DefaultWorkspaceTarget
	}
	return s.GitRoot
}
