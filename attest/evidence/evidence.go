// Package evidence is what a runtime said of a campaign, as its driver
// decoded it for the attestation: the runtime's identity, each journalled
// container and network by its id, the images the plan pins and the lists
// of what carries a label. Package attest judges it; each driver decodes
// its runtime's own answers into it (adapter/docker/dockerjson for the
// Docker Engine's JSON), so the checks never read a runtime's dialect.
//
// A piece of evidence the runtime did not give is missing evidence: its
// Answer says why (no such resource, a failed call, an answer that could
// not be read), and the checks that needed it fail. Environment values
// never get here: a container carries the names of its variables, and for
// the API key variable only its apikey.Status.
package evidence

import (
	"strings"

	"github.com/agentpen/agentpen/apikey"
)

// Answer is why a piece of evidence is missing; zero when the runtime
// answered and its answer was read.
type Answer struct {
	// NotFound: the runtime answered that there is no such resource.
	NotFound bool `json:"not_found,omitempty"`
	// Err says why the call failed.
	Err string `json:"error,omitempty"`
	// Invalid says why the answer could not be read.
	Invalid string `json:"invalid,omitempty"`
}

// Problem says what is wrong with the evidence about what, "" when
// nothing is.
func (a Answer) Problem(what string) string {
	switch {
	case a.NotFound:
		return "the daemon reports no such " + what
	case a.Err != "":
		return what + " could not be read: " + a.Err
	case a.Invalid != "":
		return what + ": " + a.Invalid
	}
	return ""
}

// Runtime is everything the runtime said of one campaign.
type Runtime struct {
	// Endpoint is where the driver reached the runtime (a socket's URL).
	Endpoint string `json:"endpoint"`
	Daemon   Daemon `json:"daemon"`
	// Networks and Containers are keyed by the journalled id; Images by
	// the image reference the plan pins.
	Networks   map[string]Network   `json:"networks"`
	Containers map[string]Container `json:"containers"`
	Images     map[string]Image     `json:"images"`
	// ContainerList and NetworkList are what carries the campaign's
	// label; UIDBlocks every container carrying a uid-block label,
	// whatever its campaign.
	ContainerList List `json:"container_list"`
	NetworkList   List `json:"network_list"`
	UIDBlocks     List `json:"uid_blocks"`
	// Policies are the network policies of the campaign's namespace on a
	// cluster, every one of them, the campaign's or not (a cluster's
	// policies are unioned: a foreign one can open what the campaign's
	// deny closed).
	Policies Policies `json:"policies,omitzero"`
}

// Policies are the network policies a cluster holds where the campaign's
// pods are.
type Policies struct {
	Answer
	Items []Policy `json:"items"`
}

// Policy is one network policy in the attestation's terms: whom it
// selects and what it allows.
type Policy struct {
	ID     string            `json:"id"`
	Name   string            `json:"name"` // "<namespace>/<name>"
	Labels map[string]string `json:"labels"`
	// Selects are the labels a pod must carry to be selected; empty
	// selects every pod of the namespace. A selector the driver cannot
	// render as labels (expressions) is SelectsOther.
	Selects      map[string]string `json:"selects"`
	SelectsOther bool              `json:"selects_other,omitempty"`
	// Ingress and Egress: the policy isolates that direction of the pods
	// it selects.
	Ingress bool `json:"ingress"`
	Egress  bool `json:"egress"`
	// Allows are what it allows, each rendered "<direction> <peer>
	// <port>": "egress pods{io.agentpen.role=server} tcp/8080",
	// "egress cidr{0.0.0.0/0} any".
	Allows []string `json:"allows"`
}

// Daemon is the runtime's identity and what it enforces.
type Daemon struct {
	Answer
	ID            string   `json:"id"`
	Name          string   `json:"name"`
	ServerVersion string   `json:"server_version"`
	RootDir       string   `json:"root_dir"`
	SecurityOpts  []string `json:"security_opts"`
	CgroupDriver  string   `json:"cgroup_driver"`
	CgroupVersion string   `json:"cgroup_version"`
	MemoryLimit   bool     `json:"memory_limit"`
	PidsLimit     bool     `json:"pids_limit"`

	// KernelVersion is the kernel the runtime's containers run on (its
	// /info); empty where the runtime does not say.
	KernelVersion string `json:"kernel_version,omitempty"`
}

// Rootless reports whether a security option is exactly name=rootless.
func (d Daemon) Rootless() bool {
	for _, opt := range d.SecurityOpts {
		for _, kv := range strings.Split(opt, ",") {
			if kv == "name=rootless" {
				return true
			}
		}
	}
	return false
}

