package campaign

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Topology says how a campaign's containers are connected.
type Topology string

// The topologies (see docs/decisions.md, "Agents isolated from each
// other").
const (
	// TopologyNone: no network at all. The server and every workspace run
	// with network mode "none"; each workspace's episode server reaches the
	// grader on a unix socket in a root-only directory bind-mounted
	// read-only into it, so agent code can reach no server and nothing of
	// another agent's. The default: egress "internal" and a server agent
	// code does not call.
	TopologyNone Topology = "none"
	// TopologyPerAgent: one network per workspace, which only that
	// workspace and the server join (the server on every one, under the
	// same alias). Agent code reaches the server, never another workspace.
	// Chosen for egress "nat" (each agent network is then a NAT bridge) and
	// for a server agent code must call (ServerSpec.AgentReachable).
	TopologyPerAgent Topology = "per-agent"
)

// In-container paths of the grader's socket (TopologyNone).
const (
	// GraderDir is where the server's socket directory is mounted: read and
	// write in the server, read-only in workspaces. It is 0700 and owned by
	// container root, so sandbox uids cannot reach the socket.
	GraderDir    = "/run/agentpen/grader"
	GraderSocket = GraderDir + "/grader.sock"
)

// UID blocks: every workspace runs its episodes under a block of kernel
// uids of its own, disjoint from every other workspace's on the daemon (all
// containers of a rootless daemon share one user namespace, so a container
// uid is the same kernel user in all of them). Container uids stay below
// 65536, the rootless user's default subordinate range.
const (
	UIDBlockFirst = 20000
	UIDBlockSize  = 64
	UIDBlockLimit = 65536
	// UIDBlocks is how many blocks fit: 711.
	UIDBlocks = (UIDBlockLimit - UIDBlockFirst) / UIDBlockSize
)

// Plan is a validated campaign: every name, alias, label and environment
// variable, computed before anything is created.
type Plan struct {
	// Spec is the spec the plan was computed from (as the launcher gave
	// it; the defaults are in the plan's other fields).
	Spec       CampaignSpec
	CampaignID string
	// Key is the campaign's name component: a DNS slug and a hash.
	Key      string
	Egress   Egress
	Topology Topology
	// Networks are the agents' networks (TopologyPerAgent), in agent
	// order; none for TopologyNone.
	Networks []NetworkPlan
	Server   ServerPlan
	Agents   []AgentPlan
	// Generation and Instance are set by Bind for one bring-up; zero and
	// empty in a plan that is only being checked.
	Generation int
	Instance   string
	// Lifetime is the spec's (ttl_seconds, idle_timeout_seconds); the
	// service gives it its policy's (LifetimePolicy.Apply) and the moment
	// the create was accepted, and the bring-up journals it (OpLifetime)
	// when it is not zero. Accepted zero means the bring-up's start.
	Lifetime Lifetime
	// Images maps each tag the spec names to the image id Pin put in its
	// place (nil before, and for a spec of pins only). The generation's
	// begin record keeps it (Generation.Images).
	Images map[string]string
	// Owner is the name of the launcher creating the campaign through
	// agentpen serve (CheckOwner's grammar; the service sets it, never the
	// spec); empty for agentpen up. The begin record keeps it
	// (Generation.Owner).
	Owner string
	// Keyed is true when the agent ids were derived under a key
	// (PlanOptions.AgentKey): only such a plan is brought up.
	Keyed    bool
	agentKey []byte
}

// ImageFields returns the image references the plan's containers run
// (pinned by Pin, or as the spec names them before), each with the first
// spec field that names it ("server.image", "workspaces[2].image").
func (p *Plan) ImageFields() map[string]string {
	out := map[string]string{p.Server.Spec.Image: "server.image"}
	for _, a := range p.Agents {
		if _, ok := out[a.Spec.Image]; !ok {
			out[a.Spec.Image] = fmt.Sprintf("workspaces[%d].image", a.Index)
		}
	}
	return out
}

