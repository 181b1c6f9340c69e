package attest

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/agentpen/agentpen/attest/evidence"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/workbench/probe/wire"
)

// A campaign on a cluster (DaemonRecord.Cluster) is judged from the API
// server's answers about its pods and its namespace's network policies,
// and from the probes run in its pods through pods/exec. What a cluster
// has no word for is not checked (networks, published ports, mounts of a
// host's paths: the driver refuses a plan that asks for them), and what
// Docker's checks prove by other means is checked in the cluster's terms:
// each pod in a user namespace of its own (hostUsers false) instead of a
// rootless daemon, no token of the API in a pod, the API key from the
// campaign's secret and never written into a spec, and the network
// policies' union instead of a network's members.

// ClusterWorkbenchPort is where a cluster's workspace's workbench listens
// beside its socket, on its pod's loopback (the kube driver reaches it
// through pods/portforward): the driver adds "--listen 127.0.0.1:PORT" to
// the plan's command.
const ClusterWorkbenchPort = 8765

// clusterArgs are the arguments the kube driver gives c's container
// (adapter/kube/layout.go; TestCampaignAttestsOnTheNode holds them equal
// on the node): the plan's command, the default grader on TCP whatever the
// topology, each workspace's --grader naming the grader pod's address
// (serverAddr), and a workbench's loopback listener for the forward.
func clusterArgs(e *expectation, c *containerExp, serverAddr string) []string {
	if c.Role == campaign.RoleServer {
		if c.NeedsKey {
			return campaign.GraderCommand(fmt.Sprintf(":%d", e.ServerPort), e.KeyEnv)
		}
		return slices.Clone(c.Cmd)
	}
	args := slices.Clone(c.Cmd)
	for i, a := range args {
		if a == "--grader" && i+1 < len(args) {
			args[i+1] = "http://" + serverAddr
		}
	}
	if c.NeedsKey {
		args = append(args, "--listen", fmt.Sprintf("127.0.0.1:%d", ClusterWorkbenchPort))
	}
	return args
}

// checkClusterDaemon: the cluster is the one the campaign was brought up
// on (the kube-system namespace's UID), at the same version, reached at
// the same endpoint.
func checkClusterDaemon(r *Report, e *expectation, obs Observation) {
	s, rec := &r.Daemon, e.Source.Bringup
	inf := obs.Runtime.Daemon
	if p := inf.Problem("the cluster's identity"); p != "" {
		s.add("daemon.info", nil, "the API server's version and the cluster's identity", false, p)
		return
	}
	s.add("daemon.id", inf.ID, rec.ID, inf.ID != "" && inf.ID == rec.ID, "another cluster than the one the campaign was brought up on")
	s.add("daemon.version", inf.ServerVersion, rec.ServerVersion, inf.ServerVersion != "" && inf.ServerVersion == rec.ServerVersion, "the API server's version changed since bring-up")
	endpointOK := obs.Runtime.Endpoint != "" && obs.Runtime.Endpoint == e.Source.Endpoint && obs.Runtime.Endpoint == rec.Endpoint
	s.add("daemon.endpoint", map[string]string{"connected": obs.Runtime.Endpoint, "recorded_at_bringup": rec.Endpoint}, e.Source.Endpoint, endpointOK,
		"the API server observed is not the selected one, or not the one the campaign was brought up on")
}

// clusterLimitsNote: a pod's limits are the kubelet's to enforce, with
// the node's cgroups; the API does not say whether it does.
const clusterLimitsNote = "requested in each pod's spec and enforced by the kubelet with the node's cgroups; the API server does not report the node's cgroups, so enforcement is not observed here (docs/kubernetes.md)"

