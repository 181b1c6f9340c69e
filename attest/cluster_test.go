package attest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/apikey"
	"github.com/agentpen/agentpen/attest/evidence"
	"github.com/agentpen/agentpen/campaign"
)

// clusterFixture is the campaign captured on the project's Kubernetes
// node (testdata/attest/cluster).
const clusterFixture = "cluster"

// clusterKey is the API key the cluster fixture's campaign was brought up
// with (adapter/kube's tests' testKey): in the cluster's secret, never in
// a pod's spec or the observation.
const clusterKey = "cluster-test-key-0123456789abcdef"

// pod edits the decoded pod of subject in the cluster fixture.
func (f *fixture) pod(t testing.TB, subject string, fn func(c *evidence.Container)) {
	t.Helper()
	id := f.id(t, subject)
	c, ok := f.obs.Runtime.Containers[id]
	if !ok || c.Pod == nil {
		t.Fatalf("%s: no pod for %s", f.name, subject)
	}
	p := *c.Pod
	c.Pod = &p
	fn(&c)
	f.obs.Runtime.Containers[id] = c
}

// policy edits the namespace's policy whose name ends in name.
func (f *fixture) policy(t testing.TB, name string, fn func(p *evidence.Policy)) {
	t.Helper()
	for i := range f.obs.Runtime.Policies.Items {
		if p := &f.obs.Runtime.Policies.Items[i]; strings.HasSuffix(p.Name, "/"+name) {
			p.Allows = slices.Clone(p.Allows)
			fn(p)
			return
		}
	}
	t.Fatalf("%s: no policy %s", f.name, name)
}

