package attest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/workbench/probe/wire"
)

// Probe phases: the server is read before and after the workspaces are
// probed, so the grader's counters bracket the probes.
const (
	PhaseBefore = "before"
	PhaseMain   = "main"
	PhaseAfter  = "after"
)

// Default probe settings.
const (
	// DefaultProbeTimeoutMS bounds each probe.
	DefaultProbeTimeoutMS = 2000
	// DefaultHostLoopback is where a rootless container would reach the
	// host's loopback: slirp4netns maps its gateway 10.0.2.2 to the host's
	// 127.0.0.1 unless started with --disable-host-loopback.
	DefaultHostLoopback = "10.0.2.2"
)

// DefaultProbeCommand is the probe inside every container: the workbench
// binary (root-only in the image, run by docker exec as root).
func DefaultProbeCommand() []string { return []string{campaign.WorkbenchBinary, "probe"} }

// GraderRoute is a protected route of the workbench grader.
type GraderRoute struct {
	Method string `json:"method"`
	Path   string `json:"path"`
}

// GraderProtectedRoutes are the workbench grader's routes that need the
// API key (package grader; a test in the adapter keeps the lists equal).
// Each is probed from every workspace without the key and must answer
// 401; the counters route reads the others' counters.
var GraderProtectedRoutes = []GraderRoute{
	{"POST", "/v1/score"}, {"POST", "/v1/cases"}, {"POST", "/v1/judge"}, {"GET", "/v1/counters"},
}

// graderCountersRoute is the keyed route the counters are read from.
const graderCountersRoute = "/v1/counters"

// ProbeEnv is how the probes were run: the command, the timeout, and
// where the host's loopback and the egress target are.
type ProbeEnv struct {
	// Command is the probe in the containers; empty means
	// DefaultProbeCommand.
	Command []string `json:"command"`
	// TimeoutMS bounds each probe; zero means DefaultProbeTimeoutMS.
	TimeoutMS int `json:"timeout_ms"`
	// HostLoopback are the addresses inside a container that would reach
	// the host's loopback; empty means DefaultHostLoopback.
	HostLoopback []string `json:"host_loopback"`
	// EgressTarget is a host:port reachable only through outbound NAT;
	// empty means egress is attested from the network's Internal flag.
	EgressTarget string `json:"egress_target,omitempty"`
	// Peers are the workspaces' addresses on their own networks, by
	// subject (campaign.TopologyPerAgent; see PeerAddrs): every other
	// workspace probes them.
	Peers map[string]string `json:"peers,omitempty"`
	// ArgvSuffix is, by subject, how many arguments a cluster's pod spec
	// gives its container (see Expectation.ArgvSuffixes): the process
	// probe digests that many of PID 1's last arguments.
	ArgvSuffix map[string]int `json:"argv_suffix,omitempty"`
	// ServerAddr is where a cluster's workspaces reach the grader (its
	// pod's IP and port: see Expectation.ServerAddr); empty elsewhere.
	ServerAddr string `json:"server_addr,omitempty"`
	// GitCache are clean git audits of earlier attestations, by
	// GitCacheKey: a workspace of the same image, root, bases and uid
	// tells its probe their state keys, and a repository still the same
	// is not audited again.
	GitCache GitCache `json:"git_cache,omitempty"`
	// Images are the image ids the runtime reported each container runs,
	// by subject (see ImageIDs): a git audit is cached by the image the
	// workspace runs, never by the reference it was asked for (a tag
	// repointed names another image).
	Images map[string]string `json:"images,omitempty"`
}

// GitCache holds the audits of git_history checks that passed, by cache
// key (ProbeRecord.CacheKey: the image, the git root, the declared
// bases and the agent's uid), each with its repository's state key.
type GitCache map[string][]wire.GitAudit

// maxGitCache bounds a GitCache's keys; Learn forgets others past it.
const maxGitCache = 256

// Learn adds the audits of every git_history probe of r that passed and
// was audited in full or from c, under its cache key.
func (c GitCache) Learn(r *Report) {
	for _, rec := range r.Connectivity.Probes {
		if !rec.Pass || rec.CacheKey == "" || rec.Want != wantGitClean {
			continue
		}
		if _, ok := c[rec.CacheKey]; !ok && len(c) >= maxGitCache {
			for k := range c {
				delete(c, k)
				break
			}
		}
		c[rec.CacheKey] = slices.Clone(rec.Git)
	}
}

