package attest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/agentpen/agentpen/attest/evidence"
	"github.com/agentpen/agentpen/campaign"
)

// knownSocketTargets are paths at which a mounted Docker socket is
// conventionally found.
var knownSocketTargets = []string{"/var/run/docker.sock", "/run/docker.sock", "/docker.sock", campaign.DockerSocketTarget}

// checkContainer adds the daemon-side checks of one container and returns
// its decoded inspect (nil when there is none: then only .present is
// added, failed, and the probes speak for the rest).
func checkContainer(r *Report, e *expectation, c *containerExp, obs Observation) *container {
	s := c.Subject
	if c.IDProblem != "" {
		r.Containers.add(s+".present", nil, c.Name, false, c.IDProblem)
		return nil
	}
	d, seen := obs.Runtime.Containers[c.ID]
	if p := problem("container "+short(c.ID), d.Answer, seen); p != "" {
		r.Containers.add(s+".present", nil, c.ID, false, p)
		return nil
	}
	r.Containers.add(s+".present", d.ID, c.ID, true, "")
	r.Containers.add(s+".id", d.ID, c.ID, d.ID == c.ID, "the daemon answered the journalled id with another container")
	r.Containers.add(s+".name", d.Name, "/"+c.Name, d.Name == "/"+c.Name, "the container has another name than the plan's")
	addLabels(&r.Containers, s, d.Labels, c.Labels)
	running := d.HasState && d.Running && d.Status == "running" && !d.Paused && !d.Restart && d.Pid > 0
	r.Containers.add(s+".running", map[string]any{"status": d.Status, "running": d.Running, "pid": d.Pid}, map[string]any{"status": "running", "running": true, "pid": "> 0"}, running, "the container is not running with a pid")
	img, imgOK := plannedImage(obs, c.Image)
	checkImage(r, c, d, img, imgOK)
	checkCommand(r, c, d, img, imgOK)

	// Network.
	r.Network.add(s+".network_mode", d.NetworkMode, c.NetworkMode, d.NetworkMode == c.NetworkMode, "the network mode is not the planned one")
	netIDs := map[string]string{}
	for _, n := range e.Networks {
		netIDs[n.Name] = n.ID
	}
	members := []map[string]any{}
	wantMembers := []map[string]any{}
	memberOK := true
	for _, name := range c.Nets {
		ep, on := d.Networks[name]
		members = append(members, map[string]any{"network": name, "attached": on, "network_id": ep.NetworkID, "aliases": nonNil(ep.Aliases)})
		wantMembers = append(wantMembers, map[string]any{"network": name, "attached": true, "network_id": netIDs[name], "alias": c.Alias})
		memberOK = memberOK && on && netIDs[name] != "" && ep.NetworkID == netIDs[name] && slices.Contains(ep.Aliases, c.Alias)
	}
	r.Network.add(s+".network_membership", members, wantMembers, memberOK, "not attached to each planned network (by its journalled id) with its planned alias")
	var forbidden, unplanned []string
	for name := range d.Networks {
		switch {
		case name == "none" && c.NetworkMode == "none":
		case forbiddenNetworks[strings.ToLower(name)]:
			forbidden = append(forbidden, name)
		case !slices.Contains(c.Nets, name):
			unplanned = append(unplanned, name)
		}
	}
	sort.Strings(forbidden)
	sort.Strings(unplanned)
	r.Network.add(s+".networks_forbidden", nonNil(forbidden), []string{}, len(forbidden) == 0, "attached to host, bridge, default or none")
	r.Network.add(s+".networks_unplanned", nonNil(unplanned), []string{}, len(unplanned) == 0, "attached to a network outside the plan")
	r.Network.add(s+".dns", normDNS(d.DNS), normDNS(c.Settings.DNS), dnsEqual(d.DNS, c.Settings.DNS), "the DNS configuration is not the planned one")

	// The Docker socket, and the other mounts.
	sockMounts, rest := splitSocketMounts(d.Mounts, e.Source.SocketPath)
	envHost := slices.ContainsFunc(d.EnvNames, func(n string) bool { return strings.Contains(strings.ToUpper(n), "DOCKER_HOST") })
	wantSock := []mountInfo{}
	if c.DockerSocket {
		wantSock = []mountInfo{{Type: "bind", Source: e.Source.SocketPath, Destination: campaign.DockerSocketTarget, RW: true}}
	}
	sockOK := mountsEqual(sockMounts, wantSock) && envHost == c.DockerSocket
	r.Socket.add(s+".docker_socket", map[string]any{"mounts": nonNilM(sockMounts), "docker_host_env": envHost}, map[string]any{"mounts": wantSock, "docker_host_env": c.DockerSocket}, sockOK,
		map[bool]string{true: "the daemon socket must be mounted at " + campaign.DockerSocketTarget + " and nowhere else", false: "the Docker socket (or a directory holding it) is visible"}[c.DockerSocket])
	wantRest := slices.DeleteFunc(slices.Clone(c.Mounts), func(m mountInfo) bool { return isSocketMount(m, e.Source.SocketPath) })
	sortMounts(rest)
	r.Hardening.add(s+".mounts", nonNilM(rest), nonNilM(wantRest), mountsEqual(rest, wantRest), "the mounts are not exactly the planned ones")

	// Publish.
	checkPublish(r, c, d)

	// Hardening.
	h := c.Settings
	r.Hardening.add(s+".caps", map[string]any{"cap_add": normCaps(d.CapAdd), "cap_drop": normCaps(d.CapDrop)}, map[string]any{"cap_add": normCaps(h.CapAdd), "cap_drop": normCaps(h.CapDrop)},
		slices.Equal(normCaps(d.CapAdd), normCaps(h.CapAdd)) && slices.Equal(normCaps(d.CapDrop), normCaps(h.CapDrop)), "the capability set is not exactly the planned one")
	r.Hardening.add(s+".privileged", map[string]any{"privileged": d.Privileged, "devices": d.Devices}, map[string]any{"privileged": false, "devices": 0}, !d.Privileged && d.Devices == 0, "privileged, or host devices added")
	nnp, otherOpts := splitNNP(d.SecurityOpt)
	wantNNP, wantOther := splitNNP(h.SecurityOpt)
	r.Hardening.add(s+".no_new_privileges", nnp, wantNNP, nnp == wantNNP, "no-new-privileges is not as planned")
	r.Hardening.add(s+".security_opt", nonNil(otherOpts), nonNil(wantOther), slices.Equal(otherOpts, wantOther), "security options other than no-new-privileges (a seccomp profile by the digest of what inspect returns) differ from the plan")
	if h.MaskedPaths != nil || h.ReadonlyPaths != nil {
		got := map[string][]string{"masked": sortedCopy(d.MaskedPaths), "readonly": sortedCopy(d.ReadonlyPaths)}
		want := map[string][]string{"masked": sortedCopy(h.MaskedPaths), "readonly": sortedCopy(h.ReadonlyPaths)}
		r.Hardening.add(s+".masked_paths", got, want, slices.Equal(got["masked"], want["masked"]) && slices.Equal(got["readonly"], want["readonly"]),
			"the masked or read-only /proc and /sys paths are not the planned ones (episodes keep the container's /proc, so these must stay masked)")
	}
	r.Hardening.add(s+".read_only_root", d.ReadOnlyRoot, h.ReadOnlyRoot, d.ReadOnlyRoot == h.ReadOnlyRoot, "the root file system is not as planned (read-only or not)")
	r.Hardening.add(s+".tmpfs", nonNilMap(d.Tmpfs), nonNilMap(h.Tmpfs), maps.Equal(d.Tmpfs, h.Tmpfs), "tmpfs mounts or their sizes differ from the plan")
	r.Hardening.add(s+".init", d.Init, h.Init, d.Init == h.Init, "the init process is not as planned")
	var shared []string
	for _, ns := range []string{"pid", "ipc", "uts", "userns"} {
		if m := d.Namespaces[ns]; m == "host" || strings.HasPrefix(m, "container:") {
			shared = append(shared, ns+"="+m)
		}
	}
	r.Hardening.add(s+".namespaces", nonNil(shared), []string{}, d.HasHostConfig && len(shared) == 0, "shares a namespace with the host or another container")
	if c.Role == campaign.RoleWork {
		checkEnvSecrets(r, e, c, &d)
	}

	// Limits: requested vs recorded (enforcement is the section's note).
	r.Limits.add(s+".limits", map[string]int64{"memory": d.Memory, "pids_limit": d.PidsLimit}, map[string]int64{"memory": h.Memory, "pids_limit": h.PidsLimit},
		d.HasHostConfig && d.Memory == h.Memory && d.PidsLimit == h.PidsLimit, "the limits recorded are not the ones requested")
	return &d
}

