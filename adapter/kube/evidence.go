package kube

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/agentpen/agentpen/apikey"
	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/attest/evidence"
	"github.com/agentpen/agentpen/campaign"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Evidence is what the API server says of the campaign's pods, of the
// network policies of its namespaces and of the cluster, in the
// attestation's terms (package attest judges it: attest/cluster.go). A
// value of the API key variable is judged by q.KeyPolicy as it is read
// (from the secret the pod references) and dropped; no other secret value
// is read.
func (d *Driver) Evidence(ctx context.Context, q driver.EvidenceQuery) evidence.Runtime {
	rt := evidence.Runtime{Endpoint: d.rest.Host, Daemon: d.identity(ctx),
		Networks: map[string]evidence.Network{}, Containers: map[string]evidence.Container{}, Images: map[string]evidence.Image{}}
	namespaces := map[string]bool{}
	for _, r := range q.Resources {
		switch r.Kind {
		case campaign.KindNamespace:
			namespaces[r.Name] = true
		case campaign.KindContainer:
			rt.Containers[r.ID] = d.podEvidence(ctx, r, q)
		}
	}
	found, err := d.List(ctx, campaign.LabelCampaign+"="+q.CampaignID)
	if err != nil {
		rt.ContainerList.Err = err.Error()
	}
	for _, f := range found {
		l := evidence.Listed{ID: f.ID, Name: f.Name, Labels: f.Labels}
		if f.Kind == campaign.KindContainer {
			rt.ContainerList.Items = append(rt.ContainerList.Items, l)
		}
	}
	// Every pod of the campaign's namespaces, labelled or not: the
	// policies select by role alone.
	listed := map[string]bool{}
	for _, l := range rt.ContainerList.Items {
		listed[l.ID] = true
	}
	for _, ns := range slices.Sorted(maps.Keys(namespaces)) {
		var l *corev1.PodList
		if err := d.call(ctx, func() (err error) { l, err = d.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); return err }); err != nil {
			rt.ContainerList.Err = err.Error()
			break
		}
		for _, p := range l.Items {
			if !listed[string(p.UID)] {
				rt.ContainerList.Items = append(rt.ContainerList.Items, evidence.Listed{ID: string(p.UID), Name: ns + "/" + p.Name, Labels: p.Labels})
			}
		}
	}
	rt.Policies = d.policyEvidence(ctx, slices.Sorted(maps.Keys(namespaces)))
	rt.Daemon.KernelVersion = d.podsKernel(ctx, rt.Containers)
	return rt
}

// podsKernel is the kernel of the node the campaign's pods run on, as
// the node reports it; "" when they run on several nodes, or on none
// that answered.
func (d *Driver) podsKernel(ctx context.Context, pods map[string]evidence.Container) string {
	nodes := map[string]bool{}
	for _, c := range pods {
		if c.Pod != nil && c.Pod.Node != "" {
			nodes[c.Pod.Node] = true
		}
	}
	if len(nodes) != 1 {
		return ""
	}
	var n *corev1.Node
	name := slices.Collect(maps.Keys(nodes))[0]
	if err := d.call(ctx, func() (err error) { n, err = d.cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); return err }); err != nil {
		return ""
	}
	return n.Status.NodeInfo.KernelVersion
}

// identity is the cluster's identity now, as Open read it: the
// kube-system namespace's UID and the API server's version.
func (d *Driver) identity(ctx context.Context) evidence.Daemon {
	v, err := d.cs.Discovery().ServerVersion()
	if err != nil {
		return evidence.Daemon{Answer: evidence.Answer{Err: err.Error()}}
	}
	ks, err := d.cs.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		return evidence.Daemon{Answer: evidence.Answer{Err: err.Error()}}
	}
	return evidence.Daemon{ID: "k8s-" + string(ks.UID), Name: d.rest.Host, ServerVersion: v.GitVersion, RootDir: d.info.Runtime.RootDir}
}