func clusterMutations() []mutation {
	foreign := evidence.Policy{ID: "0b5e0c3a-0000-4000-8000-00000000beef", Name: "ns/allow-everything", Ingress: true, Allows: []string{"ingress pods{} <- any any"}}
	ms := []mutation{
		{name: "cluster_id", what: "the kube-system namespace has another UID", want: []string{"daemon.id"},
			mutate: func(t *testing.T, f *fixture) { f.obs.Runtime.Daemon.ID = "k8s-another" }},
		{name: "cluster_version", what: "the API server's version changed", want: []string{"daemon.version"},
			mutate: func(t *testing.T, f *fixture) { f.obs.Runtime.Daemon.ServerVersion = "v1.30.0" }},
		{name: "cluster_endpoint", what: "another API server is selected than the one observed and recorded", want: []string{"daemon.endpoint"},
			mutate: func(t *testing.T, f *fixture) { f.src.Endpoint = "https://10.0.0.9:6443" }},
		{name: "cluster_unread", what: "the cluster's identity could not be read", want: []string{"daemon.info"},
			mutate: func(t *testing.T, f *fixture) {
				f.obs.Runtime.Daemon = evidence.Daemon{Answer: evidence.Answer{Err: "connection refused"}}
			}},

		{name: "foreign_permissive_policy", what: "another client's policy allows everything into the namespace's pods", want: []string{"network.policy_allows", "campaign.unexpected_policies"},
			mutate: func(t *testing.T, f *fixture) {
				f.obs.Runtime.Policies.Items = append(slices.Clone(f.obs.Runtime.Policies.Items), foreign)
			}},
		{name: "foreign_deny_policy", what: "another client's policy allows nothing (it opens no path, but the journal does not know it)", want: []string{"campaign.unexpected_policies"},
			mutate: func(t *testing.T, f *fixture) {
				p := foreign
				p.Allows = []string{}
				f.obs.Runtime.Policies.Items = append(slices.Clone(f.obs.Runtime.Policies.Items), p)
			}},
		{name: "deny_all_selects_some", what: "the deny-all policy selects only the workspaces", want: []string{"network.policy_default_deny"},
			mutate: func(t *testing.T, f *fixture) {
				f.policy(t, "deny-all", func(p *evidence.Policy) { p.Selects = map[string]string{"io.agentpen.role": "workspace"} })
			}},
		{name: "deny_all_ingress_only", what: "the deny-all policy isolates ingress only", want: []string{"network.policy_default_deny"},
			mutate: func(t *testing.T, f *fixture) { f.policy(t, "deny-all", func(p *evidence.Policy) { p.Egress = false }) }},
		{name: "policy_widened", what: "the grader's ingress policy allows every port", want: []string{"network.policy_allows"},
			mutate: func(t *testing.T, f *fixture) {
				f.policy(t, "grader-from-workspaces", func(p *evidence.Policy) {
					p.Allows[0] = strings.Replace(p.Allows[0], "tcp/8080", "any", 1)
				})
			}},
		{name: "policy_by_expressions", what: "a journalled policy selects by expressions the attestation cannot read", want: []string{"network.policy_allows"},
			mutate: func(t *testing.T, f *fixture) {
				f.policy(t, "grader-from-workspaces", func(p *evidence.Policy) { p.SelectsOther = true })
			}},
		{name: "policies_unread", what: "the namespace's policies could not be listed", want: []string{"network.policy_default_deny", "network.policy_allows", "campaign.unexpected_policies"},
			mutate: func(t *testing.T, f *fixture) {
				f.obs.Runtime.Policies = evidence.Policies{Answer: evidence.Answer{Err: "forbidden"}}
			}},

		{name: "pod_absent", what: "the workspace's pod is gone", want: []string{ws0 + ".present", ws0 + ".process"},
			mutate: func(t *testing.T, f *fixture) {
				f.obs.Runtime.Containers[f.id(t, ws0)] = evidence.Container{Answer: evidence.Answer{NotFound: true}}
			}},
		{name: "pod_not_a_pod", what: "the runtime described a container without its pod", want: []string{ws0 + ".present", ws0 + ".process"},
			mutate: func(t *testing.T, f *fixture) { f.pod(t, ws0, func(c *evidence.Container) { c.Pod = nil }) }},
		{name: "pod_id", what: "the pod answered has another UID", want: []string{ws0 + ".id"},
			mutate: func(t *testing.T, f *fixture) { f.pod(t, ws0, func(c *evidence.Container) { c.ID = "another" }) }},
		{name: "pod_name", what: "the pod has another name", want: []string{ws0 + ".name"},
			mutate: func(t *testing.T, f *fixture) { f.pod(t, ws0, func(c *evidence.Container) { c.Name += "-x" }) }},
		{name: "pod_pending", what: "the workspace's pod is pending", want: []string{ws0 + ".running"},
			mutate: func(t *testing.T, f *fixture) {
				f.pod(t, ws0, func(c *evidence.Container) { c.Status, c.Running = "pending", false })
			}},
		{name: "pod_image", what: "the workspace's pod names another image", want: []string{ws0 + ".image"},
			mutate: func(t *testing.T, f *fixture) {
				f.pod(t, ws0, func(c *evidence.Container) { c.Pod.SpecImage = "docker.io/library/python:3" })
			}},
		{name: "pod_no_image_id", what: "the node reports no image id running", want: []string{ws0 + ".image"},
			mutate: func(t *testing.T, f *fixture) { f.pod(t, ws0, func(c *evidence.Container) { c.Image = "" }) }},
		{name: "pod_caps", what: "the workspace's container adds NET_RAW", want: []string{ws0 + ".caps"},
			mutate: func(t *testing.T, f *fixture) {
				f.pod(t, ws0, func(c *evidence.Container) { c.CapAdd = append(slices.Clone(c.CapAdd), "NET_RAW") })
			}},
		{name: "pod_privileged", what: "the workspace's container is privileged", want: []string{ws0 + ".privileged"},
			mutate: func(t *testing.T, f *fixture) { f.pod(t, ws0, func(c *evidence.Container) { c.Privileged = true }) }},
		{name: "pod_escalation", what: "the workspace's container allows privilege escalation", want: []string{ws0 + ".no_new_privileges"},
			mutate: func(t *testing.T, f *fixture) {
				f.pod(t, ws0, func(c *evidence.Container) {
					c.SecurityOpt = slices.DeleteFunc(slices.Clone(c.SecurityOpt), func(o string) bool { return o == "no-new-privileges" })
				})
			}},
		{name: "pod_seccomp", what: "the workspace's container runs unconfined", want: []string{ws0 + ".seccomp"},
			mutate: func(t *testing.T, f *fixture) {
				f.pod(t, ws0, func(c *evidence.Container) { c.SecurityOpt = []string{"no-new-privileges", "seccomp=Unconfined"} })
			}},
		{name: "pod_writable_root", what: "the workspace's root file system is writable", want: []string{ws0 + ".read_only_root"},
			mutate: func(t *testing.T, f *fixture) { f.pod(t, ws0, func(c *evidence.Container) { c.ReadOnlyRoot = false }) }},
		{name: "pod_host_users", what: "the workspace's pod runs in the node's user namespace", want: []string{ws0 + ".host_users"},
			mutate: func(t *testing.T, f *fixture) { f.pod(t, ws0, func(c *evidence.Container) { c.Pod.HostUsers = true }) }},
		{name: "grader_host_users", what: "the grader's pod runs in the node's user namespace", want: []string{srv + ".host_users"},
			mutate: func(t *testing.T, f *fixture) { f.pod(t, srv, func(c *evidence.Container) { c.Pod.HostUsers = true }) }},
		{name: "pod_host_network", what: "the workspace's pod is on the node's network", want: []string{ws0 + ".host_namespaces"},
			mutate: func(t *testing.T, f *fixture) {
				f.pod(t, ws0, func(c *evidence.Container) { c.Pod.HostNetwork = true })
			}},
		{name: "pod_token", what: "a token of the API server is mounted in the workspace", want: []string{ws0 + ".service_account_token"},
			mutate: func(t *testing.T, f *fixture) { f.pod(t, ws0, func(c *evidence.Container) { c.Pod.Token = true }) }},
		{name: "pod_host_path", what: "the workspace's pod mounts a host path", want: []string{ws0 + ".volumes"},
			mutate: func(t *testing.T, f *fixture) {
				f.pod(t, ws0, func(c *evidence.Container) { c.Pod.Volumes = append(slices.Clone(c.Pod.Volumes), "hostPath:/") })
			}},
		{name: "key_in_spec", what: "the workspace's API key is written into its pod's spec", want: []string{ws0 + ".key_ref"},
			mutate: func(t *testing.T, f *fixture) { f.pod(t, ws0, func(c *evidence.Container) { c.Pod.KeyRef = "value" }) }},
		{name: "key_from_foreign_secret", what: "the grader's API key comes from a secret the journal does not know", want: []string{srv + ".key_ref"},
			mutate: func(t *testing.T, f *fixture) {
				f.pod(t, srv, func(c *evidence.Container) { c.Pod.KeyRef = "secret:" + c.Pod.Namespace + "/other" })
			}},
		{name: "workspace_key_differs", what: "a workspace holds another key than the grader", want: []string{ws0 + ".api_key"},
			mutate: func(t *testing.T, f *fixture) {
				f.pod(t, ws0, func(c *evidence.Container) { c.Key = apikey.Policy{}.Check("another-key-0123456789abcdef0123") })
			}},
		{name: "grader_key_placeholder", what: "the grader holds a placeholder key", want: []string{"api_key", ws0 + ".api_key", "workspaces[1].api_key"},
			mutate: func(t *testing.T, f *fixture) {
				f.pod(t, srv, func(c *evidence.Container) { c.Key = apikey.Policy{}.Check("changeme") })
			}},
		{name: "pod_env_token", what: "the workspace's pod spec carries GITHUB_TOKEN", want: []string{ws0 + ".env_secrets"},
			mutate: func(t *testing.T, f *fixture) {
				f.pod(t, ws0, func(c *evidence.Container) { c.EnvNames = append(slices.Clone(c.EnvNames), "GITHUB_TOKEN") })
			}},
		{name: "pod_memory", what: "the workspace's pod has no memory limit", want: []string{ws0 + ".limits"},
			mutate: func(t *testing.T, f *fixture) { f.pod(t, ws0, func(c *evidence.Container) { c.Memory = 0 }) }},
		{name: "pod_label", what: "the workspace's pod carries another campaign's label", want: []string{ws0 + ".label.io.agentpen.campaign"},
			mutate: func(t *testing.T, f *fixture) {
				f.pod(t, ws0, func(c *evidence.Container) {
					c.Labels = map[string]string{}
					for k, v := range f.obs.Runtime.Containers[f.id(t, ws0)].Labels {
						c.Labels[k] = v
					}
					c.Labels["io.agentpen.campaign"] = "another"
				})
			}},
		{name: "stray_pod", what: "a pod the journal does not know carries the campaign's label", want: []string{"campaign.unexpected_containers"},
			mutate: func(t *testing.T, f *fixture) {
				f.obs.Runtime.ContainerList.Items = append(slices.Clone(f.obs.Runtime.ContainerList.Items),
					evidence.Listed{ID: "stray", Name: "ns/stray", Labels: map[string]string{"io.agentpen.campaign": f.src.Spec.CampaignID}})
			}},

		{name: "episode_in_server_ns", what: "an episode ran in the workspace's own network namespace", want: []string{ws0 + ".probe.episode_isolation"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseMain, ws0, ws0+"/episode_isolation/0", func(m map[string]any) {
					iso := m["isolation"].(map[string]any)
					iso["episode_net_ns"] = iso["server_net_ns"]
				})
			}},
		{name: "episode_uid_outside", what: "an episode ran as a uid outside the journalled block", want: []string{ws0 + ".probe.uid_block"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseMain, ws0, ws0+"/uid_block/1", func(m map[string]any) { m["isolation"].(map[string]any)["episode_uid"] = 0 })
			}},
		{name: "probes_misdirected", what: "the probes were sent to another address than the grader pod's", want: []string{ws0 + ".probe.control", "workspaces[1].probe.control"},
			mutate: func(t *testing.T, f *fixture) { f.obs.ProbeEnv.ServerAddr = "10.0.0.1:8080" }},
		{name: "grader_moved", what: "the grader pod's address the API server reports is not where the probes went, nor where the workbenches submit", want: []string{ws0 + ".probe.control", "workspaces[1].probe.control", ws0 + ".grader_url", "workspaces[1].grader_url", ws0 + ".command", "workspaces[1].command"},
			mutate: func(t *testing.T, f *fixture) { f.pod(t, srv, func(c *evidence.Container) { c.Pod.IP = "10.0.0.1" }) }},
		// Review of issue 38: the grader pod re-addressed and the probes
		// sent there (they pass), while every workbench was given the old
		// address at bring-up.
		{name: "grader_readdressed", what: "the grader pod is at a new address the probes reached, and the workbenches submit to the old one", want: []string{ws0 + ".grader_url", "workspaces[1].grader_url", ws0 + ".command", "workspaces[1].command"},
			mutate: func(t *testing.T, f *fixture) {
				f.pod(t, srv, func(c *evidence.Container) { c.Pod.IP = "10.88.0.199" })
				f.obs.ProbeEnv.ServerAddr = "10.88.0.199:" + strconv.Itoa(f.exp.ServerPort)
			}},
		{name: "workbench_other_grader", what: "a workspace's workbench was given another grader address (its spec's arguments changed, so its PID 1 no longer runs them)", want: []string{ws0 + ".grader_url", ws0 + ".process", ws0 + ".command"},
			mutate: func(t *testing.T, f *fixture) {
				f.pod(t, ws0, func(c *evidence.Container) {
					c.Cmd = slices.Clone(c.Cmd)
					for i, a := range c.Cmd {
						if a == "--grader" {
							c.Cmd[i+1] = "http://10.88.0.250:8080"
						}
					}
				})
			}},
		// Review of issue 38: a node's tag repointed between two pods'
		// starts, so one pin runs two images.
		{name: "images_disagree", what: "a workspace runs another image id than the campaign's other pods of the same reference", want: []string{"workspaces[1].image"},
			mutate: func(t *testing.T, f *fixture) {
				f.pod(t, "workspaces[1]", func(c *evidence.Container) {
					c.Image = "sha256:0000000000000000000000000000000000000000000000000000000000000bad"
				})
			}},
		{name: "grader_seccomp", what: "the grader's container runs unconfined", want: []string{srv + ".seccomp"},
			mutate: func(t *testing.T, f *fixture) {
				f.pod(t, srv, func(c *evidence.Container) { c.SecurityOpt = []string{"no-new-privileges", "seccomp=Unconfined"} })
			}},
		{name: "grader_token", what: "a token of the API server is mounted in the grader", want: []string{srv + ".service_account_token"},
			mutate: func(t *testing.T, f *fixture) { f.pod(t, srv, func(c *evidence.Container) { c.Pod.Token = true }) }},
		{name: "grader_projected", what: "the grader's pod mounts a projected volume", want: []string{srv + ".volumes"},
			mutate: func(t *testing.T, f *fixture) {
				f.pod(t, srv, func(c *evidence.Container) { c.Pod.Volumes = append(slices.Clone(c.Pod.Volumes), "projected") })
			}},
		{name: "grader_host_pid", what: "the grader's pod shares the node's PID namespace", want: []string{srv + ".host_namespaces"},
			mutate: func(t *testing.T, f *fixture) { f.pod(t, srv, func(c *evidence.Container) { c.Pod.HostPID = true }) }},
		{name: "uid_range_other", what: "the workspace's server recorded another uid range than its container gives", want: []string{ws0 + ".probe.uid_block"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseMain, ws0, ws0+"/uid_block/0", func(m map[string]any) {
					m["outcome"], m["error"], m["uid_base"], m["uid_count"] = "not_found", "self runs episodes under uids 20000-21023", 0, 0
				})
			}},
		{name: "process_other_args", what: "the workspace's PID 1 does not end its command line with its pod spec's arguments", want: []string{ws0 + ".process"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseMain, ws0, ws0+"/process/0", func(m map[string]any) { m["process"].(map[string]any)["suffix_digest"] = "sha256:00" })
			}},
		{name: "process_wider_caps", what: "the workspace's PID 1 has a wider bounding set than planned", want: []string{ws0 + ".process"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseMain, ws0, ws0+"/process/0", func(m map[string]any) { m["process"].(map[string]any)["cap_bnd"] = "000001ffffffffff" })
			}},
		{name: "process_not_pid1", what: "the process answered is not the container's PID 1", want: []string{ws0 + ".process"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseMain, ws0, ws0+"/process/0", func(m map[string]any) { m["process"].(map[string]any)["pid"] = 7 })
			}},
		{name: "grader_process_nnp", what: "the grader's PID 1 runs without no_new_privs", want: []string{srv + ".process"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseBefore, srv, srv+"/process/0", func(m map[string]any) { m["process"].(map[string]any)["no_new_privs"] = false })
			}},
		{name: "argv_suffix_misstated", what: "the probe was told another count of the spec's arguments than the pod has", want: []string{ws0 + ".process"},
			mutate: func(t *testing.T, f *fixture) { f.obs.ProbeEnv.ArgvSuffix[ws0]++ }},
		{name: "grader_unreached", what: "the workspace did not reach the grader", want: []string{ws0 + ".probe.control", ws0 + ".probe.grader_health", ws0 + ".probe.grader_protected"},
			mutate: func(t *testing.T, f *fixture) {
				for _, id := range []string{"control/0", "grader_health/0", "grader_protected/0"} {
					f.probe(t, PhaseMain, ws0, ws0+"/"+id, func(m map[string]any) { m["outcome"], m["status"] = "timeout", 0 })
				}
			}},
	}
	for i := range ms {
		ms[i].fixture = clusterFixture
	}
	return ms
}

