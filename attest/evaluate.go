package attest

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/agentpen/agentpen/campaign"
)

// Raw is one daemon answer as the daemon returned it, or why there is
// none.
type Raw struct {
	// JSON is the daemon's body.
	JSON json.RawMessage `json:"json,omitempty"`
	// NotFound is true when the daemon answered 404.
	NotFound bool `json:"not_found,omitempty"`
	// Err says why there is no answer (a failed call).
	Err string `json:"error,omitempty"`
}

// Observation is everything the adapter saw: the daemon's own JSON for
// /info, the journalled network and containers (by their journalled ids),
// the images they run, the containers and networks carrying the campaign's
// label, and the probes' outputs. A missing entry is missing evidence.
type Observation struct {
	At time.Time `json:"at"`
	// Endpoint is the socket the client talked to.
	Endpoint string `json:"endpoint"`
	Info     Raw    `json:"info"`
	Network  Raw    `json:"network"`
	// Containers are keyed by the journalled id; Images by the image
	// reference the plan pins (an image id, or repo@sha256:...).
	Containers map[string]Raw `json:"containers"`
	Images     map[string]Raw `json:"images"`
	// ContainerList and NetworkList are the daemon's lists filtered by
	// the campaign label.
	ContainerList Raw        `json:"container_list"`
	NetworkList   Raw        `json:"network_list"`
	ProbeEnv      ProbeEnv   `json:"probe_env"`
	Listeners     []Listener `json:"listeners"`
	Runs          []ProbeRun `json:"runs"`
	Timings       Timings    `json:"timings"`
}

// forbiddenNetworks are never joined by a campaign container.
var forbiddenNetworks = map[string]bool{"host": true, "bridge": true, "default": true, "none": true, "docker0": true}

// Evaluate checks obs against what src says the campaign must be and
// returns the report. Missing or malformed evidence fails the checks that
// need it; the report is ok only when every check passed.
func Evaluate(src Source, obs Observation) *Report {
	r := &Report{Schema: Schema, CampaignID: src.Spec.CampaignID, AttestedAt: obs.At, Timings: obs.Timings, Cleanup: Cleanup{Status: CleanupPending}}
	e, err := expect(src)
	if err != nil {
		r.Error = err.Error()
		r.finish()
		return r
	}
	inf, infOK := checkDaemon(r, e, obs)
	checkLimitsSection(r, inf, infOK)
	checkNetwork(r, e, obs)
	live := map[string]bool{}
	for _, c := range e.Containers {
		if c.ID != "" {
			live[c.ID] = true
		}
	}
	decoded := map[string]*container{}
	for i := range e.Containers {
		c := &e.Containers[i]
		if dc := checkContainer(r, e, c, obs); dc != nil {
			decoded[c.Subject] = dc
		}
	}
	checkKeys(r, e, decoded)
	checkUnexpected(r, e, obs, live)
	checkProbes(r, e, obs, decoded)
	r.finish()
	return r
}

func rawProblem(what string, raw Raw, present bool) string {
	switch {
	case !present:
		return what + " was not observed"
	case raw.NotFound:
		return "the daemon reports no such " + what
	case raw.Err != "":
		return what + " could not be read: " + raw.Err
	case len(raw.JSON) == 0:
		return what + " answered nothing"
	}
	return ""
}

func checkDaemon(r *Report, e *expectation, obs Observation) (info, bool) {
	s, rec := &r.Daemon, e.Source.Bringup
	if p := rawProblem("/info", obs.Info, true); p != "" {
		s.add("daemon.info", nil, "the daemon's /info", false, p)
		return info{}, false
	}
	inf, err := decodeInfo(obs.Info.JSON)
	if err != nil {
		s.add("daemon.info", nil, "the daemon's /info", false, err.Error())
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
	s.add("daemon.rootless", inf.SecurityOpts, "name=rootless among the security options", inf.rootless(), "the daemon does not say it is rootless")
	endpointOK := obs.Endpoint != "" && obs.Endpoint == e.Source.Endpoint && obs.Endpoint == rec.Endpoint
	s.add("daemon.endpoint", map[string]string{"connected": obs.Endpoint, "recorded_at_bringup": rec.Endpoint}, e.Source.Endpoint, endpointOK,
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

func checkNetwork(r *Report, e *expectation, obs Observation) {
	s := &r.Network
	if e.NetworkIssue != "" {
		s.add("network.present", nil, e.NetworkName, false, e.NetworkIssue)
		return
	}
	if p := rawProblem("network "+short(e.NetworkID), obs.Network, true); p != "" {
		s.add("network.present", nil, e.NetworkID, false, p)
		return
	}
	n, err := decodeNetwork(obs.Network.JSON)
	if err != nil {
		s.add("network.present", nil, e.NetworkID, false, err.Error())
		return
	}
	s.add("network.present", n.ID, e.NetworkID, true, "")
	s.add("network.id", n.ID, e.NetworkID, n.ID == e.NetworkID, "the daemon answered with another id")
	s.add("network.name", n.Name, e.NetworkName, n.Name == e.NetworkName, "the network has another name than the plan's")
	s.add("network.driver", n.Driver, "bridge", n.Driver == "bridge", "the network's driver is not bridge")
	s.add("network.internal", n.Internal, e.Internal, n.Internal == e.Internal, "Internal does not match egress "+string(e.Egress))
	addLabels(s, "network", n.Labels, e.NetworkLabels)
	live := map[string]bool{}
	for _, c := range e.Containers {
		if c.ID != "" {
			live[c.ID] = true
		}
	}
	var strangers []string
	for id, name := range n.Members {
		if !live[id] {
			strangers = append(strangers, short(id)+" "+name)
		}
	}
	sort.Strings(strangers)
	s.add("network.members", nonNil(strangers), []string{}, len(strangers) == 0, "containers the journal does not account for are on the campaign network")
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
	if e.NetworkID != "" {
		liveNets[e.NetworkID] = true
	}
	for _, l := range []struct {
		name string
		raw  Raw
		ok   map[string]bool
	}{
		{"campaign.unexpected_containers", obs.ContainerList, live},
		{"campaign.unexpected_networks", obs.NetworkList, liveNets},
	} {
		if p := rawProblem("the labelled list", l.raw, true); p != "" {
			s.add(l.name, nil, []string{}, false, p)
			continue
		}
		list, err := decodeList(l.raw.JSON)
		if err != nil {
			s.add(l.name, nil, []string{}, false, err.Error())
			continue
		}
		var extra []string
		for _, x := range list {
			if x.Labels[campaign.LabelCampaign] == e.CampaignID && !l.ok[x.ID] {
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