// podEvidence is what the API server says of the journalled pod r.
func (d *Driver) podEvidence(ctx context.Context, r campaign.Resource, q driver.EvidenceQuery) evidence.Container {
	ns, name := splitName(r.Kind, r.Name)
	var pod *corev1.Pod
	err := d.call(ctx, func() (err error) {
		pod, err = d.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return err
	})
	switch {
	case apierrors.IsNotFound(err):
		return evidence.Container{Answer: evidence.Answer{NotFound: true}}
	case err != nil:
		return evidence.Container{Answer: evidence.Answer{Err: err.Error()}}
	case string(pod.UID) != r.ID:
		return evidence.Container{Answer: evidence.Answer{NotFound: true}} // a twin under the name
	case len(pod.Spec.Containers) != 1 || len(pod.Spec.EphemeralContainers) > 0:
		return evidence.Container{Answer: evidence.Answer{Invalid: fmt.Sprintf("the pod runs other than one container (%d, %d init, %d ephemeral)",
			len(pod.Spec.Containers), len(pod.Spec.InitContainers), len(pod.Spec.EphemeralContainers))}}
	}
	c := pod.Spec.Containers[0]
	ev := evidence.Container{ID: string(pod.UID), Name: ns + "/" + pod.Name, Labels: pod.Labels, HasState: true, HasConf: true, HasHostConfig: true,
		Status: strings.ToLower(string(pod.Status.Phase)), Cmd: append(slices.Clone(c.Command), c.Args...), WorkDir: c.WorkingDir}
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == c.Name {
			ev.Image = s.ImageID
			ev.Running = pod.Status.Phase == corev1.PodRunning && s.State.Running != nil
		}
	}
	p := &evidence.Pod{Namespace: ns, IP: pod.Status.PodIP, SpecImage: c.Image, Node: pod.Spec.NodeName,
		HostUsers: pod.Spec.HostUsers == nil || *pod.Spec.HostUsers, HostNetwork: pod.Spec.HostNetwork, HostPID: pod.Spec.HostPID, HostIPC: pod.Spec.HostIPC,
		ServiceAccount: pod.Spec.ServiceAccountName, Token: pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken}
	for _, v := range pod.Spec.Volumes {
		p.Volumes = append(p.Volumes, volumeKind(v))
		if v.Projected != nil {
			for _, src := range v.Projected.Sources {
				p.Token = p.Token || src.ServiceAccountToken != nil
			}
		}
	}
	h := settingsOf(pod)
	ev.CapAdd, ev.CapDrop, ev.SecurityOpt, ev.ReadOnlyRoot, ev.Memory = h.CapAdd, h.CapDrop, h.SecurityOpt, h.ReadOnlyRoot, h.Memory
	ev.Privileged = c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged
	p.Seccomp = seccompName(seccompOf(pod))
	for _, e := range c.Env {
		ev.EnvNames = append(ev.EnvNames, e.Name)
		if e.Name != q.KeyEnv {
			continue
		}
		switch ref := e.ValueFrom; {
		case ref == nil:
			p.KeyRef, ev.Key = "value", q.KeyPolicy.Check(e.Value)
		case ref.SecretKeyRef != nil:
			p.KeyRef = "secret:" + ns + "/" + ref.SecretKeyRef.Name
			ev.Key = d.secretKey(ctx, ns, ref.SecretKeyRef, q)
		default:
			p.KeyRef = "other"
		}
	}
	for _, e := range c.EnvFrom {
		ev.EnvNames = append(ev.EnvNames, "(every key of "+envFromName(e)+")")
	}
	ev.Pod = p
	return ev
}

// secretKey judges the value the secret key ref names, and drops it.
func (d *Driver) secretKey(ctx context.Context, ns string, ref *corev1.SecretKeySelector, q driver.EvidenceQuery) apikey.Status {
	var s *corev1.Secret
	if err := d.call(ctx, func() (err error) {
		s, err = d.cs.CoreV1().Secrets(ns).Get(ctx, ref.Name, metav1.GetOptions{})
		return err
	}); err != nil {
		return q.KeyPolicy.Check("")
	}
	return q.KeyPolicy.Check(string(s.Data[ref.Key]))
}

// policyEvidence lists every network policy of the namespaces, the
// campaign's or not.
func (d *Driver) policyEvidence(ctx context.Context, namespaces []string) evidence.Policies {
	out := evidence.Policies{Items: []evidence.Policy{}}
	for _, ns := range namespaces {
		var l *networkingv1.NetworkPolicyList
		if err := d.call(ctx, func() (err error) {
			l, err = d.cs.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
			return err
		}); err != nil {
			out.Err = err.Error()
			return out
		}
		for _, np := range l.Items {
			out.Items = append(out.Items, policyOf(&np))
		}
	}
	return out
}

// policyOf renders a network policy in the attestation's terms.
func policyOf(np *networkingv1.NetworkPolicy) evidence.Policy {
	p := evidence.Policy{ID: string(np.UID), Name: np.Namespace + "/" + np.Name, Labels: np.Labels, Allows: []string{}}
	p.Selects, p.SelectsOther = selectorOf(&np.Spec.PodSelector)
	types := np.Spec.PolicyTypes
	if len(types) == 0 { // the API's default: Ingress, and Egress when it has egress rules
		types = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
		if len(np.Spec.Egress) > 0 {
			types = append(types, networkingv1.PolicyTypeEgress)
		}
	}
	p.Ingress = slices.Contains(types, networkingv1.PolicyTypeIngress)
	p.Egress = slices.Contains(types, networkingv1.PolicyTypeEgress)
	who := "pods" + selectorText(p.Selects)
	if p.Ingress {
		for _, r := range np.Spec.Ingress {
			for _, peer := range peersOf(r.From) {
				for _, port := range portsOf(r.Ports) {
					p.Allows = append(p.Allows, "ingress "+who+" <- "+peer+" "+port)
				}
			}
		}
	}
	if p.Egress {
		for _, r := range np.Spec.Egress {
			for _, peer := range peersOf(r.To) {
				for _, port := range portsOf(r.Ports) {
					p.Allows = append(p.Allows, "egress "+who+" -> "+peer+" "+port)
				}
			}
		}
	}
	slices.Sort(p.Allows)
	return p
}