// TestClusterRecordOfAnotherRuntime: a Docker campaign's evidence judged
// as a cluster's, and a cluster's judged as Docker's, is never ok: the
// record chooses the checks, and the evidence of the other runtime is
// missing evidence. (Held in the review of issue 38.)
func TestClusterRecordOfAnotherRuntime(t *testing.T) {
	for _, name := range append(slices.Clone(fixtureNames), clusterFixture) {
		f := loadFixture(t, name)
		if f.src.Bringup.Cluster() {
			f.src.Bringup.Driver = RuntimeDocker
		} else {
			f.src.Bringup.Driver = RuntimeKubernetes
		}
		if rep := Evaluate(f.src, f.observed()); rep.OK {
			t.Errorf("%s judged as %s's: ok", name, f.src.Bringup.Driver)
		}
	}
}

// TestClusterMutationsCoverEveryCheck: every check of the cluster
// fixture's report is the target of a row of either table (the probes
// and labels it shares with Docker's are in mutations()).
func TestClusterMutationsCoverEveryCheck(t *testing.T) {
	covered := map[string]bool{}
	for _, m := range append(mutations(), clusterMutations()...) {
		for _, c := range m.want {
			covered[normalize(c)] = true
		}
	}
	f := loadFixture(t, clusterFixture)
	for c := range Evaluate(f.src, f.observed()).Checks() {
		if !covered[normalize(c)] && !strings.Contains(c, ".label.") {
			t.Errorf("check %s has no mutation in either table", c)
		}
	}
}

