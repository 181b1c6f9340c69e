package attest

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strings"

	"github.com/agentpen/agentpen/workbench/probe/wire"
)

// Fingerprint is the runtime a campaign ran on, as its attestation
// observed it: the driver and the runtime (per campaign), and what each
// container ran (per subject). Two campaigns' records are compared by it
// (agentpen diff). Each fact is read from the evidence the checks judged,
// never asked for again.
type Fingerprint struct {
	// Driver is the driver the campaign was brought up by (RuntimeDocker,
	// RuntimeKubernetes), as its record of bring-up names it.
	Driver string `json:"driver"`
	// Runtime is the runtime's identity and versions.
	Runtime RuntimeFingerprint `json:"runtime"`
	// Containers are the server and each workspace the journal names, in
	// the plan's order.
	Containers []ContainerFingerprint `json:"containers"`
}

// RuntimeFingerprint is the runtime as it answered this attestation (its
// /info): which one, its version and the kernel its containers run on.
type RuntimeFingerprint struct {
	// Endpoint is where the driver reached it.
	Endpoint string `json:"endpoint"`
	// ID is the runtime's own identity (Docker's daemon id).
	ID string `json:"id"`
	// Name is the runtime's name (Docker's host name).
	Name string `json:"name"`
	// Version is the runtime's (daemon's, API server's) version.
	Version string `json:"version"`
	// KernelVersion is the kernel its containers run on ("" where the
	// runtime does not say).
	KernelVersion string `json:"kernel_version"`
	// Rootless says the daemon lists name=rootless.
	Rootless bool `json:"rootless"`
	// CgroupDriver is what its limits are enforced with (Report.Limits
	// says whether they are).
	CgroupDriver string `json:"cgroup_driver"`
	// CgroupVersion is the cgroup version ("1", "2").
	CgroupVersion string `json:"cgroup_version"`
}

// ContainerFingerprint is what one container ran.
type ContainerFingerprint struct {
	// Subject is "server" or "workspaces[N]".
	Subject string `json:"subject"`
	// ContainerID is the container's journalled id.
	ContainerID string `json:"container_id"`
	// Requested is the image as the spec names it (a tag, an id, a
	// repository digest; the tags, space-separated, when the spec names
	// several that were pinned to the same image).
	Requested string `json:"requested"`
	// Reference is the image the plan pins Requested to (a tag by the
	// image id its bring-up resolved it to).
	Reference string `json:"reference"`
	// ImageID is the image id the runtime reported the container runs
	// ("" when it did not answer).
	ImageID string `json:"image_id"`
	// RepoDigests are the pinned image's repository digests.
	RepoDigests []string `json:"repo_digests"`
	// ConfigDigest is the digest of the image's configuration where the
	// runtime gives one (evidence.Image).
	ConfigDigest string `json:"config_digest,omitempty"`
	// Workbench is the probe binary that ran in the container (the
	// workbench of its image): its version and digest; absent when no
	// probe output named one.
	Workbench *wire.Binary `json:"workbench,omitempty"`
	// Seccomp is the container's seccomp profile: "sha256:..." of the
	// profile it was created with, "unconfined", or "runtime default"
	// when it names none.
	Seccomp string `json:"seccomp"`
	// Limits are the limits requested against those the runtime holds
	// and enforces.
	Limits LimitFingerprints `json:"limits"`
}

// LimitFingerprints are a container's memory and pids limits.
type LimitFingerprints struct {
	// Memory is the memory limit, in bytes.
	Memory LimitFingerprint `json:"memory"`
	// Pids is the limit on the container's processes.
	Pids LimitFingerprint `json:"pids"`
}

// LimitFingerprint is one limit, requested against enforced.
type LimitFingerprint struct {
	// Requested is what agentpen asked the runtime for (0: none).
	Requested int64 `json:"requested"`
	// Recorded is what the runtime holds for the container.
	Recorded int64 `json:"recorded"`
	// Enforced says the runtime enforces it (Report.Limits): a limit a
	// daemon without cgroups records is only requested.
	Enforced bool `json:"enforced"`
}