// Pin puts in place of every tag the plan's containers name (Pinned is
// false) the image ids maps it to, and records the map in Images; pins
// are kept as they are. Plan.Spec keeps what the launcher gave (the spec
// file shows the tag); the containers, and the attestation, use the
// pin. A pin is the image id the tag was resolved to, or, on a runtime
// whose nodes name images only by name (a cluster's imported images),
// the tag's qualified name (QualifiedName): the image a container runs is
// then proven from its status.
// A tag with no pin in ids is a *ValidationError naming the field, and
// nothing is changed. Pinning a pinned plan again changes nothing.
func (p *Plan) Pin(ids map[string]string) error {
	fields := p.ImageFields()
	pinned := map[string]string{}
	for ref, field := range fields {
		if Pinned(ref) {
			continue
		}
		id, ok := ids[ref]
		if !ok || !pinOf(ref, id) {
			return invalid(field, ref, "a tag needs the image id it was resolved to at create time, and none is recorded")
		}
		pinned[ref] = id
	}
	if len(pinned) == 0 {
		return nil
	}
	if p.Images == nil {
		p.Images = map[string]string{}
	}
	for ref, id := range pinned {
		p.Images[ref] = id
	}
	if id, ok := pinned[p.Server.Spec.Image]; ok {
		p.Server.Spec.Image = id
	}
	for i := range p.Agents {
		if id, ok := pinned[p.Agents[i].Spec.Image]; ok {
			p.Agents[i].Spec.Image = id
		}
	}
	return nil
}

// PlanOptions are what a plan is computed with beside its spec.
type PlanOptions struct {
	// AgentKey is the state root's agent-id secret (OpaqueAgentID); nil
	// for a plan that is only checked.
	AgentKey []byte
	// MaxWorkspaces is the most workspaces a campaign may have on the
	// runtime it will run on (its driver's), pool included; 0 is
	// MaxWorkspaces. At most MaxPoolSlots.
	MaxWorkspaces int
}

// maxWorkspaces is the options' bound on a campaign's workspaces.
func (o PlanOptions) maxWorkspaces() int {
	if o.MaxWorkspaces <= 0 {
		return MaxWorkspaces
	}
	return min(o.MaxWorkspaces, MaxPoolSlots)
}

// Bind makes the plan one bring-up's: generation gen with the instance
// nonce, whose label (LabelInstance) every resource then carries, so
// ownership can be proven against this bring-up and no other.
func (p *Plan) Bind(gen int, instance string) {
	p.Generation, p.Instance = gen, instance
	for i := range p.Networks {
		p.Networks[i].Labels[LabelInstance] = instance
	}
	p.Server.Labels[LabelInstance] = instance
	for i := range p.Agents {
		p.Agents[i].Labels[LabelInstance] = instance
	}
}

// CampaignLabels are the ownership labels of one of the campaign's own
// objects that is none of its networks, servers or workspaces (a
// cluster's namespace, service account, secret, policies: RoleCampaign),
// with the instance nonce once the plan is bound.
func (p *Plan) CampaignLabels() map[string]string {
	l := p.labels(p.Spec.Labels, RoleCampaign, "")
	if p.Instance != "" {
		l[LabelInstance] = p.Instance
	}
	return l
}

// SetUIDBlock gives agent i the uid block starting at base (a bring-up's
// allocation): its label and the environment the workbench reads it from.
func (p *Plan) SetUIDBlock(i, base int) {
	a := &p.Agents[i]
	a.UIDBase = base
	a.Labels[LabelUIDBlock] = UIDBlockLabel(base)
	a.Env["WORKBENCH_UID_BASE"] = strconv.Itoa(base)
	a.Env["WORKBENCH_UID_COUNT"] = strconv.Itoa(UIDBlockSize)
}

// UIDBlockLabel is the io.agentpen.uid-block value of the block at base:
// "first-last".
func UIDBlockLabel(base int) string {
	return strconv.Itoa(base) + "-" + strconv.Itoa(base+UIDBlockSize-1)
}