// TestClusterNeverOKWithoutEvidence: take any one piece of the cluster's
// evidence away and the report is not ok.
func TestClusterNeverOKWithoutEvidence(t *testing.T) {
	for name, drop := range map[string]func(f *fixture){
		"no_identity":       func(f *fixture) { f.obs.Runtime.Daemon = evidence.Daemon{} },
		"no_pods":           func(f *fixture) { f.obs.Runtime.Containers = nil },
		"no_policies":       func(f *fixture) { f.obs.Runtime.Policies = evidence.Policies{} },
		"no_pod_list":       func(f *fixture) { f.obs.Runtime.ContainerList = evidence.List{Answer: evidence.Answer{Err: "gone"}} },
		"no_runs":           func(f *fixture) { f.obs.Runs = nil },
		"no_endpoint":       func(f *fixture) { f.obs.Runtime.Endpoint = "" },
		"no_bringup_record": func(f *fixture) { f.src.Bringup = DaemonRecord{} },
		"no_journal":        func(f *fixture) { f.src.Records = nil },
		"no_roles":          func(f *fixture) { f.src.Roles = nil },
		"no_server_address": func(f *fixture) { f.obs.ProbeEnv.ServerAddr = "" },
		"empty_observation": func(f *fixture) { f.obs = Observation{} },
	} {
		t.Run(name, func(t *testing.T) {
			f := loadFixture(t, clusterFixture)
			drop(f)
			if rep := Evaluate(f.src, f.observed()); rep.OK || len(rep.FailedChecks) == 0 {
				t.Fatal("ok without the evidence")
			}
		})
	}
}