// checkPod adds the API-side checks of one pod and returns its decoded
// container (nil when there is none). ranFirst holds, by pinned
// reference, the image id the first pod judged runs: a node holds images
// by name, so every pod of one reference must run one id.
func checkPod(r *Report, e *expectation, c *containerExp, obs Observation, ranFirst map[string]string) *container {
	s := c.Subject
	if c.IDProblem != "" {
		r.Containers.add(s+".present", nil, c.Name, false, c.IDProblem)
		return nil
	}
	d, seen := obs.Runtime.Containers[c.ID]
	if seen && d.Answer == (evidence.Answer{}) && d.Pod == nil {
		d.Invalid = "the runtime described a container, not a pod"
	}
	if p := problem("pod "+short(c.ID), d.Answer, seen); p != "" {
		r.Containers.add(s+".present", nil, c.ID, false, p)
		return nil
	}
	pod := d.Pod
	r.Containers.add(s+".present", d.ID, c.ID, true, "")
	r.Containers.add(s+".id", d.ID, c.ID, d.ID == c.ID, "the API server answered the journalled UID with another pod")
	r.Containers.add(s+".name", d.Name, c.Name, d.Name == c.Name, "the pod has another name than the journal's")
	addLabels(&r.Containers, s, d.Labels, c.Labels)
	r.Containers.add(s+".running", map[string]any{"phase": d.Status, "running": d.Running}, map[string]any{"phase": "running", "running": true},
		d.Running && d.Status == "running", "the pod is not running")
	wantID, first := ranFirst[c.Image], false
	if wantID == "" && d.Image != "" {
		ranFirst[c.Image], wantID, first = d.Image, d.Image, true
	}
	var wantIDText any = wantID
	if first {
		wantIDText = "the id the node reports running (the first pod of this reference)"
	}
	r.Containers.add(s+".image", map[string]any{"spec": pod.SpecImage, "image_id": d.Image}, map[string]any{"spec": c.Image, "image_id": wantIDText},
		pod.SpecImage == c.Image && d.Image != "" && d.Image == wantID,
		"the pod names another image than the pinned one, reports no image id running, or runs another id than the campaign's other pods of the same reference")
	// The pod's arguments are the plan's, as the driver renders them (by
	// digest: a launcher's command may hold values).
	serverAddr := (&Expectation{e}).ServerAddr(obs)
	want := clusterArgs(e, c, serverAddr)
	r.Containers.add(s+".command", map[string]any{"digest": argvDigest(d.Cmd), "argc": len(d.Cmd)}, map[string]any{"digest": argvDigest(want), "argc": len(want)},
		len(d.Cmd) > 0 && slices.Equal(d.Cmd, want), "the pod's spec gives its container other arguments than the planned command (as the driver renders it)")
	if c.Role == campaign.RoleWork && c.NeedsKey {
		// The grader's address the workbench was given at bring-up is the
		// grader pod's now: the probes reach it there, and so must the
		// workbench's submissions.
		want := ""
		if serverAddr != "" {
			want = "http://" + serverAddr
		}
		got := ""
		for i, a := range d.Cmd {
			if a == "--grader" && i+1 < len(d.Cmd) {
				got = d.Cmd[i+1]
			}
		}
		r.Network.add(s+".grader_url", got, want, want != "" && got == want, "the workbench was given another grader address than the grader pod's, as the API server reports it now")
	}

	h := c.Settings
	r.Hardening.add(s+".caps", map[string]any{"cap_add": normCaps(d.CapAdd), "cap_drop": normCaps(d.CapDrop)}, map[string]any{"cap_add": normCaps(h.CapAdd), "cap_drop": normCaps(h.CapDrop)},
		slices.Equal(normCaps(d.CapAdd), normCaps(h.CapAdd)) && slices.Equal(normCaps(d.CapDrop), normCaps(h.CapDrop)), "the capability set is not exactly the planned one")
	r.Hardening.add(s+".privileged", d.Privileged, false, !d.Privileged, "the container is privileged")
	nnp, otherOpts := splitNNP(d.SecurityOpt)
	wantNNP, wantOther := splitNNP(h.SecurityOpt)
	r.Hardening.add(s+".no_new_privileges", nnp, wantNNP, nnp == wantNNP, "allowPrivilegeEscalation is not false as planned")
	r.Hardening.add(s+".seccomp", nonNil(otherOpts), nonNil(wantOther), slices.Equal(otherOpts, wantOther), "the container's seccomp profile is not the planned one")
	r.Hardening.add(s+".read_only_root", d.ReadOnlyRoot, h.ReadOnlyRoot, d.ReadOnlyRoot == h.ReadOnlyRoot, "the root file system is not as planned (read-only or not)")
	r.Hardening.add(s+".host_users", pod.HostUsers, false, !pod.HostUsers, "the pod runs in the node's user namespace (hostUsers is not false): its root would be the node's")
	var shared []string
	for ns, on := range map[string]bool{"network": pod.HostNetwork, "pid": pod.HostPID, "ipc": pod.HostIPC} {
		if on {
			shared = append(shared, ns)
		}
	}
	sort.Strings(shared)
	r.Hardening.add(s+".host_namespaces", nonNil(shared), []string{}, len(shared) == 0, "the pod shares a namespace with the node")
	r.Hardening.add(s+".service_account_token", map[string]any{"service_account": pod.ServiceAccount, "token_mounted": pod.Token}, map[string]any{"token_mounted": false},
		!pod.Token, "a token of the API server is mounted in the pod")
	var foreign []string
	for _, v := range pod.Volumes {
		if v != "emptyDir" {
			foreign = append(foreign, v)
		}
	}
	r.Hardening.add(s+".volumes", map[string]any{"other_than_emptyDir": nonNil(foreign), "count": len(pod.Volumes)}, map[string]any{"other_than_emptyDir": []string{}},
		len(foreign) == 0, "the pod mounts a volume other than its own emptyDirs (a host path, a projected token, a config map)")
	if c.NeedsKey {
		secrets := journalledSecrets(e)
		r.APIKey.add(s+".key_ref", pod.KeyRef, map[string]any{"one_of": nonNil(secrets)}, slices.Contains(secrets, pod.KeyRef),
			"the API key variable does not come from the campaign's journalled secret (a value written into the pod's spec is readable by anyone who may read the pod)")
	}
	if c.Role == campaign.RoleWork {
		checkEnvSecrets(r, e, c, &d)
	}
	r.Limits.add(s+".limits", map[string]int64{"memory": d.Memory}, map[string]int64{"memory": h.Memory},
		d.Memory == h.Memory, "the memory limit in the pod's spec is not the one requested")
	return &d
}

