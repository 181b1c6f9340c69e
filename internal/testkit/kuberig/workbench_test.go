//go:build kube

package kuberig_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/agentpen/agentpen/adapter/docker"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/kuberig"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/internal/testkit/workbenchtest"
	"github.com/agentpen/agentpen/workbench/client"
	"github.com/agentpen/agentpen/workbench/results"
	"github.com/agentpen/agentpen/workbench/sandbox"
)

// wbPort is the workbench's TCP listener on the pod's loopback, which
// pods/portforward reaches (the forward dials the port inside the pod's
// network namespace; a unix socket it cannot reach).
const wbPort = 8765

// spikeTask is the task the workspace pod is bound to.
const spikeTask = "software/median@2"

// workbenchPod is a workspace as a pod: the workbench image under
// hostUsers: false with the workspace's command (campaign.WorkbenchCommand
// without a remote grader, plus the loopback TCP listener), capabilities
// (docker.WorkspaceCaps), read-only root, writable places (memory
// emptyDirs sized as adapter's tmpfs), IPC sysctls and memory limit as on
// Docker; the run directory /run/workbench is an emptyDir where the bind
// file, the socket and the results file live. seccomp is its profile.
func workbenchPod(name, image string, seccomp *corev1.SeccompProfile) *corev1.Pod {
	no, yes, grace := false, true, int64(2)
	caps := make([]corev1.Capability, 0, len(docker.WorkspaceCaps))
	for _, c := range docker.WorkspaceCaps {
		caps = append(caps, corev1.Capability(strings.TrimPrefix(c, "CAP_")))
	}
	mem := func(size string) corev1.VolumeSource {
		q := resource.MustParse(size)
		return corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &q}}
	}
	sc := &corev1.SecurityContext{
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: caps},
		AllowPrivilegeEscalation: &no,
		ReadOnlyRootFilesystem:   &yes,
		SeccompProfile:           seccomp,
	}
	runDir := corev1.VolumeMount{Name: "run-workbench", MountPath: campaign.WorkbenchRunDir}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			NodeName:                      kuberig.NodeName,
			HostUsers:                     &no,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			TerminationGracePeriodSeconds: &grace,
			RestartPolicy:                 corev1.RestartPolicyNever,
			DNSPolicy:                     corev1.DNSDefault,
			SecurityContext: &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{
				{Name: "kernel.shmmax", Value: "67108864"}, {Name: "kernel.shmall", Value: "16384"}, {Name: "kernel.shm_rmid_forced", Value: "1"},
			}},
			// An emptyDir is made 0777, and the workbench refuses a socket
			// directory that grants anything to group or others; on Docker the
			// run directory is a host directory made 0700.
			InitContainers: []corev1.Container{{
				Name:            "run-dir",
				Image:           image,
				ImagePullPolicy: corev1.PullNever,
				Command:         []string{"chmod", "0700", campaign.WorkbenchRunDir},
				SecurityContext: sc,
				VolumeMounts:    []corev1.VolumeMount{runDir},
			}},
			Containers: []corev1.Container{{
				Name:            "workspace",
				Image:           image,
				ImagePullPolicy: corev1.PullNever,
				Args: []string{"serve", "--listen", "unix://" + campaign.WorkbenchSocket, "--listen", "127.0.0.1:" + strconv.Itoa(wbPort),
					"--task-file", campaign.WorkbenchTaskFile, "--results-file", campaign.WorkbenchResultsFile},
				SecurityContext: sc,
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
					corev1.ResourceMemory: *resource.NewQuantity(docker.WorkspaceMemory, resource.BinarySI),
				}},
				ReadinessProbe: &corev1.Probe{
					// An exec probe: the kubelet's TCP and HTTP probes dial from the
					// node's network namespace, not the pod's loopback.
					ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{
						"/usr/local/bin/workbench", "probe", "--unix", campaign.WorkbenchSocket, "http://workbench/health"}}},
					PeriodSeconds: 1,
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "tmp", MountPath: "/tmp"}, {Name: "var-tmp", MountPath: "/var/tmp"}, {Name: "shm", MountPath: "/dev/shm"},
					{Name: "run", MountPath: "/run"}, {Name: "agent-workbench", MountPath: "/run/agent-workbench"},
					runDir,
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "tmp", VolumeSource: mem("256Mi")}, {Name: "var-tmp", VolumeSource: mem("64Mi")}, {Name: "shm", VolumeSource: mem("64Mi")},
				{Name: "run", VolumeSource: mem("16Mi")}, {Name: "agent-workbench", VolumeSource: mem("512Mi")},
				{Name: "run-workbench", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		},
	}
}

func localhostSeccomp() *corev1.SeccompProfile {
	p := kuberig.SeccompProfile
	return &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: &p}
}