// TestClusterReportHoldsNoKey: the cluster's report holds the key's
// fingerprint, never the key; the network policies are reported stored,
// never enforced (nothing here proves enforcement).
func TestClusterReportHoldsNoKey(t *testing.T) {
	f := loadFixture(t, clusterFixture)
	rep := Evaluate(f.src, f.observed())
	b, err := rep.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(apikey.Fingerprint(clusterKey))) {
		t.Error("the key's fingerprint is not in the report")
	}
	if bytes.Contains(b, []byte(clusterKey)) {
		t.Error("the report holds the key")
	}
	if !strings.HasPrefix(rep.NetworkPolicies, "stored") {
		t.Errorf("network policies %q; want stored", rep.NetworkPolicies)
	}
}

// TestPlannedAllowsNAT: under egress nat the attestation expects the
// workspaces' way out with link-local excepted (as the kube driver's
// policy renders it: TestNATPolicyKeepsLinkLocalOut), and under internal
// no way out at all.
func TestPlannedAllowsNAT(t *testing.T) {
	const out = "egress pods{io.agentpen.role=workspace} -> cidr{0.0.0.0/0 except 169.254.0.0/16} any"
	if got := plannedAllows(&expectation{ServerPort: 8080}); !slices.Contains(got, out) {
		t.Errorf("nat: %q; want %q among them", got, out)
	}
	for _, a := range plannedAllows(&expectation{ServerPort: 8080, Internal: true}) {
		if strings.Contains(a, "cidr{") {
			t.Errorf("internal: %q allows a way out", a)
		}
	}
}