// journalledSecrets are the campaign's live secrets as a pod's KeyRef
// names one: "secret:<namespace>/<name>".
func journalledSecrets(e *expectation) []string {
	var out []string
	for _, res := range campaign.Resources(e.Source.Records) {
		if res.Kind == campaign.KindSecret && res.ID != "" && !res.Removed {
			out = append(out, "secret:"+res.Name)
		}
	}
	sort.Strings(out)
	return out
}

// Policy rules a campaign's pods need, rendered as evidence.Policy's
// Allows are.
func plannedAllows(e *expectation) []string {
	port := "tcp/" + strconv.Itoa(e.ServerPort)
	role := func(r string) string { return "pods{" + campaign.LabelRole + "=" + r + "}" }
	out := []string{
		"egress " + role(campaign.RoleWork) + " -> " + role(campaign.RoleServer) + " " + port,
		"ingress " + role(campaign.RoleServer) + " <- " + role(campaign.RoleWork) + " " + port,
	}
	if !e.Internal {
		out = append(out, "egress "+role(campaign.RoleWork)+" -> cidr{0.0.0.0/0 except "+strings.Join(campaign.NATEgressExcept(), ",")+"} any")
	}
	sort.Strings(out)
	return out
}

// checkPolicies: the campaign's namespace holds a policy denying every
// connection of every pod, and the union of every policy there (the
// campaign's and any other) allows exactly the planned connections: a
// permissive policy added beside the campaign's fails, named. Whether the
// cluster enforces them is the report's Network.Policies.
func checkPolicies(r *Report, e *expectation, obs Observation) {
	s := &r.Network
	pl := obs.Runtime.Policies
	if p := pl.Problem("the namespace's network policies"); p != "" {
		s.add("network.policy_default_deny", nil, "a policy selecting every pod, isolating ingress and egress, allowing nothing", false, p)
		s.add("network.policy_allows", nil, plannedAllows(e), false, p)
		return
	}
	var deny []string
	got := map[string][]string{} // rule -> policies allowing it
	for _, p := range pl.Items {
		if len(p.Selects) == 0 && !p.SelectsOther && p.Ingress && p.Egress && len(p.Allows) == 0 {
			deny = append(deny, p.Name)
		}
		for _, a := range p.Allows {
			rule := a
			if p.SelectsOther {
				rule += " (by a selector of expressions)"
			}
			got[rule] = append(got[rule], p.Name)
		}
	}
	sort.Strings(deny)
	s.add("network.policy_default_deny", nonNil(deny), "a policy selecting every pod, isolating ingress and egress, allowing nothing", len(deny) > 0,
		"no policy of the namespace denies every pod every connection")
	want := plannedAllows(e)
	var extra []string
	for _, rule := range slices.Sorted(maps.Keys(got)) {
		if !slices.Contains(want, rule) {
			extra = append(extra, rule+" (by "+strings.Join(got[rule], ", ")+")")
		}
	}
	var missing []string
	for _, rule := range want {
		if _, ok := got[rule]; !ok {
			missing = append(missing, rule)
		}
	}
	s.add("network.policy_allows", map[string][]string{"unplanned": nonNil(extra), "missing": nonNil(missing)}, map[string]any{"allows": want, "unplanned": []string{}},
		len(extra) == 0 && len(missing) == 0, "the namespace's policies allow other connections than the planned ones, or miss one (policies are unioned: any policy there counts)")
}