// checkEnvSecrets: a workspace's environment (its image's and the
// plan's, as the daemon merged them; names only, values were dropped
// when decoding) holds no variable whose name says it holds a secret
// (campaign.SecretBearing: a token baked into a task image), but the
// grader's key where the workspace's episode server needs it.
func checkEnvSecrets(r *Report, e *expectation, c *containerExp, d *container) {
	var secrets []string
	for _, n := range d.EnvNames {
		if campaign.SecretBearing(n) && !(c.NeedsKey && n == e.KeyEnv) {
			secrets = append(secrets, n)
		}
	}
	sort.Strings(secrets)
	r.Hardening.add(c.Subject+".env_secrets", nonNil(secrets), []string{}, d.HasConf && len(secrets) == 0,
		"the environment holds a variable whose name says it holds a secret (a token in the image, or the spec)")
}

// plannedImage is the image the plan pins, as the daemon described it
// (Observation.Images is keyed by the planned reference): for an image id
// its Id must be that id, for repo@sha256 its repo digests must hold it.
func plannedImage(obs Observation, ref string) (image, bool) {
	im, ok := obs.Runtime.Images[ref]
	if !ok || im.Problem("image") != "" || im.ID == "" {
		return image{}, false
	}
	if strings.HasPrefix(ref, "sha256:") {
		return im, im.ID == ref
	}
	return im, slices.Contains(im.RepoDigests, repoDigest(ref))
}

