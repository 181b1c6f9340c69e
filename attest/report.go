package attest

import (
	"encoding/json"
	"sort"
	"time"

	"github.com/agentpen/agentpen/apikey"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/workbench/probe/wire"
)

// Schema is the report's schema name.
const Schema = "agentpen.attestation.v1"

// Check is one attested fact: what was observed, what was expected, and
// whether they agree. Reason says why a check failed (empty when it
// passed).
type Check struct {
	// Observed is what the daemon or a probe showed (null when nothing
	// was observed).
	Observed any `json:"observed"`
	// Expected is what the spec, the plan and the journal say it must be.
	Expected any `json:"expected"`
	// Pass is true when the observed value is the expected one.
	Pass bool `json:"pass"`
	// Reason says why the check failed (absent when it passed).
	Reason string `json:"reason,omitempty"`
}

// Section is a group of checks keyed by their full names
// ("workspaces[3].caps"), which are unique across the report.
type Section struct {
	// Checks are the section's checks by their full names
	// (agentpen checks lists them all, with what each proves).
	Checks map[string]Check `json:"checks"`
}

func (s *Section) add(name string, observed, expected any, pass bool, reason string) {
	if s.Checks == nil {
		s.Checks = map[string]Check{}
	}
	if _, dup := s.Checks[name]; dup {
		panic("attest: check " + name + " added twice")
	}
	switch {
	case pass:
		reason = "" // a reason says why a check failed
	case reason == "":
		reason = "the observed value is not the expected one"
	}
	s.Checks[name] = Check{Observed: observed, Expected: expected, Pass: pass, Reason: reason}
}

// Limits says what the daemon does with the limits requested.
type Limits struct {
	Section
	// MemoryEnforced and PidsEnforced are the daemon's answer (rootless on
	// cgroup v1 enforces neither); Note says why, in words.
	MemoryEnforced bool `json:"memory_enforced"`
	// PidsEnforced says whether the daemon enforces the pids limit.
	PidsEnforced bool `json:"pids_enforced"`
	// CgroupDriver is the daemon's cgroup driver (/info).
	CgroupDriver string `json:"cgroup_driver"`
	// CgroupVersion is the daemon's cgroup version (/info).
	CgroupVersion string `json:"cgroup_version"`
	// Note says in words what is enforced and what only requested.
	Note string `json:"note"`
}

// Key is the API key section: status (never the value) of the key the
// server holds, and of agentpen's own when it was there to compare.
type Key struct {
	Section
	// Server is the status of the key the server holds.
	Server apikey.Status `json:"server"`
	// Agentpen is the status of the key in agentpen's environment, when
	// it was there to compare.
	Agentpen *apikey.Status `json:"agentpen,omitempty"`
}

// Custody is the process evidence of each container.
type Custody struct {
	Section
	// Processes are the serving process of each container.
	Processes []Process `json:"processes"`
}

// Process is the custody record of one container's serving process.
type Process struct {
	// Subject is the container ("server", "workspaces[0]").
	Subject string `json:"subject"`
	// ContainerID is its journalled id, which the probe's own mounts
	// named.
	ContainerID string `json:"container_id"`
	// HostPid is the container's main process on the host (the daemon's
	// answer).
	HostPid int `json:"host_pid"`
	// Pid is the serving process inside the container.
	Pid int `json:"pid"`
	// CommandDigest is the SHA-256 of its command line.
	CommandDigest string `json:"command_digest"`
	// Cwd is its working directory.
	Cwd string `json:"cwd"`
	// Serves is what it serves ("tcp:PORT", "unix:PATH", or "main").
	Serves string `json:"serves"`
	// Exe is its executable.
	Exe string `json:"exe"`
}

// Connectivity is the probe section: every probe with its evidence.
type Connectivity struct {
	Section
	// Probes are every probe run, with its evidence.
	Probes []ProbeRecord `json:"probes"`
	// Egress says how egress was attested: by a probe of Target, or from
	// the network's Internal flag alone (Probed false).
	Egress Egress `json:"egress"`
	// Listeners are agentpen's own host listeners and what they accepted.
	Listeners []Listener `json:"listeners"`
	// ProtectedRoutes says whether the grader's protected routes were
	// probed, and if not why.
	ProtectedRoutes string `json:"protected_routes"`
}

