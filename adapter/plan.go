package adapter

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

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

// Label keys agentpen sets on everything it creates (io.agentpen.*).
const (
	LabelCampaign = "io.agentpen.campaign"
	LabelRole     = "io.agentpen.role"
	LabelAgent    = "io.agentpen.agent"
	LabelNetwork  = "io.agentpen.network"
	LabelOwner    = "io.agentpen.owner"
	LabelSchema   = "io.agentpen.schema"
)

// Label values.
const (
	OwnerValue  = "agentpen"
	SchemaValue = "agentpen.v1"
	RoleNetwork = "network"
	RoleServer  = "server"
	RoleWork    = "workspace"
)

// Defaults of a CampaignSpec.
const (
	DefaultServerPort      = 8080
	DefaultAPIKeyEnv       = "AGENTPEN_API_KEY"
	DockerSocketTarget     = "/run/agentpen/docker.sock"
	WorkbenchRunDir        = "/run/workbench"
	WorkbenchSocket        = WorkbenchRunDir + "/wb.sock"
	DefaultWorkspaceTarget = "/workspace"
	MaxWorkspaces          = 64
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
	// DataHostPath, when set, is bind-mounted read-only at DataContainerPath.
	DataHostPath      string `json:"data_host_path,omitempty"`
	DataContainerPath string `json:"data_container_path,omitempty"`
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

// Plan is a validated campaign: every name, alias, label and environment
// variable, computed before anything is created.
type Plan struct {
	CampaignID string
	// Key is the campaign's name component: a DNS slug and a hash.
	Key     string
	Egress  Egress
	Network NetworkPlan
	Server  ServerPlan
	Agents  []AgentPlan
}

// NetworkPlan is the campaign network.
type NetworkPlan struct {
	Name     string
	Internal bool
	Labels   map[string]string
}

// ServerPlan is the server container.
type ServerPlan struct {
	// NeedsKey is true when the server runs the default command, the
	// workbench grader, which refuses to start without its API key.
	NeedsKey bool
	Name     string
	Alias    string
	Port     int
	URL      string
	Labels   map[string]string
	Spec     ServerSpec
	Publish  netip.AddrPort
}

// AgentPlan is one workspace container.
type AgentPlan struct {
	// Index is the position in CampaignSpec.Workspaces.
	Index int
	// NeedsKey is true when the workspace runs the default command, whose
	// episode server calls the grader with the API key.
	NeedsKey bool
	AgentID  string
	Name     string
	Alias    string
	Labels   map[string]string
	// Env is the complete environment (names and values; no secrets).
	Env  map[string]string
	Spec WorkspaceSpec
	// taskID is kept for exposure checks only; never serialised.
	taskID string
}

// OpaqueAgentID derives "agent-<24 hex>" from the campaign, task and attempt
// ids, so the agent's identity never reveals the task and a retry (a new
// attempt id) never collides with an earlier attempt.
func OpaqueAgentID(campaignID, taskID, attemptID string) string {
	sum := sha256.Sum256([]byte("agentpen-agent\x00" + campaignID + "\x00" + taskID + "\x00" + attemptID))
	return "agent-" + hex.EncodeToString(sum[:])[:24]
}

// shortHash is the first n hex digits of sha256 of the parts joined by NUL.
func shortHash(n int, parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(sum[:])[:n]
}

// CampaignKey is the name component of a campaign: a readable slug and a
// hash of the exact id, so distinct ids never share names.
func CampaignKey(campaignID string) string {
	slug := dnsSlug(campaignID)
	if len(slug) > 24 {
		slug = strings.TrimRight(slug[:24], "-")
	}
	return slug + "-" + shortHash(10, "agentpen-campaign", campaignID)
}

// DNSAlias is a campaign-scoped DNS label for a role ("server", or the
// agent id for a workspace): at most 63 characters, ending in a hash.
func DNSAlias(campaignID, role, component string) string {
	prefix := "agentpen-" + dnsSlug(role) + "-" + dnsSlug(campaignID) + "-" + dnsSlug(component)
	if len(prefix) > 52 {
		prefix = prefix[:52]
	}
	return strings.TrimRight(prefix, "-") + "-" + shortHash(10, campaignID, role, component)
}

// NoProxy is the NO_PROXY value for reaching the server alias directly.
func NoProxy(alias string, port int) string {
	return alias + "," + alias + ":" + strconv.Itoa(port)
}

var forbiddenNetworks = map[string]bool{"": true, "none": true, "host": true, "bridge": true, "default": true, "docker0": true}

// NewPlan validates spec and computes the plan. It reads nothing and
// creates nothing; an error names the field and value.
func NewPlan(spec CampaignSpec) (*Plan, error) {
	if err := CheckID("campaign_id", spec.CampaignID); err != nil {
		return nil, err
	}
	egress := spec.Egress
	if egress == "" {
		egress = EgressInternal
	}
	if egress != EgressInternal && egress != EgressNAT {
		return nil, invalid("egress", string(spec.Egress), `must be "internal" or "nat"`)
	}
	if err := CheckLabels("labels", spec.Labels); err != nil {
		return nil, err
	}
	if n := len(spec.Workspaces); n < 1 || n > MaxWorkspaces {
		return nil, invalid("workspaces", strconv.Itoa(n), "need 1..%d workspaces", MaxWorkspaces)
	}
	key := CampaignKey(spec.CampaignID)
	p := &Plan{CampaignID: spec.CampaignID, Key: key, Egress: egress}
	p.Network = NetworkPlan{
		Name:     "agentpen-" + key,
		Internal: egress == EgressInternal,
		Labels:   p.labels(spec.Labels, RoleNetwork, ""),
	}
	if forbiddenNetworks[p.Network.Name] {
		return nil, invalid("network", p.Network.Name, "reserved network name")
	}
	p.Network.Labels[LabelNetwork] = p.Network.Name

	srv, err := planServer(p, spec)
	if err != nil {
		return nil, err
	}
	p.Server = srv

	seen := map[string]int{}
	for i, ws := range spec.Workspaces {
		a, err := planAgent(p, spec, i, ws)
		if err != nil {
			return nil, err
		}
		if j, dup := seen[a.AgentID]; dup {
			return nil, invalid(fmt.Sprintf("workspaces[%d]", i), ws.TaskID, "same task and attempt as workspaces[%d]; give each an attempt_id", j)
		}
		seen[a.AgentID] = i
		p.Agents = append(p.Agents, a)
	}
	// The server's alias and URL reach every workspace: they must not spell
	// any task id either.
	for _, a := range p.Agents {
		for _, v := range []string{p.CampaignID, p.Server.Alias, p.Network.Name} {
			if exposesTask(v, a.taskID) {
				return nil, invalid(fmt.Sprintf("workspaces[%d].task_id", a.Index), "", "the campaign id or a campaign-wide name spells this task id; agents would see it")
			}
		}
	}
	return p, nil
}

func (p *Plan) labels(extra map[string]string, role, agent string) map[string]string {
	l := map[string]string{}
	for k, v := range extra {
		l[k] = v
	}
	l[LabelCampaign] = p.CampaignID
	l[LabelRole] = role
	l[LabelOwner] = OwnerValue
	l[LabelSchema] = SchemaValue
	if agent != "" {
		l[LabelAgent] = agent
	}
	return l
}

func planServer(p *Plan, spec CampaignSpec) (ServerPlan, error) {
	s := spec.Server
	if err := CheckImage("server.image", s.Image); err != nil {
		return ServerPlan{}, err
	}
	if s.Port == 0 {
		s.Port = DefaultServerPort
	}
	if err := checkPort("server.port", s.Port); err != nil {
		return ServerPlan{}, err
	}
	if s.APIKeyEnv == "" {
		s.APIKeyEnv = DefaultAPIKeyEnv
	}
	if err := checkEnvName("server.api_key_env", s.APIKeyEnv); err != nil {
		return ServerPlan{}, err
	}
	if protectedEnv[strings.ToUpper(s.APIKeyEnv)] {
		return ServerPlan{}, invalid("server.api_key_env", s.APIKeyEnv, "collides with a protected control variable")
	}
	if err := checkArgs("server.command", s.Command); err != nil {
		return ServerPlan{}, err
	}
	if err := checkArgs("server.ready_command", s.ReadyCommand); err != nil {
		return ServerPlan{}, err
	}
	needsKey := false
	if len(s.Command) == 0 {
		s.Command = []string{"grader", "--listen", fmt.Sprintf(":%d", s.Port), "--key-env", s.APIKeyEnv}
		needsKey = true
	}
	if len(s.ReadyCommand) == 0 {
		s.ReadyCommand = []string{"/usr/local/bin/workbench", "probe", "--expect-status", "200", fmt.Sprintf("http://127.0.0.1:%d/health", s.Port)}
	}
	if err := CheckExtraEnv("server.extra_env", s.ExtraEnv); err != nil {
		return ServerPlan{}, err
	}
	for i, name := range s.SecretEnv {
		if err := checkEnvName(fmt.Sprintf("server.secret_env[%d]", i), name); err != nil {
			return ServerPlan{}, err
		}
		if protectedEnv[strings.ToUpper(name)] {
			return ServerPlan{}, invalid(fmt.Sprintf("server.secret_env[%d]", i), name, "protected control variable")
		}
	}
	if s.DataHostPath != "" || s.DataContainerPath != "" {
		if err := checkMountPath("server.data_host_path", s.DataHostPath); err != nil {
			return ServerPlan{}, err
		}
		if s.DataContainerPath == "" {
			s.DataContainerPath = s.DataHostPath
		}
		if err := checkMountPath("server.data_container_path", s.DataContainerPath); err != nil {
			return ServerPlan{}, err
		}
		if s.DataContainerPath == DockerSocketTarget || strings.HasPrefix(s.DataContainerPath, "/run/agentpen") {
			return ServerPlan{}, invalid("server.data_container_path", s.DataContainerPath, "reserved for the Docker socket")
		}
	}
	sp := ServerPlan{
		NeedsKey: needsKey,
		Name:     "agentpen-" + p.Key + "-server",
		Alias:    DNSAlias(p.CampaignID, RoleServer, "campaign"),
		Port:     s.Port,
		Labels:   p.labels(spec.Labels, RoleServer, ""),
		Spec:     s,
	}
	sp.Labels[LabelNetwork] = p.Network.Name
	sp.URL = "http://" + sp.Alias + ":" + strconv.Itoa(sp.Port)
	if s.PublishLoopback != "" {
		if p.Egress != EgressNAT {
			return ServerPlan{}, invalid("server.publish_loopback", s.PublishLoopback, `a published port needs egress "nat"; with "internal" host calls go through docker exec`)
		}
		ap, err := CheckLoopbackPublish("server.publish_loopback", s.PublishLoopback)
		if err != nil {
			return ServerPlan{}, err
		}
		sp.Publish = ap
	}
	if !dnsLabelRe.MatchString(sp.Alias) {
		return ServerPlan{}, invalid("server alias", sp.Alias, "not a DNS label")
	}
	return sp, nil
}

func planAgent(p *Plan, spec CampaignSpec, i int, ws WorkspaceSpec) (AgentPlan, error) {
	field := func(f string) string { return fmt.Sprintf("workspaces[%d].%s", i, f) }
	if err := CheckTaskID(field("task_id"), ws.TaskID); err != nil {
		return AgentPlan{}, err
	}
	if ws.AttemptID != "" {
		if err := CheckID(field("attempt_id"), ws.AttemptID); err != nil {
			return AgentPlan{}, err
		}
	}
	if err := CheckImage(field("image"), ws.Image); err != nil {
		return AgentPlan{}, err
	}
	if err := checkArgs(field("command"), ws.Command); err != nil {
		return AgentPlan{}, err
	}
	if err := CheckExtraEnv(field("extra_env"), ws.ExtraEnv); err != nil {
		return AgentPlan{}, err
	}
	if err := CheckLabels(field("labels"), ws.Labels); err != nil {
		return AgentPlan{}, err
	}
	if ws.WorkspaceHostPath != "" {
		if err := checkMountPath(field("workspace_host_path"), ws.WorkspaceHostPath); err != nil {
			return AgentPlan{}, err
		}
	}
	id := OpaqueAgentID(p.CampaignID, ws.TaskID, ws.AttemptID)
	a := AgentPlan{
		Index:   i,
		AgentID: id,
		Name:    "agentpen-" + p.Key + "-" + id,
		Alias:   "agentpen-ws-" + id,
		Spec:    ws,
		taskID:  ws.TaskID,
	}
	if len(ws.Command) == 0 {
		a.Spec.Command = WorkbenchCommand(p.Server.URL, p.Server.Spec.APIKeyEnv)
		a.NeedsKey = true
	}
	a.Labels = p.labels(spec.Labels, RoleWork, id)
	for k, v := range ws.Labels {
		a.Labels[k] = v
	}
	a.Labels[LabelNetwork] = p.Network.Name
	a.Env = map[string]string{
		"AGENTPEN_AGENT_ID":       id,
		"AGENTPEN_SERVER_URL":     p.Server.URL,
		"AGENTPEN_GRADER_URL":     p.Server.URL,
		"AGENTPEN_GRADER_KEY_ENV": p.Server.Spec.APIKeyEnv,
		"NO_PROXY":                NoProxy(p.Server.Alias, p.Server.Port),
		"no_proxy":                NoProxy(p.Server.Alias, p.Server.Port),
	}
	for k, v := range ws.ExtraEnv {
		a.Env[k] = v
	}
	// Nothing the agent can see may spell the task id.
	visible := []string{a.Name, a.Alias, ws.WorkspaceHostPath}
	visible = append(visible, a.Spec.Command...)
	for k, v := range a.Labels {
		visible = append(visible, k, v)
	}
	for k, v := range a.Env {
		visible = append(visible, k, v)
	}
	for _, v := range visible {
		if exposesTask(v, ws.TaskID) {
			return AgentPlan{}, invalid(field("task_id"), "", "would be visible to the agent in %q; workspaces use the opaque agent id only", truncate(v, 60))
		}
	}
	return a, nil
}

// WorkbenchCommand is a workspace's default command: the episode server on
// its unix socket, grading through the campaign's grader with the key in
// the variable keyEnv (set in the workspace's environment at create time,
// never visible to episode code, which runs with a cleared environment).
func WorkbenchCommand(graderURL, keyEnv string) []string {
	return []string{"serve", "--listen", "unix://" + WorkbenchSocket, "--grader", graderURL, "--grader-key-env", keyEnv}
}

func checkArgs(field string, args []string) error {
	if len(args) > 64 {
		return invalid(field, "", "at most 64 arguments")
	}
	for i, a := range args {
		if a == "" || len(a) > 4096 || strings.ContainsRune(a, 0) {
			return invalid(fmt.Sprintf("%s[%d]", field, i), a, "must be non-empty text of at most 4096 bytes without NUL")
		}
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// AgentIDs returns the plan's agent ids in spec order.
func (p *Plan) AgentIDs() []string {
	out := make([]string, len(p.Agents))
	for i, a := range p.Agents {
		out[i] = a.AgentID
	}
	return out
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