// repoDigest is repo@sha256:... without a tag beside the digest.
func repoDigest(ref string) string {
	repo, digest, _ := strings.Cut(ref, "@")
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	return repo + "@" + digest
}

// checkImage: the container runs the image the plan pins: its image id is
// the pinned id, or the id of the image carrying the pinned repo digest.
func checkImage(r *Report, c *containerExp, d container, img image, imgOK bool) {
	s := c.Subject + ".image"
	if strings.HasPrefix(c.Image, "sha256:") {
		r.Containers.add(s, d.Image, c.Image, d.Image == c.Image, "the container runs another image")
		return
	}
	var want any = repoDigest(c.Image) + " (not observed)"
	if imgOK {
		want = map[string]any{"image_id": img.ID, "repo_digest": repoDigest(c.Image)}
	}
	r.Containers.add(s, d.Image, want, imgOK && d.Image == img.ID, "the container does not run the image carrying the pinned digest (or that image was not observed)")
}

// checkCommand: what the daemon ran is the image's entrypoint and the
// planned command.
func checkCommand(r *Report, c *containerExp, d container, img image, imgOK bool) {
	if !imgOK {
		r.Containers.add(c.Subject+".command", argvDigest(d.Argv), nil, false, "the planned image was not observed: its entrypoint is unknown")
		return
	}
	want := append(slices.Clone(img.Entrypoint), c.Cmd...)
	r.Containers.add(c.Subject+".command", map[string]any{"digest": argvDigest(d.Argv), "argc": len(d.Argv)}, map[string]any{"digest": argvDigest(want), "argc": len(want)},
		len(d.Argv) > 0 && slices.Equal(d.Argv, want), "the daemon runs another command than the image's entrypoint and the planned command")
}

func checkPublish(r *Report, c *containerExp, d container) {
	published := map[string][]evidence.Binding{}
	for port, bs := range d.PortBindings {
		if len(bs) > 0 {
			published["requested "+port] = bs
		}
	}
	for port, bs := range d.Ports {
		if len(bs) > 0 {
			published["active "+port] = bs
		}
	}
	if c.Publish == "" {
		r.Publish.add(c.Subject+".publish", map[string]any{"bindings": published, "publish_all": d.PublishAll}, "nothing published", len(published) == 0 && !d.PublishAll, "a port is published")
		return
	}
	host, port := splitHostPort(c.Publish)
	key := fmt.Sprintf("%d/tcp", c.Port)
	want := []evidence.Binding{{HostIP: host, HostPort: port}}
	ok := !d.PublishAll && len(published) == 2 && slices.Equal(published["requested "+key], want) && slices.Equal(published["active "+key], want)
	r.Publish.add(c.Subject+".publish", map[string]any{"bindings": published, "publish_all": d.PublishAll}, map[string]any{"requested " + key: want, "active " + key: want}, ok, "the published ports are not exactly the planned loopback binding")
}