// fingerprint reads the report's fingerprint from the evidence: the
// daemon's answer, each container's inspect (decoded), the images pinned
// and the probes' outputs.
func fingerprint(r *Report, e *expectation, obs Observation, decoded map[string]*container) Fingerprint {
	d := obs.Runtime.Daemon
	f := Fingerprint{Driver: cmp.Or(e.Source.Bringup.Driver, RuntimeDocker), Containers: []ContainerFingerprint{},
		Runtime: RuntimeFingerprint{Endpoint: obs.Runtime.Endpoint, ID: d.ID, Name: d.Name, Version: d.ServerVersion, KernelVersion: d.KernelVersion,
			Rootless: d.Rootless(), CgroupDriver: d.CgroupDriver, CgroupVersion: d.CgroupVersion}}
	requested := map[string][]string{} // pinned reference -> the tags the spec names for it
	for _, tag := range slices.Sorted(maps.Keys(e.Plan.Images)) {
		id := e.Plan.Images[tag]
		requested[id] = append(requested[id], tag)
	}
	binaries := probeBinaries(obs)
	for _, c := range e.Containers {
		if c.ID == "" {
			continue
		}
		cf := ContainerFingerprint{Subject: c.Subject, ContainerID: c.ID, Requested: c.Image, Reference: c.Image, RepoDigests: []string{},
			Seccomp: "runtime default", Workbench: binaries[c.ID]}
		if tags, ok := requested[c.Image]; ok {
			cf.Requested = strings.Join(tags, " ")
		}
		if im, ok := obs.Runtime.Images[c.Image]; ok && im.Problem("image") == "" {
			cf.RepoDigests = append(cf.RepoDigests, im.RepoDigests...)
			slices.Sort(cf.RepoDigests)
			cf.ConfigDigest = im.ConfigDigest
		}
		cf.Limits.Memory.Requested, cf.Limits.Pids.Requested = c.Settings.Memory, c.Settings.PidsLimit
		if dc := decoded[c.Subject]; dc != nil {
			cf.ImageID = dc.Image
			cf.Seccomp = seccompOf(dc.SecurityOpt)
			cf.Limits.Memory.Recorded, cf.Limits.Pids.Recorded = dc.Memory, dc.PidsLimit
			cf.Limits.Memory.Enforced = r.Limits.MemoryEnforced && dc.Memory > 0
			cf.Limits.Pids.Enforced = r.Limits.PidsEnforced && dc.PidsLimit > 0
		}
		f.Containers = append(f.Containers, cf)
	}
	return f
}

// probeBinaries are the probe binaries the probe outputs name, by the
// container each output says it ran in (the first output of each).
func probeBinaries(obs Observation) map[string]*wire.Binary {
	out := map[string]*wire.Binary{}
	for _, run := range obs.Runs {
		if run.Err != "" || run.ExitCode != 0 {
			continue
		}
		res, err := decodeProbeOutput(run.Stdout)
		if err != nil || res.Binary == nil || res.ContainerID == "" {
			continue
		}
		if _, ok := out[res.ContainerID]; !ok {
			out[res.ContainerID] = res.Binary
		}
	}
	return out
}

// seccompOf names a container's seccomp profile from its security
// options: the digest of an inline profile (seccomp=<json>), a profile
// named by the runtime ("unconfined"; a pod's "RuntimeDefault",
// "Localhost/<profile>"), or "runtime default" when none is named.
func seccompOf(opts []string) string {
	for _, o := range opts {
		v, ok := strings.CutPrefix(o, "seccomp=")
		if !ok {
			v, ok = strings.CutPrefix(o, "seccomp:")
		}
		if !ok {
			continue
		}
		if !strings.HasPrefix(strings.TrimSpace(v), "{") {
			return v // a name, not a profile
		}
		sum := sha256.Sum256([]byte(v))
		return "sha256:" + hex.EncodeToString(sum[:])
	}
	return "runtime default"
}
