package attest

import (
	"slices"
	"strings"
)

// CheckInfo says what one check of an attestation report proves.
type CheckInfo struct {
	// ID is the check's name with what varies by campaign abstracted:
	// "[i]" for a workspace's or network's index, ".label.<key>" for each
	// ownership label.
	ID string `json:"id"`
	// Section is the report's section that holds it.
	Section string `json:"section"`
	// Proves is what a pass proves.
	Proves string `json:"proves"`
	// Evidence is what it is judged from.
	Evidence string `json:"evidence"`
	// CannotProve is what a pass does not prove.
	CannotProve string `json:"cannot_prove"`
	// Runtimes are the drivers whose campaigns the check is made on
	// (RuntimeDocker, RuntimeKubernetes).
	Runtimes []string `json:"runtimes"`
	// OnCluster says what a check made on both is judged from on a
	// cluster, where Evidence names Docker's.
	OnCluster string `json:"on_cluster,omitempty"`
}

// Catalogue lists every check Evaluate can emit, in the report's order
// of sections. A test holds it equal to what the evaluator emits.
func Catalogue() []CheckInfo {
	out := []CheckInfo{{
		ID: "attestation", Section: "report",
		Proves:      "nothing: it fails when the campaign could not be judged at all (its spec, journal or plan could not be read), and the report's error says why",
		Evidence:    "the campaign's state directory",
		CannotProve: "anything about the campaign: no other check was made",
	}}
	out = append(out, daemonChecks...)
	out = append(out, networkChecks...)
	for _, c := range clusterChecks {
		if c.Section == "network" {
			c.Runtimes = []string{clusterRuntimes}
			out = append(out, c)
		}
	}
	for _, c := range append(slices.Clone(containerChecks), podChecks...) {
		for _, role := range []string{"server", "workspaces[i]"} {
			if c.only != "" && c.only != role {
				continue
			}
			e := c.CheckInfo
			e.ID = role + "." + c.ID
			if c.ID == "api_key" && role == "server" {
				e.ID = "api_key"
			}
			e.Proves = strings.ReplaceAll(e.Proves, "the container", map[string]string{"server": "the server", "workspaces[i]": "the workspace"}[role])
			if slices.ContainsFunc(podChecks, func(p containerCheck) bool { return p.ID == c.ID }) {
				e.Runtimes = []string{clusterRuntimes}
			}
			out = append(out, e)
		}
	}
	out = append(out, campaignChecks...)
	for _, c := range clusterChecks {
		if c.Section == "campaign" {
			c.Runtimes = []string{clusterRuntimes}
			out = append(out, c)
		}
	}
	for i := range out {
		on, shared := onCluster(out[i].ID)
		switch {
		case out[i].Runtimes != nil: // a cluster's own
		case shared:
			out[i].Runtimes, out[i].OnCluster = []string{RuntimeDocker, RuntimeKubernetes}, on
		default:
			out[i].Runtimes = []string{RuntimeDocker}
		}
	}
	return out
}

