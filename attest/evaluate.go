package attest

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/agentpen/agentpen/attest/evidence"
	"github.com/agentpen/agentpen/campaign"
)

// Observation is everything the engine saw: what the runtime said of the
// campaign (its driver's decoded answers: the daemon, the journalled
// networks and containers by their journalled ids, the images they run,
// what carries the campaign's label), agentpen's own listeners, and the
// probes' outputs. A missing entry is missing evidence.
type Observation struct {
	At      time.Time        `json:"at"`
	Runtime evidence.Runtime `json:"runtime"`
	// ProbeEnv is what the probes were told; Listeners agentpen's own
	// listeners on the host and what they accepted; Runs the probe execs'
	// outputs.
	ProbeEnv  ProbeEnv   `json:"probe_env"`
	Listeners []Listener `json:"listeners"`
	Runs      []ProbeRun `json:"runs"`
	Timings   Timings    `json:"timings"`
}

// forbiddenNetworks are never joined by a campaign container.
var forbiddenNetworks = map[string]bool{"host": true, "bridge": true, "default": true, "none": true, "docker0": true}

// Evaluate checks obs against what src says the campaign must be and
// returns the report (Expect, then Expectation.Evaluate). Missing or
// malformed evidence fails the checks that need it; the report is ok
// only when every check passed.
func Evaluate(src Source, obs Observation) *Report {
	x, err := Expect(src)
	if err != nil {
		r := newReport(src, obs)
		r.Error = err.Error()
		r.finish()
		return r
	}
	return x.Evaluate(obs)
}

func newReport(src Source, obs Observation) *Report {
	r := &Report{Schema: Schema, CampaignID: src.Spec.CampaignID, Producer: src.Producer, Scope: src.Scope, AttestedAt: obs.At, Timings: obs.Timings, Images: []ImageUse{}}
	if gens := campaign.Generations(src.Records); len(gens) > 0 {
		g := gens[len(gens)-1]
		r.Generation, r.Instance = g.N, g.Instance
	}
	return r
}

// Evaluate checks obs against the expectation and returns the report.
func (x *Expectation) Evaluate(obs Observation) *Report {
	r, e := newReport(x.e.Source, obs), x.e
	if e.Cluster {
		checkClusterDaemon(r, e, obs)
		r.Limits.Note = clusterLimitsNote
		checkPolicies(r, e, obs)
	} else {
		inf, infOK := checkDaemon(r, e, obs)
		checkLimitsSection(r, inf, infOK)
		checkNetwork(r, e, obs)
	}
	live := map[string]bool{}
	for _, c := range e.Containers {
		if c.ID != "" {
			live[c.ID] = true
		}
	}
	decoded := map[string]*container{}
	ranFirst := map[string]string{} // a cluster's pinned reference -> the image id its first pod runs
	for i := range e.Containers {
		c := &e.Containers[i]
		var dc *container
		if e.Cluster {
			dc = checkPod(r, e, c, obs, ranFirst)
		} else {
			dc = checkContainer(r, e, c, obs)
		}
		if dc != nil {
			decoded[c.Subject] = dc
		}
	}
	r.Images = images(e, decoded)
	checkKeys(r, e, decoded)
	checkUnexpected(r, e, obs, live)
	if e.Cluster {
		checkUnexpectedPolicies(r, e, obs)
	}
	checkUIDBlocks(r, e, obs)
	checkProbes(r, e, obs, decoded)
	if e.Cluster {
		checkClusterCanaries(r, e)
	}
	r.Fingerprint = fingerprint(r, e, obs, decoded)
	r.finish()
	return r
}

// images lists the images the containers run, by the image id the daemon
// reported for each, in the order of the containers.
func images(e *expectation, decoded map[string]*container) []ImageUse {
	out := []ImageUse{}
	at := map[[2]string]int{}
	for _, c := range e.Containers {
		d := decoded[c.Subject]
		if d == nil || d.Image == "" {
			continue
		}
		k := [2]string{c.Image, d.Image}
		i, ok := at[k]
		if !ok {
			i = len(out)
			at[k] = i
			out = append(out, ImageUse{Reference: c.Image, ID: d.Image})
		}
		out[i].Containers = append(out[i].Containers, c.Subject)
	}
	return out
}

// problem says what is wrong with the evidence a about what, or that it
// was not observed at all, "" when nothing is.
func problem(what string, a evidence.Answer, present bool) string {
	if !present {
		return what + " was not observed"
	}
	return a.Problem(what)
}

