package kube

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/campaign"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// A campaign generation on a cluster is a namespace of its own
// (<prefix>-<16 digits of its instance nonce>, Pod Security "baseline"
// enforced), and in it a service account of agentpen's (no token
// automount), the grader key's secret (pods reference it, never hold it in
// their spec), network policies (deny everything, then allow each
// workspace to reach the grader's port), the grader's pod and one pod per
// workspace (hostUsers false). Every object carries the campaign's
// ownership labels and the custody finalizer. A pod is journalled as a
// campaign.KindContainer; a namespaced object's journal name is
// "<namespace>/<name>", its id the object's UID.

// Names of a generation's objects inside its namespace.
const (
	serviceAccountName = "agentpen"
	secretName         = "agentpen-grader"
	serverPodName      = "grader"
	// apiKeyKey is the secret's key holding the grader's API key.
	apiKeyKey = "api-key"
	// WorkbenchPort is where a workspace's workbench listens, on its pod's
	// loopback (the driver reaches it through pods/portforward).
	WorkbenchPort = attest.ClusterWorkbenchPort
	// PodSecurityLevel is the Pod Security Standard enforced on a
	// campaign's namespace: workspaces run as root of their own user
	// namespace, which "restricted" refuses.
	PodSecurityLevel = "baseline"
)

// namespaceOf is a generation's namespace.
func (d *Driver) namespaceOf(instance string) string {
	return d.cfg.Prefix + "-" + instance[:min(16, len(instance))]
}

// workspacePod is the pod name of a workspace: its opaque agent id.
func workspacePod(ag campaign.AgentPlan) string { return ag.AgentID }

// The specs of a layout's objects.
type (
	namespacePlan struct{ ns *corev1.Namespace }
	saPlan        struct{ sa *corev1.ServiceAccount }
	secretPlan    struct{ secret *corev1.Secret }
	policyPlan    struct{ np *networkingv1.NetworkPolicy }
	podPlan       struct {
		pod *corev1.Pod
		// grader is the grader's pod of this bring-up, whose IP a
		// workspace's command names (no cluster DNS, no kube-proxy): the
		// grader's own plan fills it, a workspace's waits for it. Nil
		// in a refill's, whose grader already runs.
		grader *graderPod
		// graderPort is the grader's port (0 in the grader's own plan).
		graderPort int
	}
)

// graderPod is what a bring-up's workspaces learn of its grader's pod
// once its create has returned.
type graderPod struct {
	made chan struct{} // closed when uid and err are set
	once sync.Once
	uid  string
	err  error

	mu sync.Mutex
	ip string // its address, once a workspace learned it
}