// setProbe sets (adds, or replaces) the result of probe id in the run of
// phase and subject.
func (f *fixture) setProbe(t testing.TB, phase, subject, id string, res map[string]any) {
	t.Helper()
	for i, r := range f.obs.Runs {
		if r.Phase != phase || r.Subject != subject {
			continue
		}
		b := editJSON(t, json.RawMessage(r.Stdout), func(v any) any {
			m := v.(map[string]any)
			rs := slices.DeleteFunc(m["results"].([]any), func(x any) bool { return x.(map[string]any)["id"] == id })
			res["id"] = id
			m["results"] = append(rs, res)
			return m
		})
		f.obs.Runs[i].Stdout = string(b)
		return
	}
	t.Fatalf("%s: no run %s/%s", f.name, phase, subject)
}

// TestPolicyEnforcement: the report says the cluster's policies are
// enforced only when every workspace pod's connection to the grader pod on
// a port no policy allows went unanswered beside a control that
// connected; an answer from any says they are not; anything else is
// stored, unproven. None of it fails the report: stored is the truth of a
// cluster without an enforcing plugin.
func TestPolicyEnforcement(t *testing.T) {
	for _, tt := range []struct {
		name     string
		outcomes [2]string
		control1 string // workspaces[1]'s control outcome ("" leaves it)
		want     string
	}{
		{"answered", [2]string{"refused", "timeout"}, "", "stored, not enforced: a workspace's pod reached the grader pod on a port no policy allows (workspaces[0] (refused))"},
		{"dropped", [2]string{"timeout", "timeout"}, "", "enforced:"},
		{"dropped_without_control", [2]string{"timeout", "timeout"}, "timeout", "stored: enforcement not proven (workspaces[1]: timeout, its control did not connect)"},
		{"error", [2]string{"timeout", "error"}, "", "stored: enforcement not proven"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := loadFixture(t, clusterFixture)
			for i, o := range tt.outcomes {
				subject := fmt.Sprintf("workspaces[%d]", i)
				f.setProbe(t, PhaseMain, subject, subject+"/policy_enforcement/0", map[string]any{"kind": "tcp", "outcome": o})
			}
			if tt.control1 != "" {
				f.probe(t, PhaseMain, "workspaces[1]", "workspaces[1]/control/0", func(m map[string]any) { m["outcome"] = tt.control1 })
			}
			rep := Evaluate(f.src, f.observed())
			if !strings.HasPrefix(rep.NetworkPolicies, tt.want) {
				t.Fatalf("network_policies %q, want %q...", rep.NetworkPolicies, tt.want)
			}
			if tt.control1 == "" && !rep.OK {
				t.Fatalf("the enforcement probe failed the report: %v", rep.FailedChecks)
			}
		})
	}
}