// checkKeys: the server holds a real key, every workspace that needs one
// holds the same and every other (a launcher's own command) none, and
// agentpen's own (when it has one) is that key. Like
// every daemon-side check, a container's key check is made only when the
// daemon answered for it (its .present check says when not).
func checkKeys(r *Report, e *expectation, decoded map[string]*container) {
	needed := e.Server.NeedsKey
	for _, c := range e.Containers {
		needed = needed || c.NeedsKey
	}
	if !needed {
		return
	}
	k := &r.APIKey
	if ak := e.Source.AgentpenKey; ak.Present {
		k.Agentpen = &ak
	}
	ref := "" // the fingerprint every workspace must hold
	if srv := decoded[e.Server.Subject]; srv != nil {
		k.Server = srv.Key
		if e.Source.KeyPolicy.IsPublicDefault(k.Server.Fingerprint) {
			k.Server.Placeholder = true
		}
		ok := k.Server.OK() && len(k.Server.Fingerprint) == 16
		reason := "the server's key (" + e.KeyEnv + ") is missing, a placeholder or short"
		if k.Agentpen != nil && k.Agentpen.Fingerprint != k.Server.Fingerprint {
			ok, reason = false, "the server holds another key than agentpen's environment"
		}
		k.add("api_key", k.Server, map[string]any{"present": true, "placeholder": false, "short": false, "fingerprint": "16 hex digits"}, ok, reason)
		ref = k.Server.Fingerprint
	} else if k.Agentpen != nil {
		ref = k.Agentpen.Fingerprint
	}
	for _, c := range e.Containers {
		d := decoded[c.Subject]
		if c.Role == campaign.RoleServer || d == nil {
			continue
		}
		if !c.NeedsKey {
			// A launcher's own command is the agent: with the key it
			// could call the grader's protected routes.
			k.add(c.Subject+".api_key", map[string]bool{"present": d.Key.Present}, map[string]bool{"present": false}, !d.Key.Present,
				"a launcher's own command (the agent) holds the grader's key ("+e.KeyEnv+")")
			continue
		}
		k.add(c.Subject+".api_key", d.Key.Fingerprint, ref, d.Key.Present && ref != "" && d.Key.Fingerprint == ref, "the workspace does not hold the server's key")
	}
}

// splitSocketMounts separates the mounts that expose the daemon socket (the
// socket, a directory holding it, or anything at a socket's usual path)
// from the rest.
func splitSocketMounts(ms []mountInfo, socketPath string) (sock, rest []mountInfo) {
	for _, m := range ms {
		if isSocketMount(m, socketPath) {
			sock = append(sock, m)
		} else {
			rest = append(rest, m)
		}
	}
	return sock, rest
}

func isSocketMount(m mountInfo, socketPath string) bool {
	src := path.Clean(m.Source)
	if socketPath != "" && (src == socketPath || src == "/" || strings.HasPrefix(socketPath, src+"/")) {
		return true
	}
	if slices.Contains(knownSocketTargets, path.Clean(m.Destination)) {
		return true
	}
	return strings.Contains(path.Base(m.Destination), "docker.sock") || strings.Contains(path.Base(src), "docker.sock")
}

func mountsEqual(a, b []mountInfo) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = slices.Clone(a), slices.Clone(b)
	sortMounts(a)
	sortMounts(b)
	return slices.Equal(a, b)
}

func nonNilM(m []mountInfo) []mountInfo {
	if m == nil {
		return []mountInfo{}
	}
	return m
}

func nonNilMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// splitNNP says whether no-new-privileges is set and returns the other
// options, sorted, a seccomp profile given inline as the digest of its
// text ("seccomp=sha256:<hex>"): the daemon returns the text as it was
// given, and the report records which profile, not the profile.
func splitNNP(opts []string) (bool, []string) {
	nnp := false
	var other []string
	for _, o := range opts {
		switch strings.ToLower(strings.ReplaceAll(o, "=", ":")) {
		case "no-new-privileges", "no-new-privileges:true":
			nnp = true
		default:
			if profile, ok := strings.CutPrefix(o, "seccomp="); ok && strings.HasPrefix(strings.TrimSpace(profile), "{") {
				sum := sha256.Sum256([]byte(profile))
				o = "seccomp=sha256:" + hex.EncodeToString(sum[:])
			}
			other = append(other, o)
		}
	}
	sort.Strings(other)
	return nnp, other
}

func sortedCopy(s []string) []string {
	out := append([]string{}, s...)
	sort.Strings(out)
	return out
}

func normDNS(d dnsConfig) dnsConfig {
	n := func(s []string) []string {
		out := append([]string{}, s...)
		sort.Strings(out)
		return out
	}
	return dnsConfig{Servers: n(d.Servers), Search: n(d.Search), Options: n(d.Options), ExtraHosts: n(d.ExtraHosts)}
}

func dnsEqual(a, b dnsConfig) bool {
	a, b = normDNS(a), normDNS(b)
	return slices.Equal(a.Servers, b.Servers) && slices.Equal(a.Search, b.Search) && slices.Equal(a.Options, b.Options) && slices.Equal(a.ExtraHosts, b.ExtraHosts)
}