// address is the grader pod's IP once learned ("" before; g may be nil,
// a refill's).
func (g *graderPod) address() string {
	if g == nil {
		return ""
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ip
}

// learn records the grader pod's IP, which it keeps while it lives.
func (g *graderPod) learn(ip string) {
	if g == nil {
		return
	}
	g.mu.Lock()
	g.ip = ip
	g.mu.Unlock()
}

func newGraderPod() *graderPod { return &graderPod{made: make(chan struct{})} }

// set records the grader's create, once (a create tried again after a
// failure adds nothing a workspace waited for).
func (g *graderPod) set(uid string, err error) {
	g.once.Do(func() { g.uid, g.err = uid, err; close(g.made) })
}

// Check refuses a plan a cluster cannot carry: its campaign id and every
// label value must be a label value's (at most 63 characters of
// [A-Za-z0-9_.-]).
func (d *Driver) Check(p *campaign.Plan) error {
	// What a host's paths or sockets would give a pod, the namespace's Pod
	// Security level refuses: refused here, before anything is made.
	s := p.Server.Spec
	switch {
	case s.MountDockerSocket:
		return &campaign.ValidationError{Field: "server.mount_docker_socket", Value: "true", Msg: "a cluster has no Docker socket to mount"}
	case s.DataHostPath != "":
		return &campaign.ValidationError{Field: "server.data_host_path", Value: s.DataHostPath, Msg: "a pod mounts no host path (Pod Security " + PodSecurityLevel + " refuses hostPath volumes)"}
	case s.PublishLoopback != "":
		return &campaign.ValidationError{Field: "server.publish_loopback", Value: s.PublishLoopback, Msg: "a cluster publishes no port on agentpen's host"}
	}
	for _, ag := range p.Agents {
		if ag.Spec.WorkspaceHostPath != "" {
			return &campaign.ValidationError{Field: fmt.Sprintf("workspaces[%d].workspace_host_path", ag.Index), Value: ag.Spec.WorkspaceHostPath,
				Msg: "a pod mounts no host path (Pod Security " + PodSecurityLevel + " refuses hostPath volumes)"}
		}
	}
	if len(p.Agents) > MaxWorkspaces {
		return &campaign.ValidationError{Field: "workspaces", Value: strconv.Itoa(len(p.Agents)), Msg: fmt.Sprintf("a campaign on a cluster has at most %d workspaces, pool included", MaxWorkspaces)}
	}
	labels := []map[string]string{p.Server.Labels}
	for _, ag := range p.Agents {
		labels = append(labels, ag.Labels)
	}
	for _, l := range labels {
		for k, v := range l {
			if !labelValue(v) {
				field := "labels." + k
				if k == campaign.LabelCampaign {
					field = "campaign_id"
				}
				return &campaign.ValidationError{Field: field, Value: v, Msg: "a cluster's label values hold at most 63 characters of A-Z, a-z, 0-9, '-', '_' and '.', beginning and ending with a letter or digit"}
			}
		}
	}
	return nil
}

func labelValue(v string) bool {
	if len(v) > 63 {
		return false
	}
	for i, c := range v {
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if !alnum && (i == 0 || i == len(v)-1 || !strings.ContainsRune("-_.", c)) {
			return false
		}
	}
	return true
}

// Layout lays a bring-up out: the namespace, then its service account,
// secret and policies at once, then the grader's pod and the workspaces'.
func (d *Driver) Layout(ctx context.Context, b driver.BringUp) (*driver.Layout, error) {
	p := b.Plan
	if err := d.Check(p); err != nil {
		return nil, err
	}
	ns := d.namespaceOf(p.Instance)
	own := p.CampaignLabels()
	obj := func(kind campaign.Kind, name string, spec any) *driver.Object {
		return &driver.Object{Kind: kind, Role: campaign.RoleCampaign, Name: ns + "/" + name, Labels: maps.Clone(own), Spec: spec}
	}
	l := &driver.Layout{}
	var grader *graderPod
	if b.Campaign {
		grader = newGraderPod()
	}
	server := &driver.Object{Kind: campaign.KindContainer, Role: campaign.RoleServer, Name: ns + "/" + serverPodName, Labels: maps.Clone(p.Server.Labels)}
	if b.Campaign {
		nsObj := &driver.Object{Kind: campaign.KindNamespace, Role: campaign.RoleCampaign, Name: ns, Labels: maps.Clone(own), Spec: &namespacePlan{&corev1.Namespace{
			ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{
				"pod-security.kubernetes.io/enforce": PodSecurityLevel, "pod-security.kubernetes.io/warn": PodSecurityLevel}},
		}}}
		secret := map[string][]byte{apiKeyKey: []byte(b.APIKey)}
		for k, v := range b.Secrets {
			secret[envKey(k)] = []byte(v)
		}
		stage := []*driver.Object{
			obj(campaign.KindServiceAccount, serviceAccountName, &saPlan{&corev1.ServiceAccount{
				ObjectMeta: metav1.ObjectMeta{Name: serviceAccountName, Namespace: ns}, AutomountServiceAccountToken: ptr(false)}}),
			obj(campaign.KindSecret, secretName, &secretPlan{&corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: secretName, Namespace: ns}, Type: corev1.SecretTypeOpaque, Data: secret}}),
		}
		for _, np := range policies(ns, p) {
			stage = append(stage, obj(campaign.KindNetworkPolicy, np.Name, &policyPlan{np}))
		}
		l.Shared = [][]*driver.Object{{nsObj}, stage}
		server.Spec = &podPlan{pod: d.serverPod(ns, p, b), grader: grader}
		l.Server = &driver.Unit{Agent: -1, Main: server}
	}
	for _, i := range b.Agents {
		if i < 0 || i >= len(p.Agents) {
			return nil, fmt.Errorf("layout: no workspace %d in the plan", i)
		}
		ag := p.Agents[i]
		pp := &podPlan{pod: d.workspacePod(ns, p, ag), grader: grader, graderPort: p.Server.Port}
		l.Workspaces = append(l.Workspaces, &driver.Unit{Agent: i,
			Main: &driver.Object{Kind: campaign.KindContainer, Role: campaign.RoleWork, Name: ns + "/" + workspacePod(ag), Labels: maps.Clone(ag.Labels), Spec: pp}})
	}
	return l, nil
}

// envKey is a secret key for an environment variable's value.
func envKey(name string) string { return "env-" + strings.ToLower(strings.ReplaceAll(name, "_", "-")) }

