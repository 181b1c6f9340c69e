// Package dockerjson decodes the Docker Engine's own JSON (GET /info, a
// container's, a network's and an image's inspect, the container and
// network lists) into the attestation's evidence (package
// attest/evidence), with small structs of its own: no Docker SDK type, so
// the attestation's fixtures are the daemon's JSON as captured, and the
// decoding is tested against them.
//
// Environment values are dropped as they are decoded: only the names
// stay, and for the API key variable only its apikey.Status.
package dockerjson

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/agentpen/agentpen/apikey"
	"github.com/agentpen/agentpen/attest/evidence"
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

// answer is r's evidence.Answer before its body is read.
func (r Raw) answer() (evidence.Answer, bool) {
	switch {
	case r.NotFound:
		return evidence.Answer{NotFound: true}, false
	case r.Err != "":
		return evidence.Answer{Err: r.Err}, false
	case len(r.JSON) == 0:
		return evidence.Answer{Invalid: "the daemon answered nothing"}, false
	}
	return evidence.Answer{}, true
}

// Capture is everything the daemon answered about one campaign, as it
// answered: /info, the journalled networks and containers (by their
// journalled ids), the images the plan pins (by the pinned reference), the
// containers and networks carrying the campaign's label, and every
// container carrying a uid-block label.
type Capture struct {
	// Endpoint is the socket the client talked to.
	Endpoint      string         `json:"endpoint"`
	Info          Raw            `json:"info"`
	Networks      map[string]Raw `json:"networks"`
	Containers    map[string]Raw `json:"containers"`
	Images        map[string]Raw `json:"images"`
	ContainerList Raw            `json:"container_list"`
	NetworkList   Raw            `json:"network_list"`
	UIDBlocks     Raw            `json:"uid_blocks"`
}

// Decode decodes a capture. keyEnv names the API key variable: its value
// in each container is judged by policy and dropped; every other value is
// dropped unread.
func (c Capture) Decode(keyEnv string, policy apikey.Policy) evidence.Runtime {
	out := evidence.Runtime{
		Endpoint:      c.Endpoint,
		Daemon:        Info(c.Info),
		Networks:      map[string]evidence.Network{},
		Containers:    map[string]evidence.Container{},
		Images:        map[string]evidence.Image{},
		ContainerList: List(c.ContainerList),
		NetworkList:   List(c.NetworkList),
		UIDBlocks:     List(c.UIDBlocks),
	}
	for id, r := range c.Networks {
		out.Networks[id] = Network(r)
	}
	for id, r := range c.Containers {
		out.Containers[id] = Container(r, keyEnv, policy)
	}
	for ref, r := range c.Images {
		out.Images[ref] = Image(r)
	}
	return out
}

type binding = evidence.Binding

// Container decodes a container inspect (see Capture.Decode for keyEnv).
func Container(r Raw, keyEnv string, policy apikey.Policy) evidence.Container {
	a, ok := r.answer()
	if !ok {
		return evidence.Container{Answer: a}
	}
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
	if err := json.Unmarshal(r.JSON, &in); err != nil {
		return evidence.Container{Answer: evidence.Answer{Invalid: fmt.Sprintf("container inspect: %v", err)}}
	}
	c := evidence.Container{ID: in.ID, Name: in.Name, Image: in.Image}
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
		c.DNS = evidence.DNS{Servers: h.DNS, Search: h.DNSSearch, Options: h.DNSOptions, ExtraHosts: h.ExtraHosts}
		c.Namespaces = map[string]string{"pid": h.PidMode, "ipc": h.IpcMode, "uts": h.UTSMode, "userns": h.UsernsMode, "cgroupns": h.CgroupnsMode}
		c.Memory = h.Memory
		if h.PidsLimit != nil {
			c.PidsLimit = *h.PidsLimit
		}
	}
	for _, m := range in.Mounts {
		c.Mounts = append(c.Mounts, evidence.Mount{Type: m.Type, Source: m.Source, Destination: m.Destination, RW: m.RW})
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
		c.Networks = map[string]evidence.Endpoint{}
		for name, ep := range ns.Networks {
			if ep != nil {
				c.Networks[name] = evidence.Endpoint{NetworkID: ep.NetworkID, Aliases: ep.Aliases, IPAddress: ep.IPAddress}
			} else {
				c.Networks[name] = evidence.Endpoint{}
			}
		}
	}
	return c
}