// gitCacheKey names what a git audit's result depends on besides the
// repository's files: the image (an id the runtime reported), the root,
// the bases and the uid. Without an image id there is no key: the audit
// is neither looked up nor learnt.
func gitCacheKey(image, root string, bases map[string]string, who string) string {
	if image == "" {
		return ""
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00", image, root, who)
	for _, p := range slices.Sorted(maps.Keys(bases)) {
		fmt.Fprintf(h, "%s=%s\x00", p, bases[p])
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// ImageIDs reads the image id each journalled container runs from the
// runtime's inspects, by subject; a container the runtime did not
// answer for, or with no image id, is missing.
func (x *Expectation) ImageIDs(obs Observation) map[string]string {
	out := map[string]string{}
	for _, c := range x.e.Containers {
		if c.ID == "" {
			continue
		}
		d, ok := obs.Runtime.Containers[c.ID]
		if !ok || d.Problem("container") != "" || d.Image == "" {
			continue
		}
		out[c.Subject] = d.Image
	}
	return out
}

// PeerPort is the port agent -> agent probes connect to. Nothing listens
// there: a reset (refused) proves a path, only silence (a timeout) or no
// route shows there is none.
const PeerPort = "9"

// PeerAddrs reads each workspace's address on its own network from the
// daemon's inspects (campaign.TopologyPerAgent), by subject; a workspace
// without one is missing, and the probes aimed at it fail.
func (x *Expectation) PeerAddrs(obs Observation) map[string]string {
	e := x.e
	out := map[string]string{}
	for _, c := range e.Containers {
		if c.Role != campaign.RoleWork || len(c.Nets) == 0 || c.ID == "" {
			continue
		}
		d, ok := obs.Runtime.Containers[c.ID]
		if !ok || d.Problem("container") != "" {
			continue
		}
		if ep, ok := d.Networks[c.Nets[0]]; ok && ep.IPAddress != "" {
			out[c.Subject] = ep.IPAddress
		}
	}
	return out
}

// Listener is one of agentpen's own listeners on the host: loopback (the
// host's 127.0.0.1), a host address (probed under internal egress), or a
// network canary: a stand-in for a kind of host outside the campaign.
type Listener struct {
	Kind string `json:"kind"` // ListenerLoopback, ListenerHostAddress or ListenerCanary
	Addr string `json:"addr"` // host:port on the host
	// Class is a canary's kind of host (a campaign.EgressClasses one).
	Class string `json:"class,omitempty"`
	// Accepted counts the connections it accepted during the probes.
	Accepted int `json:"accepted"`
}

// Listener kinds.
const (
	ListenerLoopback    = "loopback"
	ListenerHostAddress = "host_address"
	ListenerCanary      = "canary"
)

// MetadataAddr is the cloud metadata service's address a route is looked
// up for: nothing is ever sent to it.
const MetadataAddr = "169.254.169.254:80"

// Exec is one docker exec the adapter runs: Cmd in the container with id
// ContainerID, in Phase. Cmd is the probe command (Command) with the
// batch (Batch, its JSON) as its --batch argument; a runtime that streams
// an exec's stdin runs the execs of one container as one process,
// Command with --batches, each phase's Batch a line of its stdin.
type Exec struct {
	Phase       string
	Subject     string
	ContainerID string
	Cmd         []string
	Command     []string
	Batch       string
}

// ProbeRun is what one Exec returned.
type ProbeRun struct {
	Phase    string `json:"phase"`
	Subject  string `json:"subject"`
	ExitCode int    `json:"exit_code"`
	Stdout   string `json:"stdout"`
	// Err says why the exec itself failed (no exit code).
	Err string `json:"error,omitempty"`
}

// What a probe must find.
const (
	wantConnected   = "connected"
	wantUnreachable = "unreachable" // timeout, refused, no route or no name: never connected
	wantNoSocket    = "no_docker_socket"
	wantSocket      = "docker_socket_at_target"
	wantProcess     = "serving_process"
	wantCounters    = "counters"
	// wantDenied: the kernel refused the uid (a socket it cannot reach).
	wantDenied = "denied"
	// wantNoPath: the packets went nowhere (timeout or no route); a
	// refusal would be an answer from the peer, so a path.
	wantNoPath = "no_path"
	// wantLoopbackOnly: the container has no network interface but lo.
	wantLoopbackOnly = "loopback_only"
	// wantUIDBlock: the episode server runs with its journalled uid block.
	wantUIDBlock = "uid_block"
	// wantPolicyDrop: a cluster's pod is denied the grader pod's address
	// on a port no policy allows (dropped: the policies are enforced; an
	// answer: they are not). Not a check: it says what the report's
	// network_policies claims.
	wantPolicyDrop = "policy_drop"
	// wantEpisodeUID: code run as an episode runs as a uid of the
	// journalled block (a cluster's: its exec cannot read the server's
	// process).
	wantEpisodeUID = "episode_uid"
	// wantBindFile: the bind file is there, container root's, mode 0400,
	// and the uid cannot open it.
	wantBindFile = "bind_file_private"
	// wantNoBindFile: a pooled workspace not claimed yet has no bind file
	// (root's lstat finds nothing): it is bound to no task.
	wantNoBindFile = "no_bind_file"
	// wantIsolated: code run as an episode is in PID and network
	// namespaces other than its server's, has only a loopback interface,
	// and cannot open a vsock socket.
	wantIsolated = "isolated_episode"
	// wantUnreadable: the uid could not open the file (denied), or
	// there is none.
	wantUnreadable = "unreadable"
	// wantGitClean: every repository under the root was audited and none
	// holds anything its base does not reach.
	wantGitClean = "git_clean"
	// wantMetadataRoute: the kernel has no route to the metadata
	// address, or one leaving as the route to its stand-in does (the
	// same source address) while the stand-in was refused.
	wantMetadataRoute = "no_route_or_as_the_stand_ins"
	// wantRouteRef: the route to a stand-in, wantMetadataRoute's
	// reference; not judged by itself.
	wantRouteRef = "route_reference"
)

// episodeProbeTimeoutMS bounds an episode probe: it starts an episode and
// runs Python in it.
const episodeProbeTimeoutMS = 20000

// probe is one planned probe: the request, the check it feeds and what
// it must find. negative probes are evidence only next to a passing
// positive control in the same exec.
type probe struct {
	phase, subject string
	req            wire.Request
	check          string
	target         string
	want           string
	status         int // for want "status"
	negative       bool
	control        bool
	route          string // a protected route probed without the key
	uid            int    // the uid block's base a uid_block probe must find
	cacheKey       string // a git probe's GitCacheKey
	canary         string // a network canary's class
}

// note is a check a rule judged without a probe: it passes, or fails
// saying why.
type note struct {
	check, why string
	pass       bool
}

// probePlan collects the probes of a campaign.
type probePlan struct {
	e         *expectation
	env       ProbeEnv
	listeners []Listener
	probes    []probe
	notes     []note
	n         map[string]int
}

func (p *probePlan) add(pr probe, name string) {
	key := pr.subject + "/" + name
	pr.req.ID = fmt.Sprintf("%s/%d", key, p.n[key])
	p.n[key]++
	if pr.phase == "" {
		pr.phase = PhaseMain
	}
	if pr.req.Kind == "tcp" || pr.req.Kind == "http" || pr.req.Kind == "unix" {
		pr.req.TimeoutMS = p.timeout()
	}
	if pr.req.Kind == "episode" {
		pr.req.TimeoutMS = max(p.timeout(), episodeProbeTimeoutMS)
	}
	p.probes = append(p.probes, pr)
}

func (p *probePlan) timeout() int {
	if p.env.TimeoutMS > 0 {
		return p.env.TimeoutMS
	}
	return DefaultProbeTimeoutMS
}

// scoped reports whether the attestation is a refill's (Source.Scope).
func (p *probePlan) scoped() bool { return len(p.e.Source.Scope) > 0 }

// inScope reports whether c is probed: the server, and each workspace
// unless the attestation is a refill's and c is not one of its slots.
func (p *probePlan) inScope(c *containerExp) bool {
	return c.Role != campaign.RoleWork || !p.scoped() || (c.Pool && slices.Contains(p.e.Source.Scope, c.Slot))
}

// workspaces are the workspace expectations probed.
func (p *probePlan) workspaces() []*containerExp {
	var out []*containerExp
	for i := range p.e.Containers {
		if p.e.Containers[i].Role == campaign.RoleWork && p.inScope(&p.e.Containers[i]) {
			out = append(out, &p.e.Containers[i])
		}
	}
	return out
}

// probeRule adds the probes of one kind. probeRules is the connectivity
// table: each entry is one line of the policy, and the agent-isolation
// work adds agent -> agent rules (each workspace against every other) the
// same way.
type probeRule struct {
	name string
	add  func(p *probePlan)
}

// dockerRules probe what only a Docker campaign has: the host's loopback
// and addresses from a rootless network, networks between agents. A cluster's campaign is
// not probed by them (cluster.go says what stands instead).
var dockerRules = map[string]bool{"host_loopback": true, "host_addresses": true, "agent_to_agent": true, "network_canaries": true}

var probeRules = []probeRule{
	// Positive control: in the same exec as the negative probes, a
	// connect that must succeed, so a refusal or a timeout elsewhere in
	// that exec is evidence and not a broken exec or network stack.
	{"control", func(p *probePlan) {
		for _, w := range p.workspaces() {
			req, target := wire.Request{Kind: wire.KindTCP, Addr: p.serverAddr()}, p.serverAddr()
			if p.e.GraderUnix != "" {
				req, target = wire.Request{Kind: wire.KindUnix, Addr: p.e.GraderUnix}, "unix:"+p.e.GraderUnix
			}
			p.add(probe{subject: w.Subject, check: w.Subject + ".probe.control", control: true, want: wantConnected,
				target: target, req: req}, "control")
		}
	}},
	// A cluster's policies, enforced or only stored: each workspace's pod
	// (the exec, not agent code) connects to the grader pod on a port
	// nothing listens on and no policy allows, beside its control.
	{"policy_enforcement", func(p *probePlan) {
		if !p.e.Cluster {
			return
		}
		host, _ := splitHostPort(p.serverAddr())
		for _, w := range p.workspaces() {
			addr := joinHostPort(host, PeerPort)
			p.add(probe{subject: w.Subject, check: "network_policies", want: wantPolicyDrop, target: "the grader pod at " + addr,
				req: wire.Request{Kind: wire.KindTCP, Addr: addr}}, "policy_enforcement")
		}
	}},
	// Workspace -> grader /health: reachable.
	{"grader_health", func(p *probePlan) {
		for _, w := range p.workspaces() {
			u := p.serverURL() + "/health"
			p.add(probe{subject: w.Subject, check: w.Subject + ".probe.grader_health", want: "status", status: 200, target: p.targetURL(u),
				req: wire.Request{Kind: wire.KindHTTP, URL: u, Expect: []int{200}, Unix: p.e.GraderUnix}}, "grader_health")
		}
	}},
	// Workspace -> every protected grader route without the key: 401, and
	// (checked with the counters) no handler reached.
	{"grader_protected", func(p *probePlan) {
		if !p.e.GraderRoutes {
			return
		}
		for _, w := range p.workspaces() {
			for _, r := range GraderProtectedRoutes {
				u := p.serverURL() + r.Path
				p.add(probe{subject: w.Subject, check: w.Subject + ".probe.grader_protected", want: "status", status: 401,
					target: r.Method + " " + p.targetURL(u), route: r.Path, req: wire.Request{Kind: wire.KindHTTP, URL: u, Method: r.Method, Expect: []int{401}, Unix: p.e.GraderUnix}}, "grader_protected")
			}
		}
	}},
	// Workspace -> the host's loopback (agentpen's own listener there):
	// unreachable.
	{"host_loopback", func(p *probePlan) {
		for _, l := range p.listeners {
			if l.Kind != ListenerLoopback {
				continue
			}
			_, port := splitHostPort(l.Addr)
			for _, w := range p.workspaces() {
				for _, h := range p.hostLoopback() {
					addr := joinHostPort(h, port)
					p.add(probe{subject: w.Subject, check: w.Subject + ".probe.host_loopback", want: wantUnreachable, negative: true,
						target: addr + " (host " + l.Addr + ")", req: wire.Request{Kind: wire.KindTCP, Addr: addr}}, "host_loopback")
				}
			}
		}
	}},
	// Under internal egress, workspace -> every other host address
	// (agentpen listens on each): unreachable.
	{"host_addresses", func(p *probePlan) {
		if !p.e.Internal {
			return
		}
		for _, l := range p.listeners {
			if l.Kind != ListenerHostAddress {
				continue
			}
			for _, w := range p.workspaces() {
				p.add(probe{subject: w.Subject, check: w.Subject + ".probe.host_addresses", want: wantUnreachable, negative: true,
					target: l.Addr, req: wire.Request{Kind: wire.KindTCP, Addr: l.Addr}}, "host_addresses")
			}
		}
	}},
	// A launcher's own command -> a stand-in for each kind of host the
	// spec does not allow (integrity.allowed_egress): unreachable; and no
	// route to the cloud metadata address. Where the workbench serves,
	// agent code has no interface but lo (probe.episode_isolation).
	{"network_canaries", func(p *probePlan) {
		canaries := map[string]string{}
		for _, l := range p.listeners {
			if l.Kind == ListenerCanary {
				canaries[l.Class] = l.Addr
			}
		}
		for _, w := range p.workspaces() {
			if w.Serves != "" {
				continue
			}
			check := w.Subject + ".probe.network_canaries"
			denied := slices.DeleteFunc(slices.Clone(campaign.EgressClasses), w.Integrity.Allows)
			switch {
			case len(denied) == 0:
				p.notes = append(p.notes, note{check: check, pass: true}) // every kind allowed: the report's spec says so
				continue
			case p.e.Topology == campaign.TopologyNone:
				// No network: an interface but lo would be a way out.
				p.add(probe{subject: w.Subject, check: check, want: wantLoopbackOnly, target: "network interfaces (no network: no host outside is reachable)",
					req: wire.Request{Kind: wire.KindInterfaces}}, "network_canaries")
				continue
			case !p.e.Internal:
				// The route out reaches every host; the stand-ins below
				// only add evidence.
				for _, class := range denied {
					p.notes = append(p.notes, note{check: check, why: class + ": egress nat routes the workspace to every host (allow it in integrity.allowed_egress, or use egress internal)"})
				}
			}
			for _, class := range denied {
				addr, ok := canaries[class]
				if !ok {
					p.notes = append(p.notes, note{check: check, why: "no stand-in " + class + " could be opened on a host address: not probed"})
					continue
				}
				req := wire.Request{Kind: wire.KindTCP, Addr: addr}
				who := agentUID(w, &req)
				p.add(probe{subject: w.Subject, check: check, want: wantUnreachable, negative: true, canary: class,
					target: fmt.Sprintf("the %s stand-in at %s as %s", class, addr, who), req: req}, "network_canaries")
				if class == campaign.EgressMetadata {
					// The address itself is never sent to: the way to it
					// is compared with the way to its stand-in (the
					// kernel's source address for each).
					p.add(probe{subject: w.Subject, check: check, want: wantMetadataRoute, canary: class,
						target: "the route to the metadata address " + MetadataAddr, req: wire.Request{Kind: wire.KindRoute, Addr: MetadataAddr}}, "network_canaries")
					p.add(probe{subject: w.Subject, check: check, want: wantRouteRef, canary: class,
						target: "the route to the metadata stand-in at " + addr, req: wire.Request{Kind: wire.KindRoute, Addr: addr}}, "network_canaries")
				}
			}
		}
	}},
	// Workspace -> the egress target: reachable only under nat.
	{"egress", func(p *probePlan) {
		if p.env.EgressTarget == "" {
			return
		}
		want, neg := wantUnreachable, true
		if !p.e.Internal {
			want, neg = wantConnected, false
		}
		for _, w := range p.workspaces() {
			p.add(probe{subject: w.Subject, check: w.Subject + ".probe.egress", want: want, negative: neg,
				target: p.env.EgressTarget, req: wire.Request{Kind: wire.KindTCP, Addr: p.env.EgressTarget}}, "egress")
		}
	}},
	// No Docker socket visible in a workspace; in the server only when
	// asked for, at its target.
	{"docker_socket", func(p *probePlan) {
		for _, w := range p.workspaces() {
			p.add(probe{subject: w.Subject, check: w.Subject + ".probe.docker_socket", want: wantNoSocket, target: "known socket paths, mounts, DOCKER_HOST",
				req: wire.Request{Kind: wire.KindSocket}}, "docker_socket")
		}
		s := p.e.Server
		want := wantNoSocket
		if s.DockerSocket {
			want = wantSocket
		}
		p.add(probe{phase: PhaseBefore, subject: s.Subject, check: s.Subject + ".probe.docker_socket", want: want, target: "known socket paths, mounts, DOCKER_HOST",
			req: wire.Request{Kind: wire.KindSocket}}, "docker_socket")
	}},
	// Custody: the process serving each container's socket or port.
	{"process", func(p *probePlan) {
		for i := range p.e.Containers {
			c := &p.e.Containers[i]
			if !p.inScope(c) {
				continue
			}
			phase := PhaseMain
			if c.Role == campaign.RoleServer {
				phase = PhaseBefore
			}
			if p.e.Cluster {
				// No privileged exec to find the process holding the
				// socket: the container's main process, PID 1 of its
				// PID namespace, with the pod spec's arguments.
				p.add(probe{phase: phase, subject: c.Subject, check: c.Subject + ".process", want: wantProcess, target: "main (PID 1 of the container)",
					req: wire.Request{Kind: wire.KindProcess, ArgvSuffix: p.env.ArgvSuffix[c.Subject]}}, "process")
				continue
			}
			p.add(probe{phase: phase, subject: c.Subject, check: c.Subject + ".process", want: wantProcess, target: orMain(c.Serves),
				req: wire.Request{Kind: wire.KindProcess, Listen: c.Serves}}, "process")
		}
	}},
	// The grader's counters, read with the key (from the server's own
	// environment) before and after the workspaces' probes.
	{"grader_counters", func(p *probePlan) {
		if !p.e.GraderRoutes || p.scoped() {
			return
		}
		s := p.e.Server
		u := "http://127.0.0.1:" + strconv.Itoa(p.e.ServerPort) + graderCountersRoute
		if p.e.GraderUnix != "" {
			u = p.e.ServerURL + graderCountersRoute
		}
		for _, phase := range []string{PhaseBefore, PhaseAfter} {
			p.add(probe{phase: phase, subject: s.Subject, check: s.Subject + ".grader_counters", want: wantCounters, target: p.targetURL(u),
				req: wire.Request{Kind: wire.KindHTTP, URL: u, Expect: []int{200}, HeaderEnv: map[string]string{"X-API-Key": p.e.KeyEnv}, Body: true, Unix: p.e.GraderUnix}}, "counters_"+phase)
		}
	}},
	// Agent code (a sandbox uid of the workspace's block) cannot reach the
	// grader's socket (campaign.TopologyNone): only the workspace's
	// episode server, as container root, can.
	{"grader_socket_denied", func(p *probePlan) {
		if p.e.GraderUnix == "" {
			return
		}
		for _, w := range p.workspaces() {
			uid := w.UIDBase
			if uid == 0 {
				uid = campaign.UIDBlockFirst // no block journalled: still a sandbox uid
			}
			p.add(probe{subject: w.Subject, check: w.Subject + ".probe.grader_socket_denied", want: wantDenied,
				target: fmt.Sprintf("unix:%s as uid %d", p.e.GraderUnix, uid), req: wire.Request{Kind: wire.KindUnix, Addr: p.e.GraderUnix, As: uid}}, "grader_socket_denied")
		}
	}},
	// Agent -> agent: every workspace against every other, unreachable.
	// With per-agent networks: a connect to each other workspace's address
	// must go nowhere (a refusal would be an answer: a path). Without
	// networks: the workspace has no interface but lo.
	{"agent_to_agent", func(p *probePlan) {
		ws := p.workspaces()
		if p.e.Topology == campaign.TopologyNone {
			for _, w := range ws {
				p.add(probe{subject: w.Subject, check: w.Subject + ".probe.agent_to_agent", want: wantLoopbackOnly,
					target: "network interfaces", req: wire.Request{Kind: wire.KindInterfaces}}, "agent_to_agent")
			}
			return
		}
		for _, w := range ws {
			for _, o := range ws {
				if o == w {
					continue
				}
				addr := p.env.Peers[o.Subject]
				target := o.Subject
				if addr == "" {
					addr = "0.0.0.0" // unknown: the connect stays local and the check fails
					target += " (no address observed)"
				}
				addr = joinHostPort(addr, PeerPort)
				p.add(probe{subject: w.Subject, check: w.Subject + ".probe.agent_to_agent", want: wantNoPath, negative: true,
					target: target + " at " + addr, req: wire.Request{Kind: wire.KindTCP, Addr: addr}}, "agent_to_agent")
			}
		}
	}},
	// The bind file that binds each workspace's episode server to its
	// task (campaign.WorkbenchTaskFile): a regular file of container
	// root's, mode 0400, which a sandbox uid of the workspace's block
	// cannot open. The probe never reads it: the task id stays out of
	// the report.
	{"bind_file", func(p *probePlan) {
		for _, w := range p.workspaces() {
			if w.Serves == "" {
				continue // a launcher's command: no bind file is written
			}
			want := wantBindFile
			if w.Pool && !w.Claimed {
				want = wantNoBindFile
			}
			uid := w.UIDBase
			if uid == 0 {
				uid = campaign.UIDBlockFirst // no block journalled: still a sandbox uid
			}
			p.add(probe{subject: w.Subject, check: w.Subject + ".probe.bind_file", want: want,
				target: fmt.Sprintf("%s as uid %d", campaign.WorkbenchTaskFile, uid), req: wire.Request{Kind: wire.KindFile, Path: campaign.WorkbenchTaskFile, As: uid}}, "bind_file")
		}
	}},
	// Episode code in each workspace, run through its workbench: in
	// namespaces other than the server's, only a loopback interface, no
	// vsock (the uid-only sandbox fails this: it is weaker).
	{"episode_isolation", func(p *probePlan) {
		for _, w := range p.workspaces() {
			if w.Serves == "" || (w.Pool && !w.Claimed) {
				continue // a launcher's command, or a pooled workspace not bound yet: no episode is served
			}
			p.add(probe{subject: w.Subject, check: w.Subject + ".probe.episode_isolation", want: wantIsolated,
				target: "code run as an episode of the workbench serving " + w.Serves, req: wire.Request{Kind: wire.KindEpisode, Listen: w.Serves, SelfNS: p.e.Cluster}}, "episode_isolation")
		}
	}},
	// The repositories of each workspace, audited before its agent's
	// first tool call (the first attestation covering it: the bring-up's,
	// or its refill's), as the agent's uid, for anything past their base
	// (package gitaudit). A later attestation does not audit again: the
	// agent's own commits are not the image's leak.
	{"git_history", func(p *probePlan) {
		for _, w := range p.workspaces() {
			if w.Audited {
				continue
			}
			root := w.Integrity.Root()
			req := wire.Request{Kind: wire.KindGit, Path: root, Bases: w.Integrity.Bases}
			who := agentUID(w, &req)
			key := gitCacheKey(p.env.Images[w.Subject], root, req.Bases, who)
			for _, a := range p.env.GitCache[key] {
				if a.StateKey != "" && a.Error == "" && a.LeakCount == 0 {
					if req.GitKnown == nil {
						req.GitKnown = map[string]string{}
					}
					req.GitKnown[a.Path] = a.StateKey
				}
			}
			p.add(probe{subject: w.Subject, check: w.Subject + ".probe.git_history", want: wantGitClean, cacheKey: key,
				target: fmt.Sprintf("git repositories under %s as %s", root, who), req: req}, "git_history")
		}
	}},
	// The files the spec forbids the agent (an answer key, a solution in
	// the image): its uid cannot open them, or they are not there. Probed
	// in every attestation: a file the agent could open later is as bad.
	{"forbidden_paths", func(p *probePlan) {
		for _, w := range p.workspaces() {
			paths := w.Integrity.ForbiddenPaths
			if w.Serves != "" { // the workbench's own, first
				paths = append(slices.Clone(campaign.WorkbenchForbiddenPaths), paths...)
			}
			for _, path := range paths {
				req := wire.Request{Kind: wire.KindFile, Path: path}
				who := agentUID(w, &req)
				p.add(probe{subject: w.Subject, check: w.Subject + ".probe.forbidden_paths", want: wantUnreadable,
					target: fmt.Sprintf("%s as %s", path, who), req: req}, "forbidden_paths")
			}
		}
	}},
	// The uid block each workspace's episode server runs episodes under.
	{"uid_block", func(p *probePlan) {
		for _, w := range p.workspaces() {
			if w.Serves == "" {
				continue // a launcher's command: no workbench to ask
			}
			if p.e.Cluster {
				// No privileged exec to read the server's process: the
				// block its container's environment gives and the range
				// it recorded, read in the container itself; and, once
				// it serves episodes, the uid an episode runs as.
				p.add(probe{subject: w.Subject, check: w.Subject + ".probe.uid_block", want: wantUIDBlock, uid: w.UIDBase,
					target: "the block the container gives and the range its server recorded", req: wire.Request{Kind: wire.KindUIDBlock, Listen: w.Serves, SelfNS: true}}, "uid_block")
				if !w.Pool || w.Claimed {
					p.add(probe{subject: w.Subject, check: w.Subject + ".probe.uid_block", want: wantEpisodeUID, uid: w.UIDBase,
						target: "code run as an episode of the workbench serving " + w.Serves, req: wire.Request{Kind: wire.KindEpisode, Listen: w.Serves, SelfNS: true}}, "uid_block")
				}
				continue
			}
			p.add(probe{subject: w.Subject, check: w.Subject + ".probe.uid_block", want: wantUIDBlock, uid: w.UIDBase,
				target: fmt.Sprintf("the process serving %s", w.Serves), req: wire.Request{Kind: wire.KindUIDBlock, Listen: w.Serves}}, "uid_block")
		}
	}},
}

// agentUID sets req to run as the workspace's agent: the first uid of its
// episode block where the workbench serves, the uid of its main process
// (the image's user) for a launcher's own command. It says which, for
// the report.
func agentUID(w *containerExp, req *wire.Request) string {
	if w.Serves == "" {
		req.AsMain = true
		return "the main process's uid"
	}
	if req.As = w.UIDBase; req.As == 0 {
		req.As = campaign.UIDBlockFirst // no block journalled: still a sandbox uid
	}
	return fmt.Sprintf("uid %d", req.As)
}

// targetURL names a URL in a report, with the socket it goes over.
func (p *probePlan) targetURL(u string) string {
	if p.e.GraderUnix != "" && strings.HasPrefix(u, p.e.ServerURL) {
		return u + " (over unix:" + p.e.GraderUnix + ")"
	}
	return u
}

func orMain(serves string) string {
	if serves == "" {
		return "main"
	}
	return serves
}

// serverURL is how a workspace reaches the grader: the plan's, or on a
// cluster its pod's address.
func (p *probePlan) serverURL() string {
	if p.e.Cluster {
		return "http://" + p.serverAddr()
	}
	return p.e.ServerURL
}

func (p *probePlan) serverAddr() string {
	if p.e.Cluster {
		if p.env.ServerAddr == "" {
			return "0.0.0.0:" + strconv.Itoa(p.e.ServerPort) // unobserved: the control fails
		}
		return p.env.ServerAddr
	}
	return joinHostPort(p.e.ServerAlias, strconv.Itoa(p.e.ServerPort))
}

func (p *probePlan) hostLoopback() []string {
	if len(p.env.HostLoopback) > 0 {
		return p.env.HostLoopback
	}
	return []string{DefaultHostLoopback}
}

func (p *probePlan) command() []string {
	if len(p.env.Command) > 0 {
		return p.env.Command
	}
	return DefaultProbeCommand()
}

func planProbes(e *expectation, env ProbeEnv, listeners []Listener) *probePlan {
	p := &probePlan{e: e, env: env, listeners: listeners, n: map[string]int{}}
	for _, r := range probeRules {
		if !e.Cluster || !dockerRules[r.name] {
			r.add(p)
		}
	}
	return p
}

// execs groups the probes into one exec per phase and container, in
// phase order, server first.
func (p *probePlan) execs() []Exec {
	var out []Exec
	for _, phase := range []string{PhaseBefore, PhaseMain, PhaseAfter} {
		for _, c := range p.e.Containers {
			var reqs []wire.Request
			for _, pr := range p.probes {
				if pr.phase == phase && pr.subject == c.Subject {
					reqs = append(reqs, pr.req)
				}
			}
			if len(reqs) == 0 {
				continue
			}
			b, _ := json.Marshal(wire.Batch{Probes: reqs})
			cmd := append(append([]string(nil), p.command()...), "--batch", string(b))
			out = append(out, Exec{Phase: phase, Subject: c.Subject, ContainerID: c.ID, Cmd: cmd, Command: slices.Clone(p.command()), Batch: string(b)})
		}
	}
	return out
}

// PlanExecs is the probe plan of a campaign: the execs the adapter runs,
// phase by phase (every exec of a phase may run at once). listeners are
// agentpen's host listeners (their ports are probe targets). A container
// without a journalled id is still in the plan with an empty ContainerID:
// its exec cannot run and its probe checks fail.
func (x *Expectation) PlanExecs(env ProbeEnv, listeners []Listener) []Exec {
	return planProbes(x.e, env, listeners).execs()
}

// argvDigest is the digest workbench probe reports for a process's argv:
// "sha256:" and the hex SHA-256 of the arguments joined by NUL.
func argvDigest(argv []string) string {
	sum := sha256.Sum256([]byte(strings.Join(argv, "\x00")))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// splitHostPort splits "host:port" or "[v6]:port" (package net is not
// imported here: this package stays pure).
func splitHostPort(addr string) (host, port string) {
	i := strings.LastIndex(addr, ":")
	if i < 0 {
		return addr, ""
	}
	return strings.Trim(addr[:i], "[]"), addr[i+1:]
}

func joinHostPort(host, port string) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + port
	}
	return host + ":" + port
}