// policies are a generation's network policies: every pod of the
// namespace is denied every connection in and out, then each workspace
// may reach the grader's port, and (egress nat) the outside but
// campaign.NATEgressExcept.
func policies(ns string, p *campaign.Plan) []*networkingv1.NetworkPolicy {
	role := func(r string) metav1.LabelSelector {
		return metav1.LabelSelector{MatchLabels: map[string]string{campaign.LabelRole: r}}
	}
	tcp := corev1.ProtocolTCP
	port := intstr.FromInt32(int32(p.Server.Port))
	out := []*networkingv1.NetworkPolicy{
		{ObjectMeta: metav1.ObjectMeta{Name: "deny-all", Namespace: ns}, Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{}, PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "workspaces-to-grader", Namespace: ns}, Spec: networkingv1.NetworkPolicySpec{
			PodSelector: role(campaign.RoleWork), PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{PodSelector: ptr(role(campaign.RoleServer))}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}}}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "grader-from-workspaces", Namespace: ns}, Spec: networkingv1.NetworkPolicySpec{
			PodSelector: role(campaign.RoleServer), PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: ptr(role(campaign.RoleWork))}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}}}}}},
	}
	if p.Egress == campaign.EgressNAT {
		out = append(out, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "workspaces-egress-nat", Namespace: ns}, Spec: networkingv1.NetworkPolicySpec{
			PodSelector: role(campaign.RoleWork), PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: campaign.NATEgressExcept()}}}}}}})
	}
	return out
}

// episodesDir is where the workbench makes its episodes' trees.
const episodesDir = "/run/agent-workbench"

// graderURLFlag is the workbench flag naming the grader.
const graderURLFlag = "--grader"

// serverPod is the grader's pod: the plan's command, listening on its
// port on every address of the pod (the workspaces reach it by the pod's
// IP), its API key from the secret.
func (d *Driver) serverPod(ns string, p *campaign.Plan, b driver.BringUp) *corev1.Pod {
	s := p.Server.Spec
	cmd := slices.Clone(s.Command)
	ready := slices.Clone(s.ReadyCommand)
	if p.Server.NeedsKey {
		// The default grader: on TCP, whatever the Docker topology.
		cmd = campaign.GraderCommand(fmt.Sprintf(":%d", p.Server.Port), s.APIKeyEnv)
		ready = []string{campaign.WorkbenchBinary, "probe", "--expect-status", "200", fmt.Sprintf("http://127.0.0.1:%d/health", p.Server.Port)}
	}
	env := []corev1.EnvVar{{Name: "AGENTPEN_API_KEY_ENV", Value: s.APIKeyEnv}, {Name: "AGENTPEN_ROLE", Value: campaign.RoleServer}}
	for _, k := range slices.Sorted(maps.Keys(s.ExtraEnv)) {
		env = append(env, corev1.EnvVar{Name: k, Value: s.ExtraEnv[k]})
	}
	if b.APIKey != "" {
		env = append(env, secretEnv(s.APIKeyEnv, apiKeyKey))
	}
	for _, k := range s.SecretEnv {
		if _, ok := b.Secrets[k]; ok {
			env = append(env, secretEnv(k, envKey(k)))
		}
	}
	c := corev1.Container{
		Name: "grader", Image: imageRef(s.Image), ImagePullPolicy: corev1.PullNever, Args: cmd, Env: env,
		Ports:          []corev1.ContainerPort{{ContainerPort: int32(p.Server.Port), Protocol: corev1.ProtocolTCP}},
		ReadinessProbe: execProbe(ready),
		SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
	}
	pod := d.pod(ns, serverPodName, c, nil)
	// The grader too runs as root of a user namespace of its own, never
	// the node's.
	pod.Spec.HostUsers = ptr(false)
	return pod
}