// Network decodes a network inspect.
func Network(r Raw) evidence.Network {
	a, ok := r.answer()
	if !ok {
		return evidence.Network{Answer: a}
	}
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
	if err := json.Unmarshal(r.JSON, &in); err != nil {
		return evidence.Network{Answer: evidence.Answer{Invalid: fmt.Sprintf("network inspect: %v", err)}}
	}
	n := evidence.Network{ID: in.ID, Name: in.Name, Driver: in.Driver, Internal: in.Internal, IPv6: in.EnableIPv6, Labels: in.Labels, Members: map[string]string{}}
	for id, c := range in.Containers {
		n.Members[id] = c.Name
	}
	for _, c := range in.IPAM.Config {
		if c.Gateway != "" {
			n.Gateways = append(n.Gateways, c.Gateway)
		}
	}
	return n
}

// Info decodes GET /info.
func Info(r Raw) evidence.Daemon {
	a, ok := r.answer()
	if !ok {
		return evidence.Daemon{Answer: a}
	}
	var in struct {
		ID              string
		Name            string
		ServerVersion   string
		KernelVersion   string
		DockerRootDir   string
		SecurityOptions []string
		CgroupDriver    string
		CgroupVersion   string
		MemoryLimit     bool
		PidsLimit       bool
	}
	if err := json.Unmarshal(r.JSON, &in); err != nil {
		return evidence.Daemon{Answer: evidence.Answer{Invalid: fmt.Sprintf("info: %v", err)}}
	}
	return evidence.Daemon{ID: in.ID, Name: in.Name, ServerVersion: in.ServerVersion, KernelVersion: in.KernelVersion, RootDir: in.DockerRootDir, SecurityOpts: in.SecurityOptions,
		CgroupDriver: in.CgroupDriver, CgroupVersion: in.CgroupVersion, MemoryLimit: in.MemoryLimit, PidsLimit: in.PidsLimit}
}

// Image decodes an image inspect.
func Image(r Raw) evidence.Image {
	a, ok := r.answer()
	if !ok {
		return evidence.Image{Answer: a}
	}
	var in struct {
		ID          string `json:"Id"`
		RepoDigests []string
		Config      *struct {
			Entrypoint []string
			WorkingDir string
		}
		// Descriptor is the image's manifest (or index) descriptor, which
		// the containerd image store gives (API 1.48 and later): its id is
		// then that digest, not the configuration's.
		Descriptor *struct {
			Digest string `json:"digest"`
		}
	}
	if err := json.Unmarshal(r.JSON, &in); err != nil {
		return evidence.Image{Answer: evidence.Answer{Invalid: fmt.Sprintf("image inspect: %v", err)}}
	}
	im := evidence.Image{ID: in.ID, RepoDigests: in.RepoDigests}
	if in.Descriptor == nil {
		// The classic image store: an image's id is the SHA-256 of its
		// configuration.
		im.ConfigDigest = in.ID
	}
	if in.Config != nil {
		im.Entrypoint, im.WorkDir = in.Config.Entrypoint, in.Config.WorkingDir
	}
	return im
}

// List decodes GET /containers/json or GET /networks.
func List(r Raw) evidence.List {
	a, ok := r.answer()
	if !ok {
		return evidence.List{Answer: a}
	}
	var in []struct {
		ID     string `json:"Id"`
		Name   string
		Names  []string
		Labels map[string]string
	}
	if err := json.Unmarshal(r.JSON, &in); err != nil {
		return evidence.List{Answer: evidence.Answer{Invalid: fmt.Sprintf("list: %v", err)}}
	}
	out := evidence.List{Items: make([]evidence.Listed, 0, len(in))}
	for _, e := range in {
		name := e.Name
		if name == "" && len(e.Names) > 0 {
			name = e.Names[0]
		}
		out.Items = append(out.Items, evidence.Listed{ID: e.ID, Name: strings.TrimPrefix(name, "/"), Labels: e.Labels})
	}
	return out
}