// ParseUIDBlock reads a UIDBlockLabel back: the base of a well-formed,
// aligned block inside the range, or false.
func ParseUIDBlock(label string) (int, bool) {
	a, b, ok := strings.Cut(label, "-")
	first, err1 := strconv.Atoi(a)
	last, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || first < UIDBlockFirst || last != first+UIDBlockSize-1 ||
		last >= UIDBlockLimit || (first-UIDBlockFirst)%UIDBlockSize != 0 || UIDBlockLabel(first) != label {
		return 0, false
	}
	return first, true
}

// NetworkPlan is one agent's network (TopologyPerAgent).
type NetworkPlan struct {
	Name     string
	Internal bool
	Labels   map[string]string
	// Agent is the opaque id of the agent whose network it is.
	Agent string
}

// ServerPlan is the server container.
type ServerPlan struct {
	// NeedsKey is true when the server runs the default command, the
	// workbench grader, which refuses to start without its API key.
	NeedsKey bool
	Name     string
	// Alias is its DNS name on every agent network (TopologyPerAgent).
	Alias string
	Port  int
	// URL is how workspaces reach it: http://Alias:Port, or
	// unix://GraderSocket for TopologyNone.
	URL     string
	Labels  map[string]string
	Spec    ServerSpec
	Publish netip.AddrPort
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
	// Network is the name of its own network ("" for TopologyNone).
	Network string
	// UIDBase is the first uid of its block (SetUIDBlock; 0 until then).
	UIDBase int
	Labels  map[string]string
	// Env is the complete environment (names and values; no secrets).
	Env  map[string]string
	Spec WorkspaceSpec
	// Pool: a pooled workspace (Plan.PoolAgent), made without its task.
	Pool bool
	// taskID is kept for exposure checks only; never serialised.
	taskID string
}

var forbiddenNetworks = map[string]bool{"": true, "none": true, "host": true, "bridge": true, "default": true, "docker0": true}

// NewPlan validates spec and computes the plan. It reads nothing and
// creates nothing. Every field that is wrong is named, with its value, in
// one ValidationErrors (a single one is still a *ValidationError for
// errors.As).
func NewPlan(spec CampaignSpec) (*Plan, error) { return NewPlanWith(spec, PlanOptions{}) }

// NewPlanWith is NewPlan with options: the agent ids keyed under
// opts.AgentKey.
func NewPlanWith(spec CampaignSpec, opts PlanOptions) (*Plan, error) {
	var errs errList
	errs.add(CheckID("campaign_id", spec.CampaignID))
	egress := spec.Egress
	if egress == "" {
		egress = EgressInternal
	}
	if egress != EgressInternal && egress != EgressNAT {
		errs.add(invalid("egress", string(spec.Egress), `must be "internal" or "nat"`))
	}
	errs.add(CheckLabels("labels", spec.Labels))
	errs.add(CheckLifetime("ttl_seconds", spec.TTLSeconds, "idle_timeout_seconds", spec.IdleTimeoutSeconds))
	errs.add(CheckLauncherTimeout("launcher_timeout_seconds", spec.LauncherTimeoutSeconds))
	if n, most := len(spec.Workspaces), opts.maxWorkspaces(); n < 1 || n > most {
		errs.add(invalid("workspaces", strconv.Itoa(n), "need 1..%d workspaces", most))
		return nil, errs.err()
	}
	key := Key(spec.CampaignID)
	p := &Plan{Spec: spec, CampaignID: spec.CampaignID, Key: key, Egress: egress, Topology: TopologyNone, Keyed: opts.AgentKey != nil, agentKey: opts.AgentKey,
		Lifetime: Lifetime{TTL: time.Duration(spec.TTLSeconds) * time.Second, Idle: time.Duration(spec.IdleTimeoutSeconds) * time.Second,
			Launcher: time.Duration(spec.LauncherTimeoutSeconds) * time.Second}}
	if egress == EgressNAT || spec.Server.AgentReachable {
		p.Topology = TopologyPerAgent
	}
	p.Server = planServer(p, spec, &errs)

	seen := map[string]int{}
	for i, ws := range spec.Workspaces {
		a, ok := planAgent(p, spec, i, ws, &errs)
		if !ok {
			continue
		}
		if j, dup := seen[a.AgentID]; dup {
			errs.add(invalid(fmt.Sprintf("workspaces[%d]", i), ws.TaskID, "same task and attempt as workspaces[%d]; give each an attempt_id", j))
			continue
		}
		seen[a.AgentID] = i
		p.Agents = append(p.Agents, a)
		if p.Topology == TopologyPerAgent {
			p.Networks = append(p.Networks, NetworkPlan{
				Name:     a.Network,
				Internal: egress == EgressInternal,
				Labels:   p.networkLabels(spec.Labels, a),
				Agent:    a.AgentID,
			})
		}
	}
	// Campaign-wide names reach every workspace: they must not spell any
	// task id either.
	for _, a := range p.Agents {
		for _, v := range []string{p.CampaignID, p.Server.Alias, p.Server.URL} {
			if exposesTask(v, a.taskID) {
				errs.add(invalid(fmt.Sprintf("workspaces[%d].task_id", a.Index), "", "the campaign id or a campaign-wide name spells this task id; agents would see it"))
			}
		}
	}
	checkPool(p, spec, opts.maxWorkspaces(), &errs)
	if err := errs.err(); err != nil {
		return nil, err
	}
	return p, nil
}