// checkClusterCanaries judges a cluster's launcher's own commands for
// the network canaries from the policies, not from stand-ins: under
// internal egress the namespace's policies (exactly the planned ones)
// deny every host outside the campaign, which holds only where the
// cluster enforces them (the report's network_policies, from a probe);
// under nat they allow every host but the link-local range, so each
// kind of host but the metadata service is reached. Every kind the spec
// does not allow must be shown unreachable.
func checkClusterCanaries(r *Report, e *expectation) {
	checks := r.Checks()
	asPlanned := checks["network.policy_default_deny"].Pass && checks["network.policy_allows"].Pass
	enforced := strings.HasPrefix(r.NetworkPolicies, "enforced")
	for _, w := range e.Containers {
		if w.Role != campaign.RoleWork || w.Serves != "" || len(r.Scope) > 0 && !(w.Pool && slices.Contains(r.Scope, w.Slot)) {
			continue
		}
		var reached []string
		for _, class := range campaign.EgressClasses {
			switch {
			case w.Integrity.Allows(class):
			case !e.Internal && class != campaign.EgressMetadata:
				reached = append(reached, class+" (the policies allow every host out under nat)")
			case !asPlanned:
				reached = append(reached, class+" (the namespace's policies are not the planned ones)")
			case !enforced:
				reached = append(reached, class+" (the policies are "+r.NetworkPolicies+")")
			}
		}
		r.Connectivity.add(w.Subject+".probe.network_canaries",
			map[string]any{"egress": string(e.Egress), "policies_as_planned": asPlanned, "network_policies": r.NetworkPolicies, "allowed": nonNil(w.Integrity.AllowedEgress)},
			"every kind of host the spec does not allow denied by policies the cluster enforces", len(reached) == 0,
			"reachable: "+strings.Join(reached, "; "))
	}
}

// checkUnexpectedPolicies: every policy of the namespace is one the
// journal recorded, by its UID.
func checkUnexpectedPolicies(r *Report, e *expectation, obs Observation) {
	pl := obs.Runtime.Policies
	if p := pl.Problem("the namespace's network policies"); p != "" {
		r.Campaign.add("campaign.unexpected_policies", nil, []string{}, false, p)
		return
	}
	journalled := map[string]bool{}
	for _, res := range campaign.Resources(e.Source.Records) {
		if res.Kind == campaign.KindNetworkPolicy && res.ID != "" && !res.Removed {
			journalled[res.ID] = true
		}
	}
	var extra []string
	for _, p := range pl.Items {
		if !journalled[p.ID] {
			extra = append(extra, short(p.ID)+" "+p.Name)
		}
	}
	sort.Strings(extra)
	r.Campaign.add("campaign.unexpected_policies", nonNil(extra), []string{}, len(extra) == 0, "network policies the journal does not account for select the campaign's pods")
}