// onCluster says whether a check of Docker's catalogue is made on a
// cluster too, and from what there.
func onCluster(id string) (string, bool) {
	const exec = "workbench probe --batch run through pods/exec in the pod, its output accepted only from the pod whose mounts (the kubelet's /etc/hosts) name the journalled UID"
	check := ""
	if rest, ok := strings.CutPrefix(id, "workspaces[i]."); ok {
		check = rest
	} else if rest, ok := strings.CutPrefix(id, "server."); ok {
		check = rest
	}
	switch {
	case id == "attestation", id == "connectivity.host_listener":
		return "as on Docker", true
	case id == "daemon.info", id == "daemon.id", id == "daemon.version":
		return "the API server's /version and the kube-system namespace's UID (the cluster's identity)", true
	case id == "daemon.endpoint":
		return "the API server's URL in the kubeconfig selected now, and daemon-<generation>.json", true
	case id == "campaign.unexpected_containers":
		return "the API server's list of pods carrying the campaign's label, and of every pod in the campaign's namespaces, labelled or not (the policies select by role alone)", true
	case id == "api_key", check == "api_key":
		return "the key's fingerprint, read from the campaign's secret the pod's variable references (the value is dropped)", true
	case check == "uid_block":
		return "the journal's intent", true
	case check == "probe.uid_block":
		return exec + ": without a privileged exec the probe cannot read a non-dumpable server's /proc, so it reads the block from its own environment (the container's) and the range the server recorded from its own file system (the container's), and, once the workspace serves episodes, code run as one of them reports its uid, which must lie in the block", true
	case check == "command":
		return fromPod + ": the pod's spec gives its container the plan's command as the driver renders it (the default grader on TCP, each workspace's --grader naming the grader pod's address, a workbench's loopback listener for the forward), by digest", true
	case check == "process":
		return exec + ": without a privileged exec the probe cannot find the process holding the socket (its descriptors need ptrace), so it reads the container's main process, PID 1 of its PID namespace: its command line must end with the pod spec's arguments (by digest; the image's entrypoint before them is not reported by the API), with no_new_privs and the planned bounding set; its working directory and executable are not read", true
	case check == "probe.network_canaries":
		return "no stand-ins: the namespace's network policies as read (network.policy_default_deny, network.policy_allows) and whether the cluster enforces them (the report's network_policies, from a probe). Under internal egress every kind of host is denied only where they are enforced; under nat they allow every host out but the link-local range, so only the metadata service is denied", true
	case check == "probe.episode_isolation":
		return exec + ": the episode's namespaces are compared with the probe's own, which pods/exec runs in the workbench's container", true
	case strings.HasPrefix(check, "probe.") && !dockerRules[strings.TrimPrefix(check, "probe.")] && check != "probe.grader_socket_denied",
		check == "grader_counters", check == "grader_side_effects":
		return exec + "; the grader is reached at its pod's address as the API server reports it", true
	}
	switch check {
	case "image":
		return fromPod + ": the pod's spec names the pinned qualified name, and every pod of one reference reports the same image id running (a node holds images by name: the id is not pinned at bring-up)", true
	case "present", "id", "name", "label.<key>", "running", "caps", "privileged", "no_new_privileges", "read_only_root", "env_secrets", "limits":
		return fromPod, true
	}
	return "", false
}

const (
	fromPod         = "the API server's answer for the journalled pod (GET pods/<name>, its UID the journalled id)"
	clusterTrust    = "that the API server and the node tell the truth: a cluster administrator can change what runs"
	clusterRuntimes = RuntimeKubernetes
)

// clusterChecks are a cluster's own checks (attest/cluster.go).
var clusterChecks = []CheckInfo{
	{ID: "network.policy_default_deny", Section: "network", Proves: "a network policy of the campaign's namespace selects every pod and isolates its ingress and egress with no rule: what no policy allows is denied where policies are enforced", Evidence: "the API server's list of every network policy in the campaign's namespace", CannotProve: "that the cluster's network plugin enforces policies (the report's network_policies says stored or enforced)"},
	{ID: "network.policy_allows", Section: "network", Proves: "the union of every policy in the namespace (the campaign's and any other: policies are unioned) allows exactly the planned connections: each workspace to the grader's port, the grader from the workspaces on it, and under egress nat each workspace out; a policy selecting by expressions counts as another", Evidence: "the API server's list of every network policy in the campaign's namespace, each rule rendered as direction, peer and port", CannotProve: "enforcement (see network.policy_default_deny), or cluster-wide policies of other kinds (AdminNetworkPolicy, a CNI's own CRDs)"},
	{ID: "campaign.unexpected_policies", Section: "campaign", Proves: "every network policy of the campaign's namespace is one the journal recorded, by its UID: a foreign one is named", Evidence: "the API server's list of every network policy in the campaign's namespace, and the journal", CannotProve: "policies of other kinds (AdminNetworkPolicy)"},
}