// TestWorkbenchPodEpisode is the spike of issue 38: a workspace pod
// (hostUsers: false, the Localhost seccomp profile) bound to its task by
// a bind file written through pods/exec, one oracle episode played
// through pods/portforward at reward 1.0 and recorded in the results
// file, and the connection gate on the forwarded listener: it takes the
// forward (whose end in the pod is the container runtime's, a host uid
// the pod's user namespace does not map) and still refuses an episode uid
// on the same listener, while a uid outside the episode space passes.
func TestWorkbenchPodEpisode(t *testing.T) {
	cs, cfg := kuberig.Client(t)
	ctx := testenv.Context(t)
	ns := kuberig.Namespace(t, cs)
	image := kuberig.Image(testenv.WorkbenchImage())

	start := time.Now()
	pod, err := cs.CoreV1().Pods(ns).Create(ctx, workbenchPod("workspace", image, localhostSeccomp()), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := kuberig.WaitPod(t, cs, ns, pod.Name, "running and ready", kuberig.Running)
	t.Logf("workspace pod running and ready %v after its create", time.Since(start).Round(10*time.Millisecond))
	st := p.Status.ContainerStatuses[0]
	t.Logf("status: image %s, imageID %s", st.Image, st.ImageID)

	execIn := func(stdin string, cmd ...string) string {
		t.Helper()
		var in io.Reader
		if stdin != "" {
			in = strings.NewReader(stdin)
		}
		out, stderr, err := kuberig.Exec(ctx, cs, cfg, ns, pod.Name, "workspace", in, cmd...)
		if err != nil {
			t.Fatalf("exec %q: %v (stderr %q)", cmd, err, stderr)
		}
		return out
	}
	t.Logf("uid_map of the workspace: %q", strings.TrimSpace(execIn("", "cat", "/proc/self/uid_map")))
	t.Logf("seccomp of the workbench (pid 1): %q", strings.TrimSpace(execIn("", "grep", "^Seccomp", "/proc/1/status")))

	// The bind file, as agentpen writes it on Docker before the start:
	// the task id, mode 0400, owned by the server's user (container root).
	execIn(spikeTask+"\n", "sh", "-c", "umask 0377 && cat >"+campaign.WorkbenchTaskFile)

	addr := kuberig.Forward(t, cfg, ns, pod.Name, wbPort)
	s, err := client.Dial(ctx, "http://"+addr)
	if err != nil {
		t.Fatalf("dial the workbench through the forward %s: %v", addr, err)
	}
	t.Cleanup(func() { s.Close() })
	if err := workbenchtest.PlayOracle(ctx, s, spikeTask); err != nil {
		t.Fatalf("oracle episode through pods/portforward: %v", err)
	}

	// The forward's end in the pod, while the session is open: the
	// socket whose remote end is the workbench's port, as the pod's user
	// namespace sees its owner (the gate's view: sock_diag and
	// /proc/net/tcp report the same uid).
	uids := forwardUIDs(t, execIn("", "cat", "/proc/net/tcp", "/proc/net/tcp6"), wbPort)
	if len(uids) == 0 {
		t.Fatalf("no client socket to port %d in the pod while a forwarded session is open", wbPort)
	}
	for _, uid := range uids {
		if sandbox.IsSandboxUID(int(uid)) {
			t.Errorf("the forward's end in the pod is owned by uid %d, an episode uid", uid)
		}
	}
	t.Logf("the forward's end in the pod is owned by uid %v (overflow uid 65534: the host uid is not mapped in the pod)", uids)

	// Episode uid and a control on the same listener, from inside the pod.
	episodeUID := sandbox.DefaultRange.Base
	if got := connectAs(t, execIn, episodeUID); got != "refused" {
		t.Errorf("a connection from episode uid %d to the forwarded listener: %s, want refused", episodeUID, got)
	}
	if got := connectAs(t, execIn, 1000); got != "served" {
		t.Errorf("a connection from uid 1000 (outside the episode space) to the forwarded listener: %s, want served", got)
	}

	// The results file in the run directory holds the episode.
	var recs []results.Record
	sc := bufio.NewScanner(strings.NewReader(execIn("", "cat", campaign.WorkbenchResultsFile)))
	for sc.Scan() {
		var r results.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("results line %q: %v", sc.Text(), err)
		}
		recs = append(recs, r)
	}
	if len(recs) != 1 || recs[0].Reward != 1.0 {
		t.Errorf("results file: %+v, want one episode at reward 1.0", recs)
	}
}

// connectAs connects to the workbench's loopback port from inside the pod
// as uid (kuberig.ConnectAsCommand).
func connectAs(t *testing.T, execIn func(string, ...string) string, uid int) string {
	t.Helper()
	return strings.TrimSpace(execIn("", kuberig.ConnectAsCommand(uid, wbPort)...))
}

