package campaign

// Daemon is the identity of a validated rootless Docker daemon, as its
// /info reported it. The adapter reads it when it connects; the
// attestation proves a campaign was built on it.
type Daemon struct {
	ID            string   `json:"id"`
	Name          string   `json:"name"`
	ServerVersion string   `json:"server_version"`
	APIVersion    string   `json:"api_version"`
	Rootless      bool     `json:"rootless"`
	DockerRootDir string   `json:"docker_root_dir"`
	CgroupDriver  string   `json:"cgroup_driver"`
	CgroupVersion string   `json:"cgroup_version"`
	SecurityOpts  []string `json:"security_options"`
	// MemoryLimitEnforced and PidsLimitEnforced say whether a container's
	// --memory and --pids-limit would be enforced. Rootless on cgroup v1
	// (CgroupDriver "none") records both and enforces neither.
	MemoryLimitEnforced bool     `json:"memory_limit_enforced"`
	PidsLimitEnforced   bool     `json:"pids_limit_enforced"`
	Warnings            []string `json:"warnings,omitempty"`
}