// podChecks are a cluster's own checks of each pod.
var podChecks = []containerCheck{
	{CheckInfo: CheckInfo{ID: "seccomp", Section: "hardening", Proves: "the container's seccomp profile is the planned one (RuntimeDefault for the grader, the workspace's Localhost profile, by name)", Evidence: fromPod, CannotProve: "the profile's content on the node: the API holds its name only"}},
	{CheckInfo: CheckInfo{ID: "host_users", Section: "hardening", Proves: "the pod runs in a user namespace of its own (hostUsers false): its root is not the node's, and no two pods share uids", Evidence: fromPod, CannotProve: "that the node's runtime honours it (it refuses to start a pod it cannot; " + clusterTrust + ")"}},
	{CheckInfo: CheckInfo{ID: "host_namespaces", Section: "hardening", Proves: "the pod shares none of the node's network, PID or IPC namespaces", Evidence: fromPod, CannotProve: clusterTrust}},
	{CheckInfo: CheckInfo{ID: "service_account_token", Section: "hardening", Proves: "no token of the API server is mounted in the pod: automount is off and no projected volume holds one", Evidence: fromPod, CannotProve: "a token reachable another way (a secret the image carries)"}},
	{CheckInfo: CheckInfo{ID: "volumes", Section: "hardening", Proves: "the pod mounts only emptyDirs of its own: no host path, projected token, secret or config map", Evidence: fromPod, CannotProve: "what the image itself holds"}},
	{CheckInfo: CheckInfo{ID: "grader_url", Section: "network", Proves: "the grader address the workspace's workbench was given at bring-up (its --grader) is the grader pod's address as the API server reports it now: the workbench submits where the probes reached the grader", Evidence: fromPod + ", and the grader pod's", CannotProve: "that no other pod took the address in between (a pod keeps its IP while it lives; the grader's UID is checked)"}, only: "workspaces[i]"},
	{CheckInfo: CheckInfo{ID: "key_ref", Section: "api_key", Proves: "the API key variable takes its value from the campaign's journalled secret, never from a value written into the pod's spec (which anyone who may read the pod reads)", Evidence: fromPod + ", and the journal's secret", CannotProve: "who else may read the secret"}},
}

const (
	fromInfo    = "the daemon's own JSON: GET /info"
	fromInspect = "the daemon's own JSON: GET /containers/<journalled id>/json (and the pinned image's)"
	fromProbe   = "workbench probe --batches run by docker exec inside the container (one process per container, each phase's batch a line of its stdin, sent when the phase begins), its output accepted only from the container whose mounts name the journalled id"
	daemonTrust = "that the daemon tells the truth: a daemon's user who controls it can lie in its answers"
)

var daemonChecks = []CheckInfo{
	{ID: "daemon.info", Section: "daemon", Proves: "the daemon answered /info (it fails when it did not, and the daemon checks are then not made)", Evidence: fromInfo, CannotProve: daemonTrust},
	{ID: "daemon.id", Section: "daemon", Proves: "the daemon is the one the campaign was brought up on (its id is the one recorded at bring-up)", Evidence: fromInfo + ", and daemon-<generation>.json", CannotProve: "that the daemon was not restarted or reconfigured under the same id"},
	{ID: "daemon.version", Section: "daemon", Proves: "the daemon's version is the one at bring-up", Evidence: fromInfo + ", and daemon-<generation>.json", CannotProve: "that its configuration did not change"},
	{ID: "daemon.rootless", Section: "daemon", Proves: "the daemon says it is rootless (name=rootless among its security options): a container escape yields the daemon's user, not root", Evidence: fromInfo, CannotProve: daemonTrust},
	{ID: "daemon.endpoint", Section: "daemon", Proves: "agentpen talked to the socket selected now, which is the one the campaign was brought up on", Evidence: "the client's socket, DOCKER_HOST resolved, and daemon-<generation>.json", CannotProve: "who else can reach that socket"},
	{ID: "daemon.root_dir", Section: "daemon", Proves: "the daemon's root directory is the one recorded at bring-up, and not the rootful default /var/lib/docker", Evidence: fromInfo + ", and daemon-<generation>.json", CannotProve: daemonTrust},
}

