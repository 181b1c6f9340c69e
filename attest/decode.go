package attest

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/agentpen/agentpen/apikey"
)

// The decoders below read the fields the checks need out of the daemon's
// own JSON, with their own small structs (no Docker SDK types), so the
// fixtures of the tests are raw daemon JSON. A field the daemon omitted
// decodes as absent and the check that needs it fails.

// container is what the checks know of a container inspect. Environment
// values never get here: decodeContainer keeps the names, and for the API
// key variable only its apikey.Status.
type container struct {
	ID       string
	Name     string
	Argv     []string // Path, then Args: what the daemon ran
	Image    string   // the image id the container runs
	Status   string
	Running  bool
	Paused   bool
	Restart  bool
	Pid      int
	HasState bool

	NetworkMode     string
	PortBindings    map[string][]binding
	PublishAll      bool
	CapAdd, CapDrop []string
	Privileged      bool
	Devices         int
	ReadOnlyRoot    bool
	SecurityOpt     []string
	MaskedPaths     []string
	ReadonlyPaths   []string
	Tmpfs           map[string]string
	Init            bool
	DNS             dnsConfig
	Namespaces      map[string]string // pid, ipc, uts, userns, cgroupns modes
	Memory          int64
	PidsLimit       int64
	HasHostConfig   bool

	Mounts   []mountInfo
	EnvNames []string
	Key      apikey.Status // the variable named by the key env, judged then dropped
	Labels   map[string]string
	Cmd      []string
	WorkDir  string
	HasConf  bool

	Ports    map[string][]binding // NetworkSettings.Ports: what is published now
	Networks map[string]endpoint
}

type binding struct {
	HostIP   string `json:"HostIp"`
	HostPort string `json:"HostPort"`
}

type dnsConfig struct {
	Servers    []string `json:"servers"`
	Search     []string `json:"search"`
	Options    []string `json:"options"`
	ExtraHosts []string `json:"extra_hosts"`
}

type mountInfo struct {
	Type        string `json:"type"`
	Source      string `json:"source"`
	Destination string `json:"destination"`
	RW          bool   `json:"rw"`
}

type endpoint struct {
	NetworkID string
	Aliases   []string
	IPAddress string
}

// decodeContainer decodes a container inspect. keyEnv names the API key
// variable: its value is judged by policy and dropped; every other value
// is dropped unread.
func decodeContainer(raw []byte, keyEnv string, policy apikey.Policy) (container, error) {
	var in struct {
		ID    string   `json:"Id"`
		Name  string   `json:"Name"`
		Path  string   `json:"Path"`
		Args  []string `json:"Args"`
		Image string   `json:"Image"`
		State *struct {
			Status     string
			Running    bool
			Paused     bool
			Restarting bool
			Pid        int
		}
		HostConfig *struct {
			NetworkMode       string
			PortBindings      map[string][]binding
			PublishAllPorts   bool
			CapAdd, CapDrop   []string
			Privileged        bool
			Devices           []json.RawMessage
			DeviceCgroupRules []string
			ReadonlyRootfs    bool
			SecurityOpt       []string
			MaskedPaths       []string
			ReadonlyPaths     []string
			Tmpfs             map[string]string
			Init              *bool
			DNS               []string `json:"Dns"`
			DNSOptions        []string `json:"DnsOptions"`
			DNSSearch         []string `json:"DnsSearch"`
			ExtraHosts        []string
			PidMode           string
			IpcMode           string
			UTSMode           string
			UsernsMode        string
			CgroupnsMode      string
			Memory            int64
			PidsLimit         *int64
		}
		Mounts []struct {
			Type, Source, Destination string
			RW                        bool
		}
		Config *struct {
			Env        []string
			Cmd        []string
			Image      string
			Labels     map[string]string
			WorkingDir string
		}
		NetworkSettings *struct {
			Ports    map[string][]binding
			Networks map[string]*struct {
				NetworkID string
				Aliases   []string
				IPAddress string
			}
		}
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return container{}, fmt.Errorf("container inspect: %w", err)
	}
	c := container{ID: in.ID, Name: in.Name, Image: in.Image}
	if in.Path != "" {
		c.Argv = append([]string{in.Path}, in.Args...)
	}
	if s := in.State; s != nil {
		c.HasState = true
		c.Status, c.Running, c.Paused, c.Restart, c.Pid = s.Status, s.Running, s.Paused, s.Restarting, s.Pid
	}
	if h := in.HostConfig; h != nil {
		c.HasHostConfig = true
		c.NetworkMode, c.PortBindings, c.PublishAll = h.NetworkMode, h.PortBindings, h.PublishAllPorts
		c.CapAdd, c.CapDrop, c.Privileged = h.CapAdd, h.CapDrop, h.Privileged
		c.Devices = len(h.Devices) + len(h.DeviceCgroupRules)
		c.ReadOnlyRoot, c.SecurityOpt, c.Tmpfs = h.ReadonlyRootfs, h.SecurityOpt, h.Tmpfs
		c.MaskedPaths, c.ReadonlyPaths = h.MaskedPaths, h.ReadonlyPaths
		c.Init = h.Init != nil && *h.Init
		c.DNS = dnsConfig{Servers: h.DNS, Search: h.DNSSearch, Options: h.DNSOptions, ExtraHosts: h.ExtraHosts}
		c.Namespaces = map[string]string{"pid": h.PidMode, "ipc": h.IpcMode, "uts": h.UTSMode, "userns": h.UsernsMode, "cgroupns": h.CgroupnsMode}
		c.Memory = h.Memory
		if h.PidsLimit != nil {
			c.PidsLimit = *h.PidsLimit
		}
	}
	for _, m := range in.Mounts {
		c.Mounts = append(c.Mounts, mountInfo{Type: m.Type, Source: m.Source, Destination: m.Destination, RW: m.RW})
	}
	if cf := in.Config; cf != nil {
		c.HasConf = true
		c.Labels, c.Cmd, c.WorkDir = cf.Labels, cf.Cmd, cf.WorkingDir
		for _, kv := range cf.Env {
			name, value, _ := strings.Cut(kv, "=")
			c.EnvNames = append(c.EnvNames, name)
			if keyEnv != "" && name == keyEnv {
				c.Key = policy.Check(value)
			}
		}
		sort.Strings(c.EnvNames)
	}
	if ns := in.NetworkSettings; ns != nil {
		c.Ports = ns.Ports
		c.Networks = map[string]endpoint{}
		for name, ep := range ns.Networks {
			if ep != nil {
				c.Networks[name] = endpoint{NetworkID: ep.NetworkID, Aliases: ep.Aliases, IPAddress: ep.IPAddress}
			} else {
				c.Networks[name] = endpoint{}
			}
		}
	}
	return c, nil
}

