package attest

import (
	"fmt"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/agentpen/agentpen/apikey"
	"github.com/agentpen/agentpen/campaign"
)

// DaemonRecord is the daemon a campaign was brought up on, as bring-up
// recorded it in the campaign's state directory: the attestation proves
// the campaign is still on that daemon.
type DaemonRecord struct {
	// ID, ServerVersion and RootDir are what /info said at bring-up.
	ID            string `json:"id"`
	ServerVersion string `json:"server_version"`
	RootDir       string `json:"docker_root_dir"`
	// Rootless is whether /info listed name=rootless.
	Rootless bool `json:"rootless"`
	// Endpoint is the socket agentpen was pinned to ("unix:///run/...").
	Endpoint string `json:"endpoint"`
}

// RoleSettings are the create settings of one role (campaign.RoleServer,
// campaign.RoleWork) as the adapter asks the daemon for them: the
// hardening, the limits requested and the DNS configuration. Empty slices
// and maps mean none.
type RoleSettings struct {
	CapAdd      []string `json:"cap_add"`
	CapDrop     []string `json:"cap_drop"`
	SecurityOpt []string `json:"security_opt"`
	// MaskedPaths and ReadonlyPaths, when set, are asked for explicitly
	// (the workspaces: episodes keep the container's /proc, so these stay
	// masked); nil leaves them to the daemon and unchecked.
	MaskedPaths   []string          `json:"masked_paths,omitempty"`
	ReadonlyPaths []string          `json:"readonly_paths,omitempty"`
	ReadOnlyRoot  bool              `json:"read_only_root"`
	Tmpfs         map[string]string `json:"tmpfs"`
	Init          bool              `json:"init"`
	// Memory (bytes) and PidsLimit are the limits requested; 0 is none.
	Memory    int64     `json:"memory"`
	PidsLimit int64     `json:"pids_limit"`
	DNS       dnsConfig `json:"dns"`
}

// Source is what an expectation is derived from: the campaign's spec and
// journal, the daemon recorded at bring-up, the endpoint selected now, and
// the adapter's create settings per role.
type Source struct {
	// Spec is the campaign's spec (its generation's spec file); the plan
	// is computed from it again, with AgentKey.
	Spec campaign.CampaignSpec `json:"spec"`
	// AgentKey is the state root's agent-id secret the plan's agent ids
	// were keyed with (nil: unkeyed). It is evidence, never in a report.
	AgentKey []byte `json:"agent_key,omitempty"`
	// Records is the campaign's journal.
	Records []campaign.Record `json:"records"`
	// Bringup is the daemon recorded at bring-up; zero is unknown (every
	// daemon check then fails).
	Bringup DaemonRecord `json:"bringup_daemon"`
	// Endpoint is the daemon socket selected now (DOCKER_HOST resolved),
	// and SocketPath its path: the one socket a server may have mounted.
	Endpoint   string `json:"endpoint"`
	SocketPath string `json:"socket_path"`
	// Roles are the create settings by role.
	Roles map[string]RoleSettings `json:"roles"`
	// AgentpenKey is the API key in agentpen's environment now (its
	// status only); not present means it was not there to compare.
	AgentpenKey apikey.Status `json:"agentpen_key"`
	// KeyPolicy judges the keys the containers hold.
	KeyPolicy apikey.Policy `json:"key_policy"`
	// Producer is the agentpen build attesting, for the report.
	Producer campaign.Producer `json:"producer"`
	// Driver is the name of the runtime driver attesting ("docker"), for
	// the report's fingerprint.
	Driver string `json:"driver,omitempty"`
	// Scope, when set, are the pool slots a refill made: only those
	// workspaces are probed, and the grader's counters are not read
	// (claimed workspaces may be grading). The daemon-side checks cover
	// every container still. Empty: the whole campaign.
	Scope []int `json:"scope,omitempty"`
}