// ServerAddr is where the campaign's workspaces reach its grader, from
// the runtime's answers: on a cluster the grader pod's IP (there is no
// cluster DNS) and its port; "" elsewhere (the plan's alias is).
func (x *Expectation) ServerAddr(obs Observation) string {
	e := x.e
	if !e.Cluster || e.Server.ID == "" {
		return ""
	}
	d, ok := obs.Runtime.Containers[e.Server.ID]
	if !ok || d.Pod == nil || d.Pod.IP == "" {
		return ""
	}
	return joinHostPort(d.Pod.IP, strconv.Itoa(e.ServerPort))
}

// clusterMatch: r is the journal's record of c's pod, found by its role
// and agent labels (the kube driver names a pod "<namespace>/<name>").
func clusterMatch(c *containerExp, r campaign.Resource) bool {
	if r.Labels[campaign.LabelRole] != c.Role {
		return false
	}
	return c.Role == campaign.RoleServer || r.Labels[campaign.LabelAgent] == c.AgentID
}

// ArgvSuffixes are, by subject, how many arguments each pod's spec gives
// its container (command and args), as the API server answers now: the
// process probe digests that many of PID 1's last arguments.
func (x *Expectation) ArgvSuffixes(obs Observation) map[string]int {
	if !x.e.Cluster {
		return nil
	}
	out := map[string]int{}
	for _, c := range x.e.Containers {
		if d, ok := obs.Runtime.Containers[c.ID]; ok && c.ID != "" && d.Pod != nil {
			out[c.Subject] = len(d.Cmd)
		}
	}
	return out
}

// checkPodCustody: a pod's main process (PID 1 of its container) ends
// its command line with the arguments the pod's spec gives (the image's
// entrypoint before them is not reported by the API), and runs with
// no_new_privs and the planned bounding set. Its working directory and
// executable need a privileged exec to read, and are not checked.
func checkPodCustody(r *Report, c *containerExp, d *container, pr probe, res wire.Outcome) {
	want := map[string]any{"serves": "main"}
	var problems []string
	p := res.Process
	if d == nil || d.Pod == nil {
		problems = append(problems, "the pod was not observed: its spec's arguments are unknown")
	} else {
		want["argv_suffix"], want["suffix_digest"] = len(d.Cmd), argvDigest(d.Cmd)
		if pr.req.ArgvSuffix != len(d.Cmd) || len(d.Cmd) == 0 || p.SuffixDigest != argvDigest(d.Cmd) || p.Argc < len(d.Cmd) {
			problems = append(problems, "PID 1 does not end its command line with the pod spec's arguments")
		}
	}
	if p.Pid != 1 || p.Serves != "main" {
		problems = append(problems, fmt.Sprintf("pid %d serving %s, not the container's main process", p.Pid, p.Serves))
	}
	nnpProblems, capProblems := processFlags(c, *p, want)
	problems = append(append(problems, nnpProblems...), capProblems...)
	observed := map[string]any{"pid": p.Pid, "argc": p.Argc, "suffix_digest": p.SuffixDigest, "serves": p.Serves, "cap_bnd": p.CapBnd, "no_new_privs": p.NoNewPrivs}
	r.Custody.Processes = append(r.Custody.Processes, Process{Subject: c.Subject, ContainerID: c.ID, Pid: p.Pid, CommandDigest: p.ArgvDigest, Serves: p.Serves})
	sort.Slice(r.Custody.Processes, func(i, j int) bool { return r.Custody.Processes[i].Subject < r.Custody.Processes[j].Subject })
	r.Custody.add(pr.check, observed, want, len(problems) == 0, strings.Join(problems, "; "))
}