// network is what the checks know of a network inspect.
type network struct {
	ID       string
	Name     string
	Driver   string
	Internal bool
	IPv6     bool
	Labels   map[string]string
	Members  map[string]string // container id -> name
	Gateways []string
}

func decodeNetwork(raw []byte) (network, error) {
	var in struct {
		ID         string `json:"Id"`
		Name       string
		Driver     string
		Internal   bool
		EnableIPv6 bool
		Labels     map[string]string
		Containers map[string]struct{ Name string }
		IPAM       struct {
			Config []struct{ Gateway string }
		}
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return network{}, fmt.Errorf("network inspect: %w", err)
	}
	n := network{ID: in.ID, Name: in.Name, Driver: in.Driver, Internal: in.Internal, IPv6: in.EnableIPv6, Labels: in.Labels, Members: map[string]string{}}
	for id, c := range in.Containers {
		n.Members[id] = c.Name
	}
	for _, c := range in.IPAM.Config {
		if c.Gateway != "" {
			n.Gateways = append(n.Gateways, c.Gateway)
		}
	}
	return n, nil
}

// info is what the checks know of /info.
type info struct {
	ID            string
	Name          string
	ServerVersion string
	RootDir       string
	SecurityOpts  []string
	CgroupDriver  string
	CgroupVersion string
	MemoryLimit   bool
	PidsLimit     bool
}

// rootless reports whether a security option is exactly name=rootless.
func (i info) rootless() bool {
	for _, opt := range i.SecurityOpts {
		for _, kv := range strings.Split(opt, ",") {
			if kv == "name=rootless" {
				return true
			}
		}
	}
	return false
}

func decodeInfo(raw []byte) (info, error) {
	var in struct {
		ID              string
		Name            string
		ServerVersion   string
		DockerRootDir   string
		SecurityOptions []string
		CgroupDriver    string
		CgroupVersion   string
		MemoryLimit     bool
		PidsLimit       bool
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return info{}, fmt.Errorf("info: %w", err)
	}
	return info{ID: in.ID, Name: in.Name, ServerVersion: in.ServerVersion, RootDir: in.DockerRootDir, SecurityOpts: in.SecurityOptions,
		CgroupDriver: in.CgroupDriver, CgroupVersion: in.CgroupVersion, MemoryLimit: in.MemoryLimit, PidsLimit: in.PidsLimit}, nil
}

// image is what the checks know of an image inspect.
type image struct {
	ID          string
	RepoDigests []string
	Entrypoint  []string
	WorkDir     string
}

func decodeImage(raw []byte) (image, error) {
	var in struct {
		ID          string `json:"Id"`
		RepoDigests []string
		Config      *struct {
			Entrypoint []string
			WorkingDir string
		}
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return image{}, fmt.Errorf("image inspect: %w", err)
	}
	im := image{ID: in.ID, RepoDigests: in.RepoDigests}
	if in.Config != nil {
		im.Entrypoint, im.WorkDir = in.Config.Entrypoint, in.Config.WorkingDir
	}
	return im, nil
}