// selectorOf is a label selector's labels; other is true when it has
// expressions, which labels alone do not say.
func selectorOf(s *metav1.LabelSelector) (labels map[string]string, other bool) {
	if s == nil {
		return nil, false
	}
	return s.MatchLabels, len(s.MatchExpressions) > 0
}

func selectorText(labels map[string]string) string {
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		kv = append(kv, k+"="+labels[k])
	}
	return "{" + strings.Join(kv, ",") + "}"
}

// peersOf renders a rule's peers: no peer is every peer.
func peersOf(peers []networkingv1.NetworkPolicyPeer) []string {
	if len(peers) == 0 {
		return []string{"any"}
	}
	var out []string
	for _, p := range peers {
		var s string
		switch {
		case p.IPBlock != nil:
			s = "cidr{" + p.IPBlock.CIDR
			if len(p.IPBlock.Except) > 0 {
				s += " except " + strings.Join(p.IPBlock.Except, ",")
			}
			s += "}"
		case p.NamespaceSelector != nil:
			l, other := selectorOf(p.NamespaceSelector)
			s = "namespaces" + selectorText(l)
			if other {
				s += "+expressions"
			}
			if p.PodSelector != nil {
				pl, _ := selectorOf(p.PodSelector)
				s += "/pods" + selectorText(pl)
			}
		case p.PodSelector != nil:
			l, other := selectorOf(p.PodSelector)
			s = "pods" + selectorText(l)
			if other {
				s += "+expressions"
			}
		default:
			s = "any"
		}
		out = append(out, s)
	}
	return out
}

// portsOf renders a rule's ports: no port is every port.
func portsOf(ports []networkingv1.NetworkPolicyPort) []string {
	if len(ports) == 0 {
		return []string{"any"}
	}
	var out []string
	for _, p := range ports {
		proto := "tcp"
		if p.Protocol != nil {
			proto = strings.ToLower(string(*p.Protocol))
		}
		port := "any"
		if p.Port != nil {
			port = p.Port.String()
			if p.EndPort != nil {
				port += "-" + strconv.Itoa(int(*p.EndPort))
			}
		}
		out = append(out, proto+"/"+port)
	}
	return out
}

// settingsOf is the hardening of a pod's container in the
// attestation's terms: what Settings expects (from the pods Layout would
// make) and what Evidence observes (from the API server's answer) are
// read by this one function.
func settingsOf(pod *corev1.Pod) attest.RoleSettings {
	c := pod.Spec.Containers[0]
	h := attest.RoleSettings{CapAdd: []string{}, CapDrop: []string{}}
	if sc := c.SecurityContext; sc != nil {
		h.ReadOnlyRoot = sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem
		if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
			h.SecurityOpt = append(h.SecurityOpt, "no-new-privileges")
		}
		if sc.Capabilities != nil {
			for _, c := range sc.Capabilities.Add {
				h.CapAdd = append(h.CapAdd, string(c))
			}
			for _, c := range sc.Capabilities.Drop {
				h.CapDrop = append(h.CapDrop, string(c))
			}
		}
	}
	h.SecurityOpt = append(h.SecurityOpt, "seccomp="+seccompName(seccompOf(pod)))
	if m, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
		h.Memory = m.Value()
	}
	return h
}

// seccompOf is the seccomp profile of a pod's container: its own, or the
// pod's.
func seccompOf(pod *corev1.Pod) *corev1.SeccompProfile {
	if sc := pod.Spec.Containers[0].SecurityContext; sc != nil && sc.SeccompProfile != nil {
		return sc.SeccompProfile
	}
	if pod.Spec.SecurityContext != nil {
		return pod.Spec.SecurityContext.SeccompProfile
	}
	return nil
}

// volumeKind names a volume by its kind: "emptyDir", "hostPath:<path>",
// "projected", "secret:<name>", ...
func volumeKind(v corev1.Volume) string {
	switch s := v.VolumeSource; {
	case s.EmptyDir != nil:
		return "emptyDir"
	case s.HostPath != nil:
		return "hostPath:" + s.HostPath.Path
	case s.Projected != nil:
		return "projected"
	case s.Secret != nil:
		return "secret:" + s.Secret.SecretName
	case s.ConfigMap != nil:
		return "configMap:" + s.ConfigMap.Name
	case s.PersistentVolumeClaim != nil:
		return "persistentVolumeClaim:" + s.PersistentVolumeClaim.ClaimName
	}
	return "other:" + v.Name
}

// seccompName names a seccomp profile as the attestation compares it.
func seccompName(p *corev1.SeccompProfile) string {
	switch {
	case p == nil:
		return ""
	case p.Type == corev1.SeccompProfileTypeLocalhost && p.LocalhostProfile != nil:
		return "Localhost/" + *p.LocalhostProfile
	}
	return string(p.Type)
}

func envFromName(e corev1.EnvFromSource) string {
	switch {
	case e.SecretRef != nil:
		return "secret " + e.SecretRef.Name
	case e.ConfigMapRef != nil:
		return "config map " + e.ConfigMapRef.Name
	}
	return "a source"
}
