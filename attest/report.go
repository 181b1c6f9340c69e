package attest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/agentpen/agentpen/apikey"
)

// Schema is the report's schema name.
const Schema = "agentpen.attestation.v1"

// FileName is the report's name in the campaign's state directory.
const FileName = "attestation.json"

// Cleanup states of a report (Cleanup.Status). Attestation writes
// CleanupPending; the cleanup path updates it.
const (
	CleanupPending  = "pending"
	CleanupVerified = "verified"
	CleanupFailed   = "failed"
)

// Check is one attested fact: what was observed, what was expected, and
// whether they agree. Reason says why a check failed (empty when it
// passed).
type Check struct {
	Observed any    `json:"observed"`
	Expected any    `json:"expected"`
	Pass     bool   `json:"pass"`
	Reason   string `json:"reason,omitempty"`
}

// Section is a group of checks keyed by their full names
// ("workspaces[3].caps"), which are unique across the report.
type Section struct {
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
	MemoryEnforced bool   `json:"memory_enforced"`
	PidsEnforced   bool   `json:"pids_enforced"`
	CgroupDriver   string `json:"cgroup_driver"`
	CgroupVersion  string `json:"cgroup_version"`
	Note           string `json:"note"`
}

// Key is the API key section: status (never the value) of the key the
// server holds, and of agentpen's own when it was there to compare.
type Key struct {
	Section
	Server   apikey.Status  `json:"server"`
	Agentpen *apikey.Status `json:"agentpen,omitempty"`
}

// Custody is the process evidence of each container.
type Custody struct {
	Section
	Processes []Process `json:"processes"`
}

// Process is the custody record of one container's serving process.
type Process struct {
	Subject       string `json:"subject"`
	ContainerID   string `json:"container_id"`
	HostPid       int    `json:"host_pid"`
	Pid           int    `json:"pid"`
	CommandDigest string `json:"command_digest"`
	Cwd           string `json:"cwd"`
	Serves        string `json:"serves"`
	Exe           string `json:"exe"`
}

// Connectivity is the probe section: every probe with its evidence.
type Connectivity struct {
	Section
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
	Policy       string `json:"policy"`
	Probed       bool   `json:"probed"`
	Target       string `json:"target,omitempty"`
	AttestedFrom string `json:"attested_from"`
}

// ProbeRecord is one probe's evidence.
type ProbeRecord struct {
	ID        string  `json:"id"`
	Check     string  `json:"check"`
	Target    string  `json:"target"`
	Want      string  `json:"want"`
	Outcome   string  `json:"outcome"`
	Status    int     `json:"status,omitempty"`
	Error     string  `json:"error,omitempty"`
	LatencyMS float64 `json:"latency_ms"`
	Pass      bool    `json:"pass"`
	// Isolation is an episode probe's finding, the sandbox mode among it.
	Isolation *EpisodeIsolation `json:"isolation,omitempty"`
}

// Timings are how long the attestation took, in milliseconds.
type Timings struct {
	// DaemonMS is the daemon calls (inspects and lists); ProbesMS the
	// probes (execs and their timeouts); TotalMS both and the rest.
	DaemonMS float64 `json:"daemon_ms"`
	ProbesMS float64 `json:"probes_ms"`
	TotalMS  float64 `json:"total_ms"`
}

// Cleanup is the removal status of the campaign, updated by cleanup.
type Cleanup struct {
	Status string `json:"status"`
}

// Report is the attestation: each section's checks, and ok only when every
// check passed.
type Report struct {
	Schema       string    `json:"schema"`
	CampaignID   string    `json:"campaign_id"`
	OK           bool      `json:"ok"`
	FailedChecks []string  `json:"failed_checks"`
	AttestedAt   time.Time `json:"attested_at"`
	// Error, when set, says why nothing could be checked (the report is
	// then not ok).
	Error        string       `json:"error,omitempty"`
	Daemon       Section      `json:"daemon"`
	Network      Section      `json:"network"`
	Containers   Section      `json:"containers"`
	Socket       Section      `json:"socket"`
	Publish      Section      `json:"publish"`
	Hardening    Section      `json:"hardening"`
	Limits       Limits       `json:"limits"`
	APIKey       Key          `json:"api_key"`
	Custody      Custody      `json:"custody"`
	Connectivity Connectivity `json:"connectivity"`
	// Isolation is what keeps agents apart: the topology, each
	// workspace's uid block, and that no uid is shared on the daemon (the
	// agent -> agent probes are in Connectivity).
	Isolation Section `json:"isolation"`
	Campaign  Section `json:"campaign"`
	Timings   Timings `json:"timings"`
	Cleanup   Cleanup `json:"cleanup"`
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

// finish sets FailedChecks (sorted, unique) and OK. A report with no check
// at all, or with Error set, is never ok.
func (r *Report) finish() {
	failed := []string{}
	n := 0
	for _, s := range r.sections() {
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

// ErrNotReport is returned by SetCleanupStatus for bytes that are not an
// attestation report.
var ErrNotReport = errors.New("not an " + Schema + " report")

// SetCleanupStatus returns the report raw with its cleanup.status set to
// status, every other field kept as it was. The cleanup path calls it and
// writes the result back atomically.
func SetCleanupStatus(raw []byte, status string) ([]byte, error) {
	switch status {
	case CleanupPending, CleanupVerified, CleanupFailed:
	default:
		return nil, fmt.Errorf("cleanup status %q: want pending, verified or failed", status)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, fmt.Errorf("attestation: %w: %w", ErrNotReport, err)
	}
	var schema string
	if json.Unmarshal(fields["schema"], &schema) != nil || schema != Schema {
		return nil, fmt.Errorf("attestation schema %q: %w", schema, ErrNotReport)
	}
	b, _ := json.Marshal(Cleanup{Status: status})
	fields["cleanup"] = b
	out, err := json.MarshalIndent(fields, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
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