// listed is one entry of a container or network list.
type listed struct {
	ID     string
	Name   string
	Labels map[string]string
}

// decodeList decodes GET /containers/json or GET /networks.
func decodeList(raw []byte) ([]listed, error) {
	var in []struct {
		ID     string `json:"Id"`
		Name   string
		Names  []string
		Labels map[string]string
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	out := make([]listed, 0, len(in))
	for _, e := range in {
		name := e.Name
		if name == "" && len(e.Names) > 0 {
			name = e.Names[0]
		}
		out = append(out, listed{ID: e.ID, Name: strings.TrimPrefix(name, "/"), Labels: e.Labels})
	}
	return out, nil
}

// probeOutput is what `workbench probe --batch` printed.
type probeOutput struct {
	ContainerID string        `json:"container_id"`
	Results     []probeResult `json:"results"`
}

type probeResult struct {
	ID        string          `json:"id"`
	Kind      string          `json:"kind"`
	Outcome   string          `json:"outcome"`
	Status    int             `json:"status"`
	Error     string          `json:"error"`
	LatencyMS float64         `json:"latency_ms"`
	Body      json.RawMessage `json:"body"`
	Sockets   []probeSocket   `json:"sockets"`
	Process   *probeProcess   `json:"process"`
	// Interfaces, UIDBase and UIDCount are an interfaces and a uid_block
	// probe's findings.
	Interfaces []string `json:"interfaces"`
	UIDBase    int      `json:"uid_base"`
	UIDCount   int      `json:"uid_count"`
	// File is what a file probe found as root.
	File *probeFile `json:"file"`
	// Isolation is an episode probe's finding.
	Isolation *EpisodeIsolation `json:"isolation"`
}

type probeFile struct {
	Regular bool   `json:"regular"`
	Mode    string `json:"mode"`
	UID     int    `json:"uid"`
}

// EpisodeIsolation is what an episode probe found in a workspace (the
// workbench probe's Isolation): the sandbox mode its workbench reports,
// the namespaces of the server and of code run as one of its episodes,
// that code's network interfaces, and its attempt at a vsock socket.
type EpisodeIsolation struct {
	// Sandbox is the sandbox mode the workbench reports (namespaces or
	// uid-only).
	Sandbox string `json:"sandbox"`
	// ServerPidNS is the episode server's PID namespace (its
	// /proc/self/ns/pid link).
	ServerPidNS string `json:"server_pid_ns"`
	// ServerNetNS is the episode server's network namespace.
	ServerNetNS string `json:"server_net_ns"`
	// EpisodePidNS is the PID namespace of code run as an episode.
	EpisodePidNS string `json:"episode_pid_ns"`
	// EpisodeNetNS is the network namespace of code run as an episode.
	EpisodeNetNS string `json:"episode_net_ns"`
	// Interfaces are the network interfaces that code sees.
	Interfaces []string `json:"interfaces"`
	// VSock is what that code's attempt at a vsock socket got.
	VSock string `json:"vsock"`
}

type probeSocket struct {
	Path        string `json:"path"`
	How         string `json:"how"`
	IsSocket    bool   `json:"is_socket"`
	Connectable bool   `json:"connectable"`
}

type probeProcess struct {
	Pid        int    `json:"pid"`
	Pids       []int  `json:"pids"`
	ArgvDigest string `json:"argv_digest"`
	Argc       int    `json:"argc"`
	Exe        string `json:"exe"`
	Cwd        string `json:"cwd"`
	UID        int    `json:"uid"`
	CapEff     string `json:"cap_eff"`
	CapBnd     string `json:"cap_bnd"`
	NoNewPrivs bool   `json:"no_new_privs"`
	Seccomp    int    `json:"seccomp"`
	Serves     string `json:"serves"`
}

func decodeProbeOutput(stdout string) (probeOutput, error) {
	var out probeOutput
	if err := json.Unmarshal([]byte(strings.TrimSpace(stdout)), &out); err != nil {
		return probeOutput{}, fmt.Errorf("probe output: %w", err)
	}
	return out, nil
}

// counts is the grader's GET /v1/counters reply.
type counts struct {
	Routes map[string]struct {
		Requests   int64 `json:"requests"`
		Authorized int64 `json:"authorized"`
	} `json:"routes"`
}

func decodeCounts(raw []byte) (counts, error) {
	var c counts
	if err := json.Unmarshal(raw, &c); err != nil {
		return counts{}, fmt.Errorf("grader counters: %w", err)
	}
	if c.Routes == nil {
		return counts{}, fmt.Errorf("grader counters: no routes")
	}
	return c, nil
}