// errList collects field errors.
type errList ValidationErrors

func (l *errList) add(err error) {
	if err == nil {
		return
	}
	var ve *ValidationError
	if errors.As(err, &ve) {
		*l = append(*l, ve)
		return
	}
	*l = append(*l, &ValidationError{Field: "(spec)", Msg: err.Error()})
}

func (l errList) err() error {
	if len(l) == 0 {
		return nil
	}
	return ValidationErrors(l)
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

// networkLabels are the labels of agent a's network.
func (p *Plan) networkLabels(extra map[string]string, a AgentPlan) map[string]string {
	l := p.labels(extra, RoleNetwork, a.AgentID)
	l[LabelNetwork] = a.Network
	return l
}

// agentNetworkName is agent id's network: the campaign key and 12 digits
// of the agent id.
func agentNetworkName(key, agentID string) string {
	return "agentpen-" + key + "-n" + strings.TrimPrefix(agentID, "agent-")[:12]
}

// DefaultReadyCommand is the server's readiness command when its spec
// gives none: the workbench probe of the grader's /health, on its unix
// socket (GraderSocket) in TopologyNone, else on port.
func DefaultReadyCommand(t Topology, port int) []string {
	if t == TopologyNone {
		return []string{WorkbenchBinary, "probe", "--unix", GraderSocket, "--expect-status", "200", "http://grader/health"}
	}
	return []string{WorkbenchBinary, "probe", "--expect-status", "200", fmt.Sprintf("http://127.0.0.1:%d/health", port)}
}

func planServer(p *Plan, spec CampaignSpec, errs *errList) ServerPlan {
	s := spec.Server
	errs.add(CheckImage("server.image", s.Image))
	if s.Port == 0 {
		s.Port = DefaultServerPort
	}
	errs.add(checkPort("server.port", s.Port))
	if s.APIKeyEnv == "" {
		s.APIKeyEnv = DefaultAPIKeyEnv
	}
	if err := CheckEnvName("server.api_key_env", s.APIKeyEnv); err != nil {
		errs.add(err)
	} else if protectedEnv[strings.ToUpper(s.APIKeyEnv)] {
		errs.add(invalid("server.api_key_env", s.APIKeyEnv, "collides with a protected control variable"))
	} else {
		errs.add(checkCopiedEnv("server.api_key_env", s.APIKeyEnv))
	}
	errs.add(checkArgs("server.command", s.Command))
	errs.add(checkArgs("server.ready_command", s.ReadyCommand))
	listen := fmt.Sprintf(":%d", s.Port)
	if p.Topology == TopologyNone {
		listen = "unix://" + GraderSocket
	}
	ready := DefaultReadyCommand(p.Topology, s.Port)
	needsKey := false
	if len(s.Command) == 0 {
		s.Command = GraderCommand(listen, s.APIKeyEnv)
		needsKey = true
	}
	if len(s.ReadyCommand) == 0 {
		s.ReadyCommand = ready
	}
	errs.add(CheckExtraEnv("server.extra_env", s.ExtraEnv))
	for i, name := range s.SecretEnv {
		f := fmt.Sprintf("server.secret_env[%d]", i)
		if err := CheckEnvName(f, name); err != nil {
			errs.add(err)
		} else if protectedEnv[strings.ToUpper(name)] {
			errs.add(invalid(f, name, "protected control variable"))
		} else {
			errs.add(checkCopiedEnv(f, name))
		}
	}
	if s.DataHostPath != "" || s.DataContainerPath != "" {
		errs.add(checkMountPath("server.data_host_path", s.DataHostPath))
		if s.DataContainerPath == "" {
			s.DataContainerPath = s.DataHostPath
		}
		if err := checkMountPath("server.data_container_path", s.DataContainerPath); err != nil {
			errs.add(err)
		} else if s.DataContainerPath == DockerSocketTarget || strings.HasPrefix(s.DataContainerPath, "/run/agentpen") {
			errs.add(invalid("server.data_container_path", s.DataContainerPath, "reserved for agentpen (/run/agentpen)"))
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
	sp.Labels[LabelTopology] = string(p.Topology)
	sp.URL = "http://" + sp.Alias + ":" + strconv.Itoa(sp.Port)
	if p.Topology == TopologyNone {
		sp.URL = "unix://" + GraderSocket
	}
	if s.PublishLoopback != "" {
		if p.Egress != EgressNAT {
			errs.add(invalid("server.publish_loopback", s.PublishLoopback, `a published port needs egress "nat"; with "internal" host calls go through docker exec`))
		} else if ap, err := CheckLoopbackPublish("server.publish_loopback", s.PublishLoopback); err != nil {
			errs.add(err)
		} else {
			sp.Publish = ap
		}
	}
	if !dnsLabelRe.MatchString(sp.Alias) {
		errs.add(invalid("server alias", sp.Alias, "not a DNS label"))
	}
	return sp
}

func planAgent(p *Plan, spec CampaignSpec, i int, ws WorkspaceSpec, errs *errList) (AgentPlan, bool) {
	field := func(f string) string { return fmt.Sprintf("workspaces[%d].%s", i, f) }
	n := len(*errs)
	errs.add(CheckTaskID(field("task_id"), ws.TaskID))
	if ws.AttemptID != "" {
		errs.add(CheckID(field("attempt_id"), ws.AttemptID))
	}
	errs.add(CheckImage(field("image"), ws.Image))
	errs.add(checkArgs(field("command"), ws.Command))
	errs.add(CheckExtraEnv(field("extra_env"), ws.ExtraEnv))
	errs.add(CheckLabels(field("labels"), ws.Labels))
	if ws.WorkspaceHostPath != "" {
		errs.add(checkMountPath(field("workspace_host_path"), ws.WorkspaceHostPath))
	}
	errs.add(CheckIntegrity(field("integrity"), ws.Integrity))
	if len(*errs) > n {
		return AgentPlan{}, false
	}
	return buildAgent(p, spec, i, ws, OpaqueAgentID(p.agentKey, p.CampaignID, ws.TaskID, ws.AttemptID), errs)
}

// buildAgent computes the plan of a checked workspace spec ws at index i
// with the agent id id.
func buildAgent(p *Plan, spec CampaignSpec, i int, ws WorkspaceSpec, id string, errs *errList) (AgentPlan, bool) {
	field := func(f string) string { return fmt.Sprintf("workspaces[%d].%s", i, f) }
	a := AgentPlan{
		Index:   i,
		AgentID: id,
		Name:    "agentpen-" + p.Key + "-" + id,
		Alias:   "agentpen-ws-" + id,
		Spec:    ws,
		taskID:  ws.TaskID,
	}
	if p.Topology == TopologyPerAgent {
		a.Network = agentNetworkName(p.Key, id)
	}
	if len(ws.Command) == 0 {
		a.Spec.Command = WorkbenchCommand(p.Server.URL, p.Server.Spec.APIKeyEnv)
		a.NeedsKey = true
	}
	a.Labels = p.labels(spec.Labels, RoleWork, id)
	for k, v := range ws.Labels {
		a.Labels[k] = v
	}
	a.Labels[LabelNetwork] = a.Network
	if a.Network == "" {
		a.Labels[LabelNetwork] = "none"
	}
	a.Labels[LabelTopology] = string(p.Topology)
	a.Env = map[string]string{
		"AGENTPEN_AGENT_ID":       id,
		"AGENTPEN_SERVER_URL":     p.Server.URL,
		"AGENTPEN_GRADER_URL":     p.Server.URL,
		"AGENTPEN_GRADER_KEY_ENV": p.Server.Spec.APIKeyEnv,
	}
	if p.Topology == TopologyPerAgent {
		a.Env["NO_PROXY"] = NoProxy(p.Server.Alias, p.Server.Port)
		a.Env["no_proxy"] = a.Env["NO_PROXY"]
	}
	for k, v := range ws.ExtraEnv {
		a.Env[k] = v
	}
	// Nothing the agent can see may spell the task id.
	visible := []string{a.Name, a.Alias, a.Network, ws.WorkspaceHostPath, ws.Integrity.GitRoot}
	visible = append(visible, slices.Collect(maps.Keys(ws.Integrity.Bases))...) // named in every attestation report
	visible = append(visible, ws.Integrity.ForbiddenPaths...)
	visible = append(visible, a.Spec.Command...)
	for k, v := range a.Labels {
		visible = append(visible, k, v)
	}
	for k, v := range a.Env {
		visible = append(visible, k, v)
	}
	for _, v := range visible {
		if ws.TaskID != "" && exposesTask(v, ws.TaskID) {
			errs.add(invalid(field("task_id"), "", "would be visible to the agent in %q; workspaces use the opaque agent id only", truncate(v, 60)))
			return AgentPlan{}, false
		}
	}
	return a, true
}

// WorkbenchCommand is a workspace's default command: the episode server on
// its unix socket, bound to the workspace's task by WorkbenchTaskFile
// (which the adapter writes before the start; the command line names only
// its path), appending each ended episode's record to
// WorkbenchResultsFile, grading through the campaign's grader (at graderURL:
// http://alias:port, or unix:///path) with the key in the variable keyEnv
// (set in the workspace's environment at create time, never visible to
// episode code, which runs with a cleared environment).
func WorkbenchCommand(graderURL, keyEnv string) []string {
	return []string{"serve", "--listen", "unix://" + WorkbenchSocket, "--task-file", WorkbenchTaskFile,
		"--results-file", WorkbenchResultsFile, "--grader", graderURL, "--grader-key-env", keyEnv}
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

// GraderCommand is the default server's command: the workbench grader
// listening at listen (":PORT", or "unix://PATH"), its API key in the
// variable keyEnv. On a unix socket its cap per peer is its cap in all
// (GraderUnixPeerConns).
func GraderCommand(listen, keyEnv string) []string {
	cmd := []string{"grader", "--listen", listen, "--key-env", keyEnv}
	if strings.HasPrefix(listen, "unix://") {
		cmd = append(cmd, "--max-conns-per-peer", strconv.Itoa(GraderUnixPeerConns))
	}
	return cmd
}

// GraderUnixPeerConns is the grader's cap per peer on its unix socket:
// the grader's own default cap in all. Every client there is container
// root of a workspace (its episode server; agent code cannot reach the
// socket, and a sandbox uid is closed at accept), and a rootless daemon
// maps every container's root to one uid, so a cap per uid would count
// every workspace of the campaign as one peer.
const GraderUnixPeerConns = 1024