func checkDaemon(r *Report, e *expectation, obs Observation) (info, bool) {
	s, rec := &r.Daemon, e.Source.Bringup
	inf := obs.Runtime.Daemon
	if p := inf.Problem("/info"); p != "" {
		s.add("daemon.info", nil, "the daemon's /info", false, p)
		return info{}, false
	}
	unrecorded := func(v string) string {
		if v == "" {
			return "bring-up recorded no value to compare with"
		}
		return ""
	}
	s.add("daemon.id", inf.ID, rec.ID, inf.ID != "" && inf.ID == rec.ID, or(unrecorded(rec.ID), "another daemon than the one the campaign was brought up on"))
	s.add("daemon.version", inf.ServerVersion, rec.ServerVersion, inf.ServerVersion != "" && inf.ServerVersion == rec.ServerVersion, or(unrecorded(rec.ServerVersion), "the daemon's version changed since bring-up"))
	s.add("daemon.rootless", inf.SecurityOpts, "name=rootless among the security options", inf.Rootless(), "the daemon does not say it is rootless")
	endpointOK := obs.Runtime.Endpoint != "" && obs.Runtime.Endpoint == e.Source.Endpoint && obs.Runtime.Endpoint == rec.Endpoint
	s.add("daemon.endpoint", map[string]string{"connected": obs.Runtime.Endpoint, "recorded_at_bringup": rec.Endpoint}, e.Source.Endpoint, endpointOK,
		or(unrecorded(rec.Endpoint), "the socket observed is not the selected one, or not the one the campaign was brought up on"))
	rootOK := inf.RootDir != "" && inf.RootDir == rec.RootDir && inf.RootDir != "/var/lib/docker"
	s.add("daemon.root_dir", inf.RootDir, rec.RootDir, rootOK, or(unrecorded(rec.RootDir), "the daemon's root directory is not the recorded one (or is the rootful default)"))
	return inf, true
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func checkLimitsSection(r *Report, inf info, ok bool) {
	l := &r.Limits
	if !ok {
		l.Note = "unknown: the daemon's /info was not read"
		return
	}
	cgroups := inf.CgroupDriver != "" && inf.CgroupDriver != "none"
	l.MemoryEnforced, l.PidsEnforced = cgroups && inf.MemoryLimit, cgroups && inf.PidsLimit
	l.CgroupDriver, l.CgroupVersion = inf.CgroupDriver, inf.CgroupVersion
	switch {
	case !cgroups:
		l.Note = fmt.Sprintf("NOT enforced: the daemon runs without cgroups (cgroup driver %q, cgroup v%s; rootless on cgroup v1 enforces no limit). The limits below are recorded as requested, not enforced; per-uid rlimits in the workbench sandbox are the only limits in force.", inf.CgroupDriver, inf.CgroupVersion)
	case !l.MemoryEnforced || !l.PidsEnforced:
		l.Note = fmt.Sprintf("partly enforced: memory %v, pids %v (the daemon's /info)", l.MemoryEnforced, l.PidsEnforced)
	default:
		l.Note = "enforced by the daemon's cgroups"
	}
}

// checkNetwork checks the campaign's networks: none at all for
// campaign.TopologyNone; each agent's network otherwise.
func checkNetwork(r *Report, e *expectation, obs Observation) {
	s := &r.Network
	if e.Topology == campaign.TopologyNone {
		var journalled []string
		for _, res := range campaign.Resources(e.Source.Records) {
			if res.Kind == campaign.KindNetwork && res.ID != "" && !res.Removed {
				journalled = append(journalled, res.Name)
			}
		}
		s.add("network.topology", map[string]any{"topology": e.Topology, "networks": nonNil(journalled)}, map[string]any{"topology": campaign.TopologyNone, "networks": []string{}},
			len(journalled) == 0, "a campaign without networks journals a network")
		return
	}
	live := map[string]string{} // container id -> subject
	for _, c := range e.Containers {
		if c.ID != "" {
			live[c.ID] = c.Subject
		}
	}
	for _, ne := range e.Networks {
		sub := ne.Subject
		if ne.Issue != "" {
			s.add(sub+".present", nil, ne.Name, false, ne.Issue)
			continue
		}
		n, seen := obs.Runtime.Networks[ne.ID]
		if p := problem("network "+short(ne.ID), n.Answer, seen); p != "" {
			s.add(sub+".present", nil, ne.ID, false, p)
			continue
		}
		s.add(sub+".present", n.ID, ne.ID, true, "")
		s.add(sub+".id", n.ID, ne.ID, n.ID == ne.ID, "the daemon answered with another id")
		s.add(sub+".name", n.Name, ne.Name, n.Name == ne.Name, "the network has another name than the plan's")
		s.add(sub+".driver", n.Driver, "bridge", n.Driver == "bridge", "the network's driver is not bridge")
		s.add(sub+".internal", n.Internal, ne.Internal, n.Internal == ne.Internal, "Internal does not match egress "+string(e.Egress))
		addLabels(s, sub, n.Labels, ne.Labels)
		// Exactly the server and the agent whose network it is: any other
		// member is a path between agents (or a stranger).
		var got []string
		for id, name := range n.Members {
			if sub, ok := live[id]; ok {
				got = append(got, sub)
			} else {
				got = append(got, short(id)+" "+name)
			}
		}
		sort.Strings(got)
		want := []string{e.Server.Subject, ne.Agent}
		sort.Strings(want)
		s.add(sub+".members", nonNil(got), want, slices.Equal(got, want), "the network holds other containers than its agent's workspace and the server")
	}
}

func addLabels(s *Section, subject string, have, intent map[string]string) {
	want := reservedLabels(intent)
	if len(want) == 0 {
		s.add(subject+".labels", reservedLabels(have), "the journal's ownership labels", false, "the journal's intent carries no io.agentpen labels to prove ownership with")
		return
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		got, ok := have[k]
		var obs any
		if ok {
			obs = got
		}
		s.add(subject+".label."+k, obs, want[k], ok && got == want[k], "the ownership label is missing or has another value than the journal's intent")
	}
}

func checkUnexpected(r *Report, e *expectation, obs Observation, live map[string]bool) {
	s := &r.Campaign
	liveNets := map[string]bool{}
	for _, n := range e.Networks {
		if n.ID != "" {
			liveNets[n.ID] = true
		}
	}
	for _, l := range []struct {
		name string
		list evidence.List
		ok   map[string]bool
	}{
		{"campaign.unexpected_containers", obs.Runtime.ContainerList, live},
		{"campaign.unexpected_networks", obs.Runtime.NetworkList, liveNets},
	} {
		if e.Cluster && l.name == "campaign.unexpected_networks" {
			continue // a cluster's campaign has no networks: its policies are checked by UID
		}
		if p := l.list.Problem("the labelled list"); p != "" {
			s.add(l.name, nil, []string{}, false, p)
			continue
		}
		var extra []string
		for _, x := range l.list.Items {
			if (e.Cluster || x.Labels[campaign.LabelCampaign] == e.CampaignID) && !l.ok[x.ID] {
				extra = append(extra, short(x.ID)+" "+x.Name)
			}
		}
		sort.Strings(extra)
		s.add(l.name, nonNil(extra), []string{}, len(extra) == 0, "resources carry this campaign's label that its journal does not account for")
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func short(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// checkUIDBlocks: every workspace has a well-formed uid block, and no two
// containers on the daemon (of this campaign or any other) share a uid:
// all containers of a rootless daemon share one user namespace.
func checkUIDBlocks(r *Report, e *expectation, obs Observation) {
	s := &r.Isolation
	ours := map[string]bool{}
	blocks := map[int][]string{} // base -> holders
	for _, c := range e.Containers {
		if c.Role != campaign.RoleWork {
			continue
		}
		label := c.Labels[campaign.LabelUIDBlock]
		s.add(c.Subject+".uid_block", label, "a block of "+fmt.Sprint(campaign.UIDBlockSize)+" uids from "+fmt.Sprint(campaign.UIDBlockFirst),
			c.UIDBase != 0, "the journal's intent carries no well-formed io.agentpen.uid-block label")
		if c.ID != "" {
			ours[c.ID] = true
		}
		if c.UIDBase != 0 {
			blocks[c.UIDBase] = append(blocks[c.UIDBase], c.Subject)
		}
	}
	if e.Cluster {
		return // each pod has a user namespace of its own (hostUsers false, checked per pod): uids cannot collide between them
	}
	var others []string
	if p := obs.Runtime.UIDBlocks.Problem("the uid-block list"); p != "" {
		s.add("isolation.uid_blocks_disjoint", nil, "no uid shared between containers", false, p)
		return
	}
	list := obs.Runtime.UIDBlocks.Items
	labelled := map[string]string{} // our container ids as the daemon labels them
	for _, x := range list {
		label := x.Labels[campaign.LabelUIDBlock]
		if ours[x.ID] {
			labelled[x.ID] = label
			continue
		}
		base, ok := campaign.ParseUIDBlock(label)
		if !ok {
			continue // not a well-formed block: it names no uid of ours
		}
		if _, clash := blocks[base]; clash {
			others = append(others, short(x.ID)+" "+x.Name+" ("+label+")")
		}
	}
	var shared []string
	for base, holders := range blocks {
		if len(holders) > 1 {
			shared = append(shared, campaign.UIDBlockLabel(base)+": "+strings.Join(holders, ", "))
		}
	}
	for _, c := range e.Containers {
		if c.Role == campaign.RoleWork && c.ID != "" {
			if got, ok := labelled[c.ID]; ok && got != c.Labels[campaign.LabelUIDBlock] {
				shared = append(shared, c.Subject+" runs with block "+got+", not the journalled "+c.Labels[campaign.LabelUIDBlock])
			}
		}
	}
	sort.Strings(shared)
	sort.Strings(others)
	s.add("isolation.uid_blocks_disjoint", map[string][]string{"within_campaign": nonNil(shared), "with_other_containers": nonNil(others)},
		map[string][]string{"within_campaign": {}, "with_other_containers": {}}, len(shared) == 0 && len(others) == 0,
		"two workspaces, or a workspace and another container on the daemon, share uids")
}