// containerExp is what one container must be.
type containerExp struct {
	Subject      string // "server" or "workspaces[N]"
	Role         string
	AgentID      string
	Name         string
	Alias        string
	ID           string // journalled; empty when none was
	Removed      bool   // the journal records its removal
	Labels       map[string]string
	Image        string
	Cmd          []string
	NeedsKey     bool
	Serves       string // "tcp:PORT", "unix:PATH" or "" (the main process)
	Settings     RoleSettings
	DockerSocket bool   // the daemon socket is mounted (server, when asked)
	Publish      string // "127.0.0.1:18080" or ""
	Port         int    // the server's port inside the network
	Mounts       []mountInfo
	IDProblem    string // why ID is empty or unusable
	// NetworkMode is the mode it must run with: "none", or the name of
	// the (first) network it joins; Nets are the networks it must be on,
	// under Alias.
	NetworkMode string
	Nets        []string
	// UIDBase is the first uid of a workspace's block, from its journalled
	// io.agentpen.uid-block label (0: none, or not well-formed).
	UIDBase int
	// Pool: a pooled workspace (slot Slot); Claimed: the journal binds a
	// task to it. An unclaimed one must have no bind file and serves no
	// episode yet.
	Pool    bool
	Slot    int
	Claimed bool
	// Integrity is what a workspace's integrity audit checks against;
	// Audited says an earlier attestation of this generation covered the
	// workspace (its agent may have worked since: its own commits are not
	// a leak of the image, and the audit is not run again).
	Integrity campaign.IntegritySpec
	Audited   bool
}

// netExp is what one agent network must be (campaign.TopologyPerAgent).
type netExp struct {
	Subject  string // "networks[N]", N the agent's index
	Name     string
	ID       string
	Labels   map[string]string
	Internal bool
	Agent    string // the workspace subject whose network it is
	Issue    string // why ID is empty
}

// expectation is the whole campaign as planned and journalled.
type expectation struct {
	CampaignID string
	Egress     campaign.Egress
	Topology   campaign.Topology
	// Networks are the agent networks, in agent order (none for
	// campaign.TopologyNone).
	Networks    []netExp
	Internal    bool
	Containers  []containerExp
	Server      *containerExp
	ServerAlias string
	ServerPort  int
	// ServerURL is how workspaces reach the grader: http://alias:port, or
	// http://grader over GraderUnix (campaign.TopologyNone).
	ServerURL    string
	GraderUnix   string
	KeyEnv       string
	GraderRoutes bool // the server runs the workbench grader (its routes are known)
	Source       Source
	Plan         *campaign.Plan
}

// Expectation is what a campaign must be, derived once from its Source:
// the probes are planned from it (PlanExecs, PeerAddrs) and the
// observation is judged against it (Evaluate).
type Expectation struct{ e *expectation }

// Expect derives the expectation of src; an error means the spec no
// longer makes a plan (the campaign cannot be attested at all).
func Expect(src Source) (*Expectation, error) {
	e, err := expect(src)
	if err != nil {
		return nil, err
	}
	return &Expectation{e}, nil
}

// Source is what the expectation was derived from.
func (x *Expectation) Source() Source { return x.e.Source }

// Plan is the campaign's plan, as the expectation derived it.
func (x *Expectation) Plan() *campaign.Plan { return x.e.Plan }

// PinnedPlan is the plan of src's spec (keyed by src.AgentKey) with the
// image ids its latest generation's bring-up pinned the spec's tags to
// (campaign.Plan.Pin): the images the containers must run. An error means
// the spec no longer makes a plan, or names a tag the journal records no
// id for.
func PinnedPlan(src Source) (*campaign.Plan, error) {
	p, err := campaign.NewPlanWith(src.Spec, campaign.PlanOptions{AgentKey: src.AgentKey, MaxWorkspaces: campaign.MaxPoolSlots})
	if err != nil {
		return nil, fmt.Errorf("campaign spec: %w", err)
	}
	var images map[string]string
	if gens := campaign.Generations(src.Records); len(gens) > 0 {
		images = gens[len(gens)-1].Images
	}
	if err := p.Pin(images); err != nil {
		return nil, fmt.Errorf("campaign spec: %w", err)
	}
	if err := p.AddPool(campaign.PoolSlots(src.Records)); err != nil {
		return nil, fmt.Errorf("campaign spec: %w", err)
	}
	return p, nil
}