// workspacePod is a workspace's pod: the workbench (or the launcher's
// command) in a user namespace of its own, on a read-only root with sized
// writable places, every capability dropped but WorkspaceCaps, the
// episode namespaces' seccomp profile, its run directory an emptyDir.
func (d *Driver) workspacePod(ns string, p *campaign.Plan, ag campaign.AgentPlan) *corev1.Pod {
	env := []corev1.EnvVar{}
	for _, k := range slices.Sorted(maps.Keys(ag.Env)) {
		env = append(env, corev1.EnvVar{Name: k, Value: ag.Env[k]})
	}
	if ag.NeedsKey {
		env = append(env, secretEnv(p.Server.Spec.APIKeyEnv, apiKeyKey))
	}
	cmd := slices.Clone(ag.Spec.Command)
	var ready []string
	if ag.NeedsKey {
		// The workbench listens on the pod's loopback too, beside its
		// socket: the driver's way in is pods/portforward (containerd
		// dials the pod's localhost; the gate sees the forward as the
		// overflow uid, outside the episode space). The readiness probe is
		// an exec: the kubelet's own probes dial from the node's network
		// namespace.
		cmd = append(cmd, "--listen", fmt.Sprintf("127.0.0.1:%d", WorkbenchPort))
		ready = []string{campaign.WorkbenchBinary, "probe", "--unix", campaign.WorkbenchSocket, "--expect-status", "200", "http://workbench/health"}
	}
	volumes := []corev1.Volume{}
	mounts := []corev1.VolumeMount{}
	for _, v := range []struct {
		name, path string
		size       string
	}{
		{"run-workbench", campaign.WorkbenchRunDir, "64Mi"},
		{"tmp", "/tmp", "256Mi"}, {"var-tmp", "/var/tmp", "64Mi"}, {"shm", "/dev/shm", "64Mi"}, {"run", "/run", "16Mi"},
		{"episodes", episodesDir, "512Mi"},
	} {
		q := resource.MustParse(v.size)
		volumes = append(volumes, corev1.Volume{Name: v.name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &q}}})
		mounts = append(mounts, corev1.VolumeMount{Name: v.name, MountPath: v.path})
	}
	caps := []corev1.Capability{"CHOWN", "KILL", "SETGID", "SETUID"}
	sc := &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr(false), ReadOnlyRootFilesystem: ptr(true),
		Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: caps},
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	if d.cfg.SeccompProfile != "" {
		sc.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr(d.cfg.SeccompProfile)}
	}
	c := corev1.Container{
		Name: "workspace", Image: imageRef(ag.Spec.Image), ImagePullPolicy: corev1.PullNever, Args: cmd, Env: env,
		VolumeMounts: mounts, SecurityContext: sc,
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}},
	}
	if ready != nil {
		c.ReadinessProbe = execProbe(ready)
	}
	pod := d.pod(ns, workspacePod(ag), c, volumes)
	if d.unplaced {
		pod.Spec.NodeName = ""
	}
	pod.Spec.HostUsers = ptr(false)
	// A System V shared memory segment no process has attached goes at
	// once, as on Docker. The size bounds Docker sets (kernel.shmmax,
	// shmall) are sysctls Pod Security "baseline" forbids; a segment's
	// pages are charged to the pod's memory limit, which the kubelet's
	// cgroups enforce.
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "kernel.shm_rmid_forced", Value: "1"}}}
	// An emptyDir is made 0777, and the workbench refuses a socket
	// directory that grants anything to group or others: an init
	// container of the same image and hardening makes it 0700, and the
	// episodes' tree 0711 as Docker's tmpfs is (episode uids may not make
	// or rename what is in it).
	chmod := func(name, volume, mode, dir string) corev1.Container {
		return corev1.Container{Name: name, Image: c.Image, ImagePullPolicy: corev1.PullNever, Command: []string{"chmod", mode, dir}, SecurityContext: sc,
			VolumeMounts: []corev1.VolumeMount{{Name: volume, MountPath: dir}}}
	}
	pod.Spec.InitContainers = []corev1.Container{chmod("run-dir", "run-workbench", "0700", campaign.WorkbenchRunDir), chmod("episodes-dir", "episodes", "0711", episodesDir)}
	return pod
}

// pod is a pod of the namespace running c: no service-account token, no
// service links, never restarted, quick to end, on NodeName when set.
func (d *Driver) pod(ns, name string, c corev1.Container, volumes []corev1.Volume) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{c}, Volumes: volumes,
			ServiceAccountName: serviceAccountName, AutomountServiceAccountToken: ptr(false),
			EnableServiceLinks: ptr(false), RestartPolicy: corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr(int64(2)), NodeName: d.cfg.NodeName, DNSPolicy: corev1.DNSDefault,
		},
	}
}

// imageRef is how a pod names an image the plan pinned to its id: the
// node's runtime holds it under that digest (imagePullPolicy Never: a
// node that lacks it fails the pod, it is never pulled).
func imageRef(ref string) string { return ref }

func secretEnv(name, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secretName}, Key: key}}}
}

func execProbe(cmd []string) *corev1.Probe {
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: cmd}},
		PeriodSeconds: 1, TimeoutSeconds: 5, FailureThreshold: 3}
}

func ptr[T any](v T) *T { return &v }