// Egress says how the egress policy was attested.
type Egress struct {
	// Policy is the spec's egress ("internal" or "nat").
	Policy string `json:"policy"`
	// Probed says whether an egress target was probed.
	Probed bool `json:"probed"`
	// Target is the host:port probed.
	Target string `json:"target,omitempty"`
	// AttestedFrom says in words what egress was attested from.
	AttestedFrom string `json:"attested_from"`
}

// ProbeRecord is one probe's evidence.
type ProbeRecord struct {
	// ID is the probe's id ("workspaces[0]/egress/0").
	ID string `json:"id"`
	// Check is the check it counts towards.
	Check string `json:"check"`
	// Target is what it connected to, or looked at.
	Target string `json:"target"`
	// Want is the outcome it needed.
	Want string `json:"want"`
	// Outcome is what it got (connected, refused, timeout, a reply ...).
	Outcome string `json:"outcome"`
	// Status is an HTTP reply's status.
	Status int `json:"status,omitempty"`
	// Error is the probe's error, in words.
	Error string `json:"error,omitempty"`
	// LatencyMS is how long it took, in milliseconds.
	LatencyMS float64 `json:"latency_ms"`
	// Pass is true when the outcome is the one needed.
	Pass bool `json:"pass"`
	// Isolation is an episode probe's finding, the sandbox mode among it.
	Isolation *EpisodeIsolation `json:"isolation,omitempty"`
	// Git is a git probe's finding: each repository's audit (one the
	// probe found unchanged since an earlier audit is that audit, Cached).
	Git []wire.GitAudit `json:"git,omitempty"`
	// CacheKey is a git probe's cache key (GitCache): what its audits
	// depend on besides the repositories' files.
	CacheKey string `json:"cache_key,omitempty"`
}

// Timings are how long the attestation took, in milliseconds.
type Timings struct {
	// DaemonMS is the daemon calls (inspects and lists); ProbesMS the
	// probes (execs and their timeouts); TotalMS both and the rest.
	DaemonMS float64 `json:"daemon_ms"`
	// ProbesMS is the probes.
	ProbesMS float64 `json:"probes_ms"`
	// TotalMS is the whole attestation.
	TotalMS float64 `json:"total_ms"`
}

// Report is the attestation: each section's checks, and ok only when every
// check passed.
type Report struct {
	// Schema is "agentpen.attestation.v1".
	Schema string `json:"schema"`
	// CampaignID is the campaign attested.
	CampaignID string `json:"campaign_id"`
	// Generation and Instance are the generation attested (the journal's
	// latest) and its instance nonce.
	Generation int `json:"generation"`
	// Instance is the generation's instance nonce.
	Instance string `json:"instance"`
	// Producer is the agentpen build that made the report.
	Producer campaign.Producer `json:"producer"`
	// Scope are the pool slots a refill's attestation probed (absent: the
	// whole campaign was).
	Scope []int `json:"scope,omitempty"`
	// OK is true only when every check passed.
	OK bool `json:"ok"`
	// FailedChecks are the names of the checks that failed, sorted
	// ("attestation" when nothing could be checked).
	FailedChecks []string `json:"failed_checks"`
	// AttestedAt is when the daemon was observed.
	AttestedAt time.Time `json:"attested_at"`
	// Images are the images the campaign's containers run, by the image
	// id the daemon reported for each container (those it answered for).
	Images []ImageUse `json:"images"`
	// Error, when set, says why nothing could be checked (the report is
	// then not ok).
	Error string `json:"error,omitempty"`
	// Daemon: the daemon is the one brought up on, and rootless.
	Daemon Section `json:"daemon"`
	// Network: the campaign's networks (on a cluster, its namespace's
	// network policies) are the planned ones.
	Network Section `json:"network"`
	// NetworkPolicies says, for a campaign on a cluster, whether its
	// network policies are only stored or proven enforced, and by what.
	NetworkPolicies string `json:"network_policies,omitempty"`
	// Containers: each journalled container is there, named, labelled,
	// running the pinned image and command.
	Containers Section `json:"containers"`
	// Socket: the Docker socket is where it may be and nowhere else.
	Socket Section `json:"socket"`
	// Publish: nothing is published but the planned loopback binding.
	Publish Section `json:"publish"`
	// Hardening: capabilities, privileges, security options, mounts,
	// namespaces.
	Hardening Section `json:"hardening"`
	// Limits: the limits recorded, and whether the daemon enforces them.
	Limits Limits `json:"limits"`
	// APIKey: the grader key's status in each container (never its
	// value).
	APIKey Key `json:"api_key"`
	// Custody: the process serving each container.
	Custody Custody `json:"custody"`
	// Connectivity: the probes from inside the containers.
	Connectivity Connectivity `json:"connectivity"`
	// Isolation is what keeps agents apart: the topology, each
	// workspace's uid block, and that no uid is shared on the daemon (the
	// agent -> agent probes are in Connectivity).
	Isolation Section `json:"isolation"`
	// Campaign: nothing on the daemon carries the campaign's label that
	// its journal does not account for.
	Campaign Section `json:"campaign"`
	// Timings are how long the attestation took.
	Timings Timings `json:"timings"`
	// Fingerprint is the runtime the campaign ran on: the driver, the
	// runtime's versions and, per container, its image, workbench,
	// seccomp profile and limits (agentpen diff compares it).
	Fingerprint Fingerprint `json:"fingerprint"`
}