// TestClusterCanaries: a cluster's launcher's own command is judged for
// the network canaries from its namespace's policies: under internal
// egress every kind of host is denied only where the cluster enforces
// them (the enforcement probe's connections dropped), and under nat the
// kinds the policies let out (all but the metadata service) are reached
// unless the spec allows them.
func TestClusterCanaries(t *testing.T) {
	const check = "workspaces[0].probe.network_canaries"
	for _, tt := range []struct {
		name     string
		dropped  bool
		edit     func(s *campaign.CampaignSpec)
		pass     bool
		inReason string
	}{
		{"not_enforced", false, nil, false, "metadata (the policies are stored, not enforced"},
		{"enforced", true, nil, true, ""},
		{"not_enforced_all_allowed", false, func(s *campaign.CampaignSpec) { s.Workspaces[0].Integrity.AllowedEgress = campaign.EgressClasses }, true, ""},
		{"nat", true, func(s *campaign.CampaignSpec) {
			s.Egress = campaign.EgressNAT
			s.Workspaces[0].Integrity.AllowedEgress = []string{campaign.EgressCodeHost}
		}, false, "package_registry (the policies allow every host out under nat)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := loadFixture(t, clusterFixture)
			f.src.Spec.Workspaces[0].Command = []string{"run-agent"}
			if tt.edit != nil {
				tt.edit(&f.src.Spec)
			}
			if tt.dropped {
				for i := range 2 {
					subject := fmt.Sprintf("workspaces[%d]", i)
					f.setProbe(t, PhaseMain, subject, subject+"/policy_enforcement/0", map[string]any{"kind": "tcp", "outcome": "timeout"})
				}
			}
			rep := Evaluate(f.src, f.observed())
			c, ok := rep.Checks()[check]
			if !ok {
				t.Fatalf("no %s: %v", check, rep.FailedChecks)
			}
			if c.Pass != tt.pass || !strings.Contains(c.Reason, tt.inReason) {
				t.Fatalf("pass %v, reason %q; want pass %v naming %q", c.Pass, c.Reason, tt.pass, tt.inReason)
			}
			if _, ok := rep.Checks()["workspaces[1].probe.network_canaries"]; ok {
				t.Fatal("a workbench's workspace is judged for the canaries")
			}
		})
	}
}