// Container is what the checks know of one container.
type Container struct {
	Answer
	ID       string   `json:"id"`
	Name     string   `json:"name"`
	Argv     []string `json:"argv"`  // what the runtime ran: the entrypoint, then its arguments
	Image    string   `json:"image"` // the image id the container runs
	Status   string   `json:"status"`
	Running  bool     `json:"running"`
	Paused   bool     `json:"paused"`
	Restart  bool     `json:"restarting"`
	Pid      int      `json:"pid"`
	HasState bool     `json:"has_state"`

	NetworkMode   string               `json:"network_mode"`
	PortBindings  map[string][]Binding `json:"port_bindings"`
	PublishAll    bool                 `json:"publish_all"`
	CapAdd        []string             `json:"cap_add"`
	CapDrop       []string             `json:"cap_drop"`
	Privileged    bool                 `json:"privileged"`
	Devices       int                  `json:"devices"`
	ReadOnlyRoot  bool                 `json:"read_only_root"`
	SecurityOpt   []string             `json:"security_opt"`
	MaskedPaths   []string             `json:"masked_paths"`
	ReadonlyPaths []string             `json:"readonly_paths"`
	Tmpfs         map[string]string    `json:"tmpfs"`
	Init          bool                 `json:"init"`
	DNS           DNS                  `json:"dns"`
	Namespaces    map[string]string    `json:"namespaces"` // pid, ipc, uts, userns, cgroupns modes
	Memory        int64                `json:"memory"`
	PidsLimit     int64                `json:"pids_limit"`
	HasHostConfig bool                 `json:"has_host_config"`

	Mounts   []Mount           `json:"mounts"`
	EnvNames []string          `json:"env_names"`
	Key      apikey.Status     `json:"key"` // the variable named by the key env, judged then dropped
	Labels   map[string]string `json:"labels"`
	Cmd      []string          `json:"cmd"`
	WorkDir  string            `json:"work_dir"`
	HasConf  bool              `json:"has_config"`

	Ports    map[string][]Binding `json:"ports"` // what is published now
	Networks map[string]Endpoint  `json:"networks"`

	// Pod is what a cluster says of the container's pod (nil on Docker).
	Pod *Pod `json:"pod,omitempty"`
}

// Pod is what the checks know of a cluster's pod beyond its container:
// its spec's isolation from the node and the API.
type Pod struct {
	Namespace string `json:"namespace"`
	// IP is the pod's address (status.podIP), how its peers reach it.
	IP string `json:"ip"`
	// SpecImage is the image the pod's spec names (Container.Image is
	// the id its status reports running).
	SpecImage string `json:"spec_image"`
	// HostUsers: the pod runs in the node's user namespace (spec.hostUsers
	// unset or true); HostNetwork, HostPID, HostIPC: it shares the node's.
	HostUsers   bool `json:"host_users"`
	HostNetwork bool `json:"host_network"`
	HostPID     bool `json:"host_pid"`
	HostIPC     bool `json:"host_ipc"`
	// ServiceAccount is its service account; Token that a token of it is
	// mounted (automount not off, or a projected token volume).
	ServiceAccount string `json:"service_account"`
	Token          bool   `json:"token"`
	// Volumes are its volumes by kind: "emptyDir", "hostPath:/x", ...
	Volumes []string `json:"volumes"`
	// Seccomp is the container's seccomp profile: "RuntimeDefault",
	// "Localhost/<profile>", "Unconfined" or "" (none set).
	Seccomp string `json:"seccomp"`
	// KeyRef is where the API key variable's value comes from:
	// "secret:<namespace>/<name>", "value" (written into the spec), "other"
	// or "" (no such variable).
	KeyRef string `json:"key_ref"`
	// Node is the node it runs on.
	Node string `json:"node"`
}

// Binding is one published port: a host address and port.
type Binding struct {
	HostIP   string `json:"HostIp"`
	HostPort string `json:"HostPort"`
}

// DNS is a container's resolver configuration.
type DNS struct {
	Servers    []string `json:"servers"`
	Search     []string `json:"search"`
	Options    []string `json:"options"`
	ExtraHosts []string `json:"extra_hosts"`
}

// Mount is one of a container's mounts.
type Mount struct {
	Type        string `json:"type"`
	Source      string `json:"source"`
	Destination string `json:"destination"`
	RW          bool   `json:"rw"`
}

// Endpoint is a container's place on one network.
type Endpoint struct {
	NetworkID string   `json:"network_id"`
	Aliases   []string `json:"aliases"`
	IPAddress string   `json:"ip_address"`
}

// Network is what the checks know of one network.
type Network struct {
	Answer
	ID       string            `json:"id"`
	Name     string            `json:"name"`
	Driver   string            `json:"driver"`
	Internal bool              `json:"internal"`
	IPv6     bool              `json:"ipv6"`
	Labels   map[string]string `json:"labels"`
	Members  map[string]string `json:"members"` // container id -> name
	Gateways []string          `json:"gateways"`
}

// Image is what the checks know of one image.
type Image struct {
	Answer
	ID          string   `json:"id"`
	RepoDigests []string `json:"repo_digests"`
	Entrypoint  []string `json:"entrypoint"`
	WorkDir     string   `json:"work_dir"`

	// ConfigDigest is the digest of the image's configuration where the
	// runtime gives it (Docker's classic image store: the image id is
	// that digest); empty where it does not.
	ConfigDigest string `json:"config_digest,omitempty"`
}

// List is a list of resources the runtime gave.
type List struct {
	Answer
	Items []Listed `json:"items"`
}

// Listed is one entry of a list.
type Listed struct {
	ID     string            `json:"id"`
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
}