// forwardUIDs reads /proc/net/tcp and tcp6 text for established sockets
// whose remote port is port (the clients of that port) and returns their
// owners' uids.
func forwardUIDs(t *testing.T, tables string, port int) []uint32 {
	t.Helper()
	var uids []uint32
	want := fmt.Sprintf(":%04X", port)
	for _, line := range strings.Split(tables, "\n") {
		f := strings.Fields(line)
		if len(f) < 8 || f[0] == "sl" || f[3] != "01" || !strings.HasSuffix(f[2], want) {
			continue
		}
		uid, err := strconv.ParseUint(f[7], 10, 32)
		if err != nil {
			t.Fatalf("uid in %q: %v", line, err)
		}
		uids = append(uids, uint32(uid))
	}
	return uids
}

// TestWorkbenchPodNeedsProfile is the control of the Localhost profile:
// under the runtime's default profile (which denies the namespace calls,
// as Docker's does) the workbench refuses to start its namespaces
// sandbox, so a workspace pod that runs is one whose profile loaded.
func TestWorkbenchPodNeedsProfile(t *testing.T) {
	cs, _ := kuberig.Client(t)
	ctx := testenv.Context(t)
	ns := kuberig.Namespace(t, cs)
	pod := workbenchPod("default-profile", kuberig.Image(testenv.WorkbenchImage()),
		&corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault})
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var p *corev1.Pod
	testenv.WaitFor(t, "the workbench under the default profile to exit", func() bool {
		var err error
		p, err = cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if kuberig.Running(p) {
			t.Fatal("the workbench runs under the runtime's default seccomp profile: it must refuse without the namespace calls")
		}
		return p.Status.Phase == corev1.PodFailed
	})
	logs := podLogs(t, cs, ns, pod.Name)
	if !strings.Contains(logs, "user namespaces") {
		t.Errorf("the workbench exited under the default profile without naming user namespaces:\n%s", logs)
	}
}

func podLogs(t *testing.T, cs kubernetes.Interface, ns, name string) string {
	t.Helper()
	b, err := cs.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).Do(testenv.Context(t)).Raw()
	if err != nil {
		t.Fatalf("logs of %s/%s: %v", ns, name, err)
	}
	return string(b)
}

// TestImageReferences records which image references a pod with
// imagePullPolicy Never runs after ctr import of a docker save archive,
// and what the status reports for each, beside the rootless daemon's
// image id.
func TestImageReferences(t *testing.T) {
	cs, _ := kuberig.Client(t)
	testenv.RequireDocker(t)
	ctx := testenv.Context(t)
	ns := kuberig.Namespace(t, cs)
	out, err := exec.CommandContext(ctx, "docker", "image", "inspect", "--format", "{{.Id}}", kuberig.PythonBase).Output()
	if err != nil {
		t.Fatalf("docker image inspect %s: %v", kuberig.PythonBase, err)
	}
	dockerID := strings.TrimSpace(string(out))

	run := func(name, ref string) (*corev1.Pod, string) {
		no, grace := false, int64(1)
		_, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{
				NodeName: kuberig.NodeName, HostUsers: &no, AutomountServiceAccountToken: &no, TerminationGracePeriodSeconds: &grace,
				Containers: []corev1.Container{{Name: "main", Image: ref, ImagePullPolicy: corev1.PullNever, Command: []string{"sleep", "3600"}}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			return nil, "create refused: " + err.Error()
		}
		var p *corev1.Pod
		var why string
		testenv.WaitFor(t, "pod "+name+" to run or fail", func() bool {
			p, err = cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if kuberig.Running(p) {
				return true
			}
			for _, c := range p.Status.ContainerStatuses {
				if w := c.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" {
					why = w.Reason + ": " + w.Message
					return true
				}
			}
			return false
		})
		return p, why
	}

	start := time.Now()
	p, why := run("by-name", kuberig.Image(kuberig.PythonBase))
	if why != "" {
		t.Fatalf("the qualified name %s does not run: %s", kuberig.Image(kuberig.PythonBase), why)
	}
	t.Logf("pod of %s running %v after its create", kuberig.Image(kuberig.PythonBase), time.Since(start).Round(10*time.Millisecond))
	st := p.Status.ContainerStatuses[0]
	t.Logf("by name: image %q imageID %q; docker image id %q", st.Image, st.ImageID, dockerID)

	refs := map[string]string{"short": kuberig.PythonBase, "image-id": dockerID, "bare-id": strings.TrimPrefix(dockerID, "sha256:")}
	if at := strings.Index(st.ImageID, "@sha256:"); at > 0 {
		refs["digest"] = st.ImageID
	}
	for _, k := range []string{"short", "image-id", "bare-id", "digest"} {
		ref, ok := refs[k]
		if !ok {
			continue
		}
		p, why := run("by-"+k, ref)
		if why != "" {
			t.Logf("%s reference %q: does not run: %s", k, ref, why)
			continue
		}
		st := p.Status.ContainerStatuses[0]
		t.Logf("%s reference %q: runs; status image %q imageID %q", k, ref, st.Image, st.ImageID)
	}
}