var networkChecks = []CheckInfo{
	{ID: "network.topology", Section: "network", Proves: "a campaign without networks (topology none) journals no network", Evidence: "the journal", CannotProve: "that the containers have no interface but lo (workspaces[i].probe.agent_to_agent proves that)"},
	{ID: "networks[i].present", Section: "network", Proves: "the daemon has the agent network the journal recorded, by its id", Evidence: "the daemon's own JSON: GET /networks/<journalled id>", CannotProve: "that it was never replaced in between"},
	{ID: "networks[i].id", Section: "network", Proves: "the daemon answered the journalled id with that very network", Evidence: "the daemon's own JSON: GET /networks/<journalled id>", CannotProve: daemonTrust},
	{ID: "networks[i].name", Section: "network", Proves: "the network has the plan's name", Evidence: "the daemon's own JSON: GET /networks/<journalled id>", CannotProve: "that names alone are ownership (the labels and the id are)"},
	{ID: "networks[i].driver", Section: "network", Proves: "the network is a bridge", Evidence: "the daemon's own JSON: GET /networks/<journalled id>", CannotProve: "how the host's firewall treats the bridge"},
	{ID: "networks[i].internal", Section: "network", Proves: "the network's Internal flag matches the egress policy (internal: no route out)", Evidence: "the daemon's own JSON: GET /networks/<journalled id>", CannotProve: "that no path out exists (workspaces[i].probe.egress probes one when a target is configured)"},
	{ID: "networks[i].label.<key>", Section: "network", Proves: "each ownership label (io.agentpen.*) the journal's intent gave the network is on it with that value", Evidence: "the daemon's own JSON, and the journal's intent", CannotProve: "ownership by labels alone: any daemon client can copy labels (the journalled id and the create's secret label are the proof)"},
	{ID: "networks[i].labels", Section: "network", Proves: "nothing: it fails when the journal's intent carries no ownership label to compare with", Evidence: "the journal's intent", CannotProve: "ownership"},
	{ID: "networks[i].members", Section: "network", Proves: "the network holds exactly its agent's workspace and the server: no path between agents through it", Evidence: "the daemon's own JSON: the network's containers", CannotProve: "paths through other networks or the host (the probes test those)"},
}

// containerCheck is a check of the server's and every workspace's, or of
// one role's only.
type containerCheck struct {
	CheckInfo
	only string // "server" or "workspaces[i]"; "" for both
}