// expect derives the expectation; an error means the spec no longer makes
// a plan (the campaign cannot be attested at all).
func expect(src Source) (*expectation, error) {
	p, err := PinnedPlan(src)
	if err != nil {
		return nil, err
	}
	res := campaign.Resources(src.Records)
	claimed := map[int]bool{}
	for _, s := range campaign.Fold(src.Records).Pool {
		claimed[s.N] = s.Claim != nil
	}
	e := &expectation{
		CampaignID: p.CampaignID, Egress: p.Egress, Topology: p.Topology, Internal: p.Egress == campaign.EgressInternal,
		ServerAlias: p.Server.Alias, ServerPort: p.Server.Port, ServerURL: p.Server.URL,
		KeyEnv: p.Server.Spec.APIKeyEnv, GraderRoutes: p.Server.NeedsKey, Source: src, Plan: p,
	}
	if p.Topology == campaign.TopologyNone {
		e.ServerURL, e.GraderUnix = "http://grader", campaign.GraderSocket
	}
	// The agent networks: exactly one live journalled network of each
	// planned name.
	subjects := map[string]string{} // agent id -> workspace subject
	for _, a := range p.Agents {
		subjects[a.AgentID] = fmt.Sprintf("workspaces[%d]", a.Index)
	}
	for i, n := range p.Networks {
		ne := netExp{Subject: fmt.Sprintf("networks[%d]", i), Name: n.Name, Internal: n.Internal, Agent: subjects[n.Agent]}
		var nets []campaign.Resource
		for _, r := range res {
			if r.Kind == campaign.KindNetwork && r.Name == n.Name {
				nets = append(nets, r)
			}
		}
		switch live := liveOf(nets); {
		case len(nets) == 0:
			ne.Issue = "the journal has no intent for this agent network"
		case len(live) > 1:
			ne.Issue = "the journal has more than one live network of this name"
		case len(live) == 0:
			ne.Issue = "the journal records the network removed, or never created"
		default:
			ne.ID, ne.Labels = live[0].ID, live[0].Labels
		}
		e.Networks = append(e.Networks, ne)
	}
	dirs := map[string]string{} // agent id (or "grader") -> run dir
	for _, r := range res {
		if r.Kind == campaign.KindDir && r.ID != "" && !r.Removed {
			dirs[path.Base(r.ID)] = r.ID
		}
	}
	graderMount := func(ro bool) mountInfo {
		src, ok := dirs["grader"]
		if !ok {
			src = "(no grader directory journalled)"
		}
		return mountInfo{Type: "bind", Source: src, Destination: campaign.GraderDir, RW: !ro}
	}
	var allNets []string
	for _, n := range p.Networks {
		allNets = append(allNets, n.Name)
	}
	find := func(c *containerExp) {
		var all []campaign.Resource
		for _, r := range res {
			if r.Kind == campaign.KindContainer && r.Name == c.Name {
				all = append(all, r)
			}
		}
		live := liveOf(all)
		switch {
		case len(all) == 0:
			c.IDProblem = "the journal has no intent for this container"
		case len(live) > 1:
			c.IDProblem = "the journal has more than one live container of this name"
		case len(live) == 0:
			c.Removed = all[len(all)-1].Removed
			c.IDProblem = "the journal records no live id (removed, or the create never returned one)"
			c.Labels = all[len(all)-1].Labels
		default:
			c.ID, c.Labels = live[0].ID, live[0].Labels
		}
	}
	srvSettings := src.Roles[campaign.RoleServer]
	srv := containerExp{
		Subject: "server", Role: campaign.RoleServer, Name: p.Server.Name, Alias: p.Server.Alias,
		Image: p.Server.Spec.Image, Cmd: p.Server.Spec.Command, NeedsKey: p.Server.NeedsKey,
		Serves: "tcp:" + strconv.Itoa(p.Server.Port), Settings: srvSettings, DockerSocket: p.Server.Spec.MountDockerSocket,
		Port: p.Server.Port, NetworkMode: "none", Nets: allNets,
	}
	if len(allNets) > 0 {
		srv.NetworkMode = allNets[0]
	}
	if p.Topology == campaign.TopologyNone {
		srv.Serves = "unix:" + campaign.GraderSocket
		srv.Mounts = append(srv.Mounts, graderMount(false))
	}
	if p.Server.Publish.IsValid() {
		srv.Publish = p.Server.Publish.String()
	}
	if p.Server.Spec.MountDockerSocket {
		srv.Mounts = append(srv.Mounts, mountInfo{Type: "bind", Source: src.SocketPath, Destination: campaign.DockerSocketTarget, RW: true})
	}
	if p.Server.Spec.DataHostPath != "" {
		srv.Mounts = append(srv.Mounts, mountInfo{Type: "bind", Source: p.Server.Spec.DataHostPath, Destination: p.Server.Spec.DataContainerPath})
	}
	find(&srv)
	e.Containers = append(e.Containers, srv)
	for _, a := range p.Agents {
		c := containerExp{
			Subject: fmt.Sprintf("workspaces[%d]", a.Index), Role: campaign.RoleWork, AgentID: a.AgentID,
			Name: a.Name, Alias: a.Alias, Image: a.Spec.Image, Cmd: a.Spec.Command, NeedsKey: a.NeedsKey,
			Settings: src.Roles[campaign.RoleWork], NetworkMode: "none", Integrity: a.Spec.Integrity,
		}
		if a.Network != "" {
			c.NetworkMode, c.Nets = a.Network, []string{a.Network}
		}
		if a.Pool {
			c.Pool, c.Slot = true, a.Index-len(p.Spec.Workspaces)
			c.Claimed = claimed[c.Slot]
		}
		if p.Topology == campaign.TopologyNone {
			c.Mounts = append(c.Mounts, graderMount(true))
		}
		if a.NeedsKey {
			c.Serves = "unix:" + campaign.WorkbenchSocket
		}
		if dir, ok := dirs[a.AgentID]; ok {
			c.Mounts = append(c.Mounts, mountInfo{Type: "bind", Source: dir, Destination: campaign.WorkbenchRunDir, RW: true})
		} else {
			c.Mounts = append(c.Mounts, mountInfo{Type: "bind", Source: "(no run directory journalled)", Destination: campaign.WorkbenchRunDir, RW: true})
		}
		if a.Spec.WorkspaceHostPath != "" {
			c.Mounts = append(c.Mounts, mountInfo{Type: "bind", Source: a.Spec.WorkspaceHostPath, Destination: campaign.DefaultWorkspaceTarget, RW: true})
		}
		find(&c)
		if base, ok := campaign.ParseUIDBlock(c.Labels[campaign.LabelUIDBlock]); ok {
			c.UIDBase = base
		}
		e.Containers = append(e.Containers, c)
	}
	e.Server = &e.Containers[0]
	for i := range e.Containers {
		sortMounts(e.Containers[i].Mounts)
	}
	markAudited(e, src.Records)
	return e, nil
}

