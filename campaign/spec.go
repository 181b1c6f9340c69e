package campaign

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

// Defaults and fixed paths of a campaign.
const (
	// DefaultServerPort is ServerSpec.Port when zero.
	DefaultServerPort = 8080
	// DefaultAPIKeyEnv is ServerSpec.APIKeyEnv when empty.
	DefaultAPIKeyEnv = "AGENTPEN_API_KEY"
	// DockerSocketTarget is where ServerSpec.MountDockerSocket mounts the
	// daemon's socket in the server container.
	DockerSocketTarget = "/run/agentpen/docker.sock"
	// WorkbenchRunDir is a workspace's bind-mounted run directory, and
	// WorkbenchSocket the episode server's unix socket in it.
	WorkbenchRunDir = "/run/workbench"
	WorkbenchSocket = WorkbenchRunDir + "/wb.sock"
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
	CampaignID string `json:"campaign_id"`
	// Egress is "internal" (default) or "nat".
	Egress Egress `json:"egress,omitempty"`
	// Labels are added to every resource; keys under io.agentpen. are refused.
	Labels map[string]string `json:"labels,omitempty"`
	// Server is the task-server (grader) container.
	Server ServerSpec `json:"server"`
	// Workspaces are the agents' containers, 1..MaxWorkspaces.
	Workspaces []WorkspaceSpec `json:"workspaces"`
}

// ServerSpec describes the campaign's server container.
type ServerSpec struct {
	// Image is a pinned reference (see CheckImage).
	Image string `json:"image"`
	// Command overrides the image's command; empty means the workbench
	// grader ("grader --listen :Port").
	Command []string `json:"command,omitempty"`
	// Port is the port the server listens on inside the network (default 8080).
	Port int `json:"port,omitempty"`
	// APIKeyEnv names the variable holding the API key (default
	// AGENTPEN_API_KEY). Its value is read from agentpen's own environment
	// at create time and never logged or stored.
	APIKeyEnv string `json:"api_key_env,omitempty"`
	// MountDockerSocket mounts the rootless daemon's socket (and only it)
	// at DockerSocketTarget.
	MountDockerSocket bool `json:"mount_docker_socket,omitempty"`
	// DataHostPath, when set, is bind-mounted read-only at DataContainerPath
	// (default: the same path).
	DataHostPath      string `json:"data_host_path,omitempty"`
	DataContainerPath string `json:"data_container_path,omitempty"`
	// AgentReachable says agent code must reach the server over the network
	// (a launcher's own server that agents call, as in seed 004). It gives
	// each workspace a network of its own that only it and the server join.
	// False (the default) with egress "internal": no network at all, the
	// server on a unix socket only workspaces' episode servers can reach.
	AgentReachable bool `json:"agent_reachable,omitempty"`
	// PublishLoopback ("127.0.0.1:18080") publishes Port on a loopback
	// address; only with egress "nat". Empty: nothing is published and host
	// calls go through docker exec.
	PublishLoopback string `json:"publish_loopback,omitempty"`
	// ReadyCommand is run in the server container (by docker exec) until it
	// exits 0; empty means the workbench probe of http://127.0.0.1:Port/health.
	ReadyCommand []string `json:"ready_command,omitempty"`
	// ExtraEnv is plain configuration (see CheckExtraEnv).
	ExtraEnv map[string]string `json:"extra_env,omitempty"`
	// SecretEnv names variables passed through from agentpen's environment.
	SecretEnv []string `json:"secret_env,omitempty"`
}

// WorkspaceSpec describes one agent's workspace container.
type WorkspaceSpec struct {
	// TaskID is the benchmark task; it never appears anywhere the agent can
	// see: names, aliases, labels, env and paths use the opaque agent id.
	TaskID string `json:"task_id"`
	// AttemptID distinguishes retries of the same task (optional).
	AttemptID string `json:"attempt_id,omitempty"`
	// Image is a pinned reference (see CheckImage).
	Image string `json:"image"`
	// Command overrides the image's command; empty means the workbench
	// episode server on /run/workbench/wb.sock grading through the
	// campaign's grader (WorkbenchCommand), so no answer key enters the
	// workspace.
	Command []string `json:"command,omitempty"`
	// WorkspaceHostPath, when set, is bind-mounted at /workspace.
	WorkspaceHostPath string `json:"workspace_host_path,omitempty"`
	// ExtraEnv and Labels are validated as the campaign's and must not spell
	// the task id.
	ExtraEnv map[string]string `json:"extra_env,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
}