var containerChecks = []containerCheck{
	{CheckInfo: CheckInfo{ID: "present", Section: "containers", Proves: "the daemon has the container the journal recorded, by its id (when it fails, the container's other daemon-side checks are not made)", Evidence: fromInspect, CannotProve: "that it was never replaced in between"}},
	{CheckInfo: CheckInfo{ID: "id", Section: "containers", Proves: "the daemon answered the journalled id with that very container", Evidence: fromInspect, CannotProve: daemonTrust}},
	{CheckInfo: CheckInfo{ID: "name", Section: "containers", Proves: "the container has the plan's name", Evidence: fromInspect, CannotProve: "ownership by name alone"}},
	{CheckInfo: CheckInfo{ID: "label.<key>", Section: "containers", Proves: "each ownership label (io.agentpen.*) the journal's intent gave the container is on it with that value", Evidence: fromInspect + ", and the journal's intent", CannotProve: "ownership by labels alone: labels can be copied (the journalled id is the proof)"}},
	{CheckInfo: CheckInfo{ID: "labels", Section: "containers", Proves: "nothing: it fails when the journal's intent carries no ownership label to compare with", Evidence: "the journal's intent", CannotProve: "ownership"}},
	{CheckInfo: CheckInfo{ID: "running", Section: "containers", Proves: "the container is running with a pid, not paused or restarting", Evidence: fromInspect, CannotProve: "that it serves (the process and probe checks test that)"}},
	{CheckInfo: CheckInfo{ID: "image", Section: "containers", Proves: "the container runs the pinned image: its image id is the pinned id, or that of the image carrying the pinned repo digest", Evidence: fromInspect, CannotProve: "what the image holds, or that its digest is trustworthy (the spec pins it)"}},
	{CheckInfo: CheckInfo{ID: "command", Section: "containers", Proves: "the daemon runs the image's entrypoint with the planned command (their SHA-256)", Evidence: fromInspect, CannotProve: "what the command does once started"}},
	{CheckInfo: CheckInfo{ID: "network_mode", Section: "network", Proves: "the container's network mode is the planned one (none, or its network)", Evidence: fromInspect, CannotProve: "reachability (the probes test it)"}},
	{CheckInfo: CheckInfo{ID: "network_membership", Section: "network", Proves: "the container is on each planned network, by its journalled id, under its planned alias", Evidence: fromInspect, CannotProve: "reachability (the probes test it)"}},
	{CheckInfo: CheckInfo{ID: "networks_forbidden", Section: "network", Proves: "the container is on none of host, bridge, default or none (unless planned none)", Evidence: fromInspect, CannotProve: "paths the host opens outside Docker"}},
	{CheckInfo: CheckInfo{ID: "networks_unplanned", Section: "network", Proves: "the container is on no network outside the plan", Evidence: fromInspect, CannotProve: "paths the host opens outside Docker"}},
	{CheckInfo: CheckInfo{ID: "dns", Section: "network", Proves: "the container's DNS settings (servers, search, options, extra hosts) are the planned ones", Evidence: fromInspect, CannotProve: "what the resolver answers"}},
	{CheckInfo: CheckInfo{ID: "docker_socket", Section: "socket", Proves: "the Docker socket is mounted only where planned (the server's, when asked, at its target) and DOCKER_HOST is set only there", Evidence: fromInspect + ": mounts and environment names", CannotProve: "a socket reachable another way (probe.docker_socket looks from inside)"}},
	{CheckInfo: CheckInfo{ID: "mounts", Section: "hardening", Proves: "the container's mounts are exactly the planned ones", Evidence: fromInspect, CannotProve: "what the mounted directories hold"}},
	{CheckInfo: CheckInfo{ID: "publish", Section: "publish", Proves: "nothing is published, or only the planned loopback binding of the server, requested and active", Evidence: fromInspect, CannotProve: "other listeners on the host"}},
	{CheckInfo: CheckInfo{ID: "caps", Section: "hardening", Proves: "the capabilities added and dropped are exactly the planned ones", Evidence: fromInspect, CannotProve: "what the kernel grants inside a user namespace (process checks the bounding set)"}},
	{CheckInfo: CheckInfo{ID: "privileged", Section: "hardening", Proves: "the container is not privileged and has no host device", Evidence: fromInspect, CannotProve: daemonTrust}},
	{CheckInfo: CheckInfo{ID: "no_new_privileges", Section: "hardening", Proves: "no-new-privileges is set as planned", Evidence: fromInspect, CannotProve: "that the process itself kept it (process checks its status)"}},
	{CheckInfo: CheckInfo{ID: "security_opt", Section: "hardening", Proves: "the other security options (seccomp, apparmor) are the planned ones", Evidence: fromInspect, CannotProve: "what the profiles allow"}},
	{CheckInfo: CheckInfo{ID: "masked_paths", Section: "hardening", Proves: "the masked and read-only /proc and /sys paths are exactly the planned ones (episodes keep the container's /proc, so these must stay masked)", Evidence: fromInspect, CannotProve: "what the kernel exposes under other paths"}, only: "workspaces[i]"},
	{CheckInfo: CheckInfo{ID: "env_secrets", Section: "hardening", Proves: "the workspace's environment (its image's and the plan's, as the daemon merged them) holds no variable whose name says it holds a secret (*TOKEN*, *SECRET*, *PASSWORD*, *_API_KEY, ...), but the grader's key where its episode server needs it", Evidence: fromInspect + ": the variables' names (their values are dropped as they are decoded)", CannotProve: "a secret under an innocent name, or in a file (integrity.forbidden_paths names files)"}, only: "workspaces[i]"},
	{CheckInfo: CheckInfo{ID: "read_only_root", Section: "hardening", Proves: "the root file system is read-only, or not, as planned", Evidence: fromInspect, CannotProve: "what writable mounts hold"}},
	{CheckInfo: CheckInfo{ID: "tmpfs", Section: "hardening", Proves: "the tmpfs mounts and their sizes are the planned ones", Evidence: fromInspect, CannotProve: "that the sizes are enforced"}},
	{CheckInfo: CheckInfo{ID: "init", Section: "hardening", Proves: "the init process is as planned", Evidence: fromInspect, CannotProve: "reaping by the process itself"}},
	{CheckInfo: CheckInfo{ID: "namespaces", Section: "hardening", Proves: "the container shares no pid, ipc, uts or user namespace with the host or another container", Evidence: fromInspect, CannotProve: "that every container of a rootless daemon is apart in uids (they share one user namespace: isolation.uid_blocks_disjoint)"}},
	{CheckInfo: CheckInfo{ID: "limits", Section: "limits", Proves: "the memory and pids limits the daemon recorded are the ones requested", Evidence: fromInspect, CannotProve: "that they are enforced: without cgroups (rootless on cgroup v1) a limit is requested, not enforced, and the limits section's note says so"}},
	{CheckInfo: CheckInfo{ID: "process", Section: "custody", Proves: "the process serving the container's socket or port runs the planned command line in the planned directory, with no_new_privs and the planned capability bounding set", Evidence: fromProbe + ": /proc of the serving process", CannotProve: "what the process does, or that a process started later is as well behaved"}},
	{CheckInfo: CheckInfo{ID: "probe.docker_socket", Section: "connectivity", Proves: "from inside, no Docker socket is visible at the usual paths, in the mounts or in DOCKER_HOST (the server's only where planned)", Evidence: fromProbe, CannotProve: "a socket reachable over the network (the host probes test the loopback)"}},
	{CheckInfo: CheckInfo{ID: "grader_counters", Section: "connectivity", Proves: "the grader's route counters were read, with the key, before and after the workspaces' probes", Evidence: fromProbe + ": the grader's /v1/counters", CannotProve: "anything about a launcher's own server (only the workbench grader is probed)"}, only: "server"},
	{CheckInfo: CheckInfo{ID: "grader_side_effects", Section: "connectivity", Proves: "the requests the workspaces sent to protected grader routes without the key all arrived and reached no handler", Evidence: "the grader's counters before and after, and the probes sent", CannotProve: "other routes, or requests with a stolen key"}, only: "server"},
	{CheckInfo: CheckInfo{ID: "api_key", Section: "api_key", Proves: "the container holds the grader key: present, no placeholder, not short; the workspaces where the workbench serves hold the server's, a launcher's own command none (it is the agent), and agentpen's environment the same (compared by fingerprint, never by value)", Evidence: fromInspect + ": the key's fingerprint as decoded (the value is dropped)", CannotProve: "that the key is secret, or that no one else holds it"}},
	{CheckInfo: CheckInfo{ID: "uid_block", Section: "isolation", Proves: "the journal gave the workspace a well-formed block of sandbox uids", Evidence: "the journal's intent (its io.agentpen.uid-block label)", CannotProve: "that episodes run under it (probe.uid_block proves that)"}, only: "workspaces[i]"},
	{CheckInfo: CheckInfo{ID: "probe.control", Section: "connectivity", Proves: "the exec's network stack works: a connect that must succeed (to the grader) did, so a refusal or a timeout of the negative probes in the same exec is evidence", Evidence: fromProbe, CannotProve: "anything by itself"}, only: "workspaces[i]"},
	{CheckInfo: CheckInfo{ID: "probe.grader_health", Section: "connectivity", Proves: "the workspace reaches the grader's /health", Evidence: fromProbe, CannotProve: "that the grader grades correctly"}, only: "workspaces[i]"},
	{CheckInfo: CheckInfo{ID: "probe.grader_protected", Section: "connectivity", Proves: "every protected grader route answers 401 to the workspace without the key", Evidence: fromProbe, CannotProve: "routes of a launcher's own server (not probed), or requests with the key"}, only: "workspaces[i]"},
	{CheckInfo: CheckInfo{ID: "probe.host_loopback", Section: "connectivity", Proves: "the host's loopback (agentpen's own listener there) is unreachable from the workspace, beside a positive control", Evidence: fromProbe + "; agentpen's listener on the host", CannotProve: "ports the probe did not try"}, only: "workspaces[i]"},
	{CheckInfo: CheckInfo{ID: "probe.host_addresses", Section: "connectivity", Proves: "under internal egress, every other address of the host is unreachable from the workspace", Evidence: fromProbe + "; agentpen's listeners on the host", CannotProve: "ports the probe did not try"}, only: "workspaces[i]"},
	{CheckInfo: CheckInfo{ID: "probe.egress", Section: "connectivity", Proves: "the egress target is reachable under nat and unreachable under internal (probed only with --egress-target)", Evidence: fromProbe, CannotProve: "other destinations (without a target, egress is attested from the network's Internal flag alone, and the report says so)"}, only: "workspaces[i]"},
	{CheckInfo: CheckInfo{ID: "probe.grader_socket_denied", Section: "connectivity", Proves: "agent code (a sandbox uid of the workspace's block) cannot connect to the grader's socket (topology none)", Evidence: fromProbe + ", as a sandbox uid", CannotProve: "the episode server's own access (it is container root, and may)"}, only: "workspaces[i]"},
	{CheckInfo: CheckInfo{ID: "probe.agent_to_agent", Section: "connectivity", Proves: "the workspace cannot reach any other workspace (per-agent networks: each connect goes nowhere; no networks: only lo)", Evidence: fromProbe, CannotProve: "paths through the host's file system or the daemon (other checks), or ports not tried"}, only: "workspaces[i]"},
	{CheckInfo: CheckInfo{ID: "probe.bind_file", Section: "isolation", Proves: "the workspace's bind file (the task its server is bound to) is a regular file of container root, mode 0400, that a sandbox uid of its block cannot open (only where the workbench serves)", Evidence: fromProbe + ": an lstat as root, an open as a sandbox uid; root never reads it", CannotProve: "which task it names (the report never holds it), or a launcher's own command (no file)"}, only: "workspaces[i]"},
	{CheckInfo: CheckInfo{ID: "probe.episode_isolation", Section: "isolation", Proves: "code run as an episode of the workspace's workbench is in PID and network namespaces other than its server's, sees only a loopback interface and is refused a vsock socket; a workbench on the uid-only sandbox fails it (only where the workbench serves)", Evidence: fromProbe + ": the workbench runs the probe's code as one of its episodes and reports what it found", CannotProve: "what a later episode's code does (each episode gets namespaces of its own, made the same way), or a launcher's own command (not asked)"}, only: "workspaces[i]"},
	{CheckInfo: CheckInfo{ID: "probe.git_history", Section: "connectivity", Proves: "no git repository under the workspace's git root (integrity.git_root, default /workspace) holds anything past its base (the declared integrity.bases, or its HEAD): no branch, tag, remote-tracking ref, stash, note or head naming a commit past it, no reflog entry, no object the base does not reach (a dangling commit, a staged blob), no pack without its index, no git fsck --lost-found file, no patch or merge leftover (.orig, .rej, .patch, .diff) the base does not hold; audited as the agent's uid (the episode uid where the workbench serves, the main process's for a launcher's own command), by the first attestation covering the workspace (its bring-up's or its refill's), before any episode", Evidence: fromProbe + ": the workbench reads each repository's .git itself (package gitaudit), never running git", CannotProve: "the answer in the task's own files or in the base's history, repositories the uid cannot reach (they are not there for the agent either; one under a directory the uid owns fails the check: its owner may open it), what an object of an unsupported repository holds (SHA-256, reftable, grafts fail the check), or the workspace after its agent worked (a later attestation does not audit again)"}, only: "workspaces[i]"},
	{CheckInfo: CheckInfo{ID: "probe.forbidden_paths", Section: "connectivity", Proves: "the agent's uid (the episode uid where the workbench serves, the main process's for a launcher's own command) cannot open any file the spec forbids it (integrity.forbidden_paths: an answer key, a solution in the image): denied, or not there, and not to be reached by changing the mode of what it owns (the file, or a directory above a file whose bits let it read)", Evidence: fromProbe + ": an open for reading as that uid, on a thread whose filesystem ids are its; nothing is read", CannotProve: "copies of the answer under other paths, or what the file holds"}, only: "workspaces[i]"},
	{CheckInfo: CheckInfo{ID: "probe.network_canaries", Section: "connectivity", Proves: "a launcher's own command (its main process's uid, in the container's network namespace) reaches no kind of host its spec does not allow (integrity.allowed_egress): under egress nat each such kind fails (the route out reaches every host); otherwise a stand-in for each (a package registry, a code host, the launcher, the metadata service: listeners of agentpen's on a host address, reached by the way out the real hosts would be) is unreachable and counted no connection, and the route to the cloud metadata address 169.254.169.254 is none or leaves as the route to its stand-in, which was refused (asked of the kernel by a UDP connect, which sends nothing); without a network, the container has no interface but lo", Evidence: fromProbe + ": a connect to each stand-in, route lookups, or the interfaces; agentpen's stand-ins on the host, which count what they accept (from anyone: a connection from elsewhere fails it too)", CannotProve: "the real hosts (nothing is sent to the internet), a firewall rule for one address alone, or where the workbench serves (agent code runs in an episode's network namespace with no interface but lo: probe.episode_isolation proves it, once a workspace is claimed)"}, only: "workspaces[i]"},
	{CheckInfo: CheckInfo{ID: "probe.uid_block", Section: "isolation", Proves: "the workspace's episode server runs episodes under the uid block the journal gave it", Evidence: fromProbe, CannotProve: "a launcher's own command (not asked)"}, only: "workspaces[i]"},
}

var campaignChecks = []CheckInfo{
	{ID: "connectivity.host_listener", Section: "connectivity", Proves: "no connection reached agentpen's own host listeners during the probes", Evidence: "agentpen's listeners on the host, which count what they accept", CannotProve: "connections to other host ports"},
	{ID: "isolation.uid_blocks_disjoint", Section: "isolation", Proves: "no two containers on the daemon (of this campaign or any other) share a uid block: all containers of a rootless daemon share one user namespace", Evidence: "the daemon's list of every container carrying io.agentpen.uid-block", CannotProve: "containers started without that label by other tools"},
	{ID: "campaign.unexpected_containers", Section: "campaign", Proves: "no container carries the campaign's label that its journal does not account for", Evidence: "the daemon's list of containers filtered by the campaign's label", CannotProve: "look-alikes without the label"},
	{ID: "campaign.unexpected_networks", Section: "campaign", Proves: "no network carries the campaign's label that its journal does not account for", Evidence: "the daemon's list of networks filtered by the campaign's label", CannotProve: "look-alikes without the label"},
}