// markAudited marks the workspaces an attestation of the latest
// generation that passed already covered: a whole-campaign attestation every
// workspace whose intent came before it, a refill's the slots it names
// (a container made again after it is not covered).
func markAudited(e *expectation, recs []campaign.Record) {
	gens := campaign.Generations(recs)
	if len(gens) == 0 {
		return
	}
	gen := gens[len(gens)-1].N
	byName := map[string]*containerExp{}
	for i := range e.Containers {
		if e.Containers[i].Role == campaign.RoleWork {
			byName[e.Containers[i].Name] = &e.Containers[i]
		}
	}
	intended := map[string]bool{}
	for _, r := range recs {
		if r.Gen != gen {
			continue
		}
		switch {
		case r.Op == campaign.OpIntent && r.Kind == campaign.KindContainer:
			intended[r.Name] = true
			if c := byName[r.Name]; c != nil {
				c.Audited = false // made (again) after any attestation so far
			}
		case r.Op == campaign.OpAttested && r.Status != campaign.AttestOK:
			// A failed attestation covers nothing: the campaign was
			// never handed out on it, and what it failed on (a leak
			// among others) must be looked at again.
		case r.Op == campaign.OpAttested && len(r.Slots) == 0:
			for name := range intended {
				if c := byName[name]; c != nil {
					c.Audited = true
				}
			}
		case r.Op == campaign.OpAttested:
			for _, c := range byName {
				if c.Pool && intended[c.Name] && slices.Contains(r.Slots, c.Slot) {
					c.Audited = true
				}
			}
		}
	}
}

// liveOf are the resources with an id and no recorded removal.
func liveOf(rs []campaign.Resource) []campaign.Resource {
	var out []campaign.Resource
	for _, r := range rs {
		if r.ID != "" && !r.Removed {
			out = append(out, r)
		}
	}
	return out
}

func sortMounts(ms []mountInfo) {
	sort.Slice(ms, func(i, j int) bool {
		if ms[i].Destination != ms[j].Destination {
			return ms[i].Destination < ms[j].Destination
		}
		return ms[i].Source < ms[j].Source
	})
}

// reservedLabels are the io.agentpen.* labels of m.
func reservedLabels(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if strings.HasPrefix(k, campaign.ReservedLabelPrefix) {
			out[k] = v
		}
	}
	return out
}
