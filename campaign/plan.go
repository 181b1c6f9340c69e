package campaign

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

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
	// Generation and Instance are set by Bind for one bring-up; zero and
	// empty in a plan that is only being checked.
	Generation int
	Instance   string
}

// Bind makes the plan one bring-up's: generation gen with the instance
// nonce, whose label (LabelInstance) every resource then carries, so
// ownership can be proven against this bring-up and no other.
func (p *Plan) Bind(gen int, instance string) {
	p.Generation, p.Instance = gen, instance
	p.Network.Labels[LabelInstance] = instance
	p.Server.Labels[LabelInstance] = instance
	for i := range p.Agents {
		p.Agents[i].Labels[LabelInstance] = instance
	}
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
	key := Key(spec.CampaignID)
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
	if err := CheckEnvName("server.api_key_env", s.APIKeyEnv); err != nil {
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
		if err := CheckEnvName(fmt.Sprintf("server.secret_env[%d]", i), name); err != nil {
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