// ImageUse is one image the campaign's containers run.
type ImageUse struct {
	// Reference is the image the plan pins (an image id, or
	// repo@sha256:...).
	Reference string `json:"reference"`
	// ID is the image id the daemon reported for the containers
	// ("sha256:..."): the digest of the image's configuration.
	ID string `json:"id"`
	// Containers are the subjects running it ("server", "workspaces[0]").
	Containers []string `json:"containers"`
}

func (r *Report) sections() []*Section {
	return []*Section{&r.Daemon, &r.Network, &r.Containers, &r.Socket, &r.Publish, &r.Hardening,
		&r.Limits.Section, &r.APIKey.Section, &r.Custody.Section, &r.Connectivity.Section, &r.Isolation, &r.Campaign}
}

// Checks returns every check of the report by name.
func (r *Report) Checks() map[string]Check {
	out := map[string]Check{}
	for _, s := range r.sections() {
		for k, c := range s.Checks {
			out[k] = c
		}
	}
	return out
}

// finish sets FailedChecks (sorted, unique) and OK, and the report's
// empty lists and sections to [] and {} (never null, as its schema says).
// A report with no check at all, or with Error set, is never ok.
func (r *Report) finish() {
	failed := []string{}
	n := 0
	r.Connectivity.Probes = nonNilOf(r.Connectivity.Probes)
	r.Connectivity.Listeners = nonNilOf(r.Connectivity.Listeners)
	r.Custody.Processes = nonNilOf(r.Custody.Processes)
	r.Images = nonNilOf(r.Images)
	r.Fingerprint.Containers = nonNilOf(r.Fingerprint.Containers)
	for _, s := range r.sections() {
		if s.Checks == nil {
			s.Checks = map[string]Check{}
		}
		for k, c := range s.Checks {
			n++
			if !c.Pass {
				failed = append(failed, k)
			}
		}
	}
	if r.Error != "" {
		failed = append(failed, "attestation")
	}
	sort.Strings(failed)
	r.FailedChecks = failed
	r.OK = n > 0 && len(failed) == 0
}

func nonNilOf[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// FailureLines are one line per failed check: the name, the reason, and
// the observed and expected values.
func (r *Report) FailureLines() []string {
	all := r.Checks()
	var out []string
	for _, name := range r.FailedChecks {
		c, ok := all[name]
		if !ok {
			out = append(out, name+": "+r.Error)
			continue
		}
		obs, _ := json.Marshal(c.Observed)
		exp, _ := json.Marshal(c.Expected)
		line := name + ": "
		if c.Reason != "" {
			line += c.Reason + "; "
		}
		out = append(out, line+"observed "+clip(string(obs), 200)+", expected "+clip(string(exp), 200))
	}
	return out
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// Marshal is the report as written to FileName: indented JSON and a
// newline.
func (r *Report) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
