// Package kuberig connects cluster tests to the single-node cluster that
// scripts/kube-node.sh runs (make kube-node, make kube-test): a client
// and its REST config from KUBECONFIG, throwaway namespaces, and the
// waits a test needs on pods and namespaces.
//
// Cluster tests carry the build tag kube, so make test, which never
// starts a kubelet, never builds them; make kube-test starts the node,
// runs them with KUBECONFIG set and stops the node. A cluster test fails,
// never skips, when KUBECONFIG is missing or names no answering cluster:
// its only way to run is with the node.
//
// The node has no scheduler (a pod names NodeName), no ServiceAccount
// controllers (Namespace makes the namespace's default ServiceAccount)
// and only the namespace controller of kube-controller-manager (a
// deleted namespace finishes). Its images come from the rootless Docker
// daemon through docker save and ctr import (see Image).
package kuberig

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

// NodeName is the node's name (the kubelet's --hostname-override): pods
// name it, as no scheduler places them.
const NodeName = "localhost"

// SeccompProfile is the workspace seccomp profile the node installs as a
// Localhost profile (docker.WorkspaceSeccomp), relative to the kubelet's
// seccomp directory, as a pod's localhostProfile names it.
const SeccompProfile = "agentpen/workspace.json"

// PythonBase is the base image the node imports beside the workbench's.
const PythonBase = "agentpen/python-base:bookworm"

// Image is how a pod names an image the node imported from the rootless
// daemon: ctr import stores a Docker name as the fully qualified
// reference (docker.io/<repo>:<tag>), which a pod with imagePullPolicy
// Never finds under either form; the qualified one is what
// status.containerStatuses[].image reports.
func Image(name string) string { return "docker.io/" + name }

// Config is the REST config of the cluster KUBECONFIG names. It fails t,
// never skips, when KUBECONFIG is unset or unreadable: run the test with
// make kube-test, or start the node (make kube-node) and export the line
// it prints.
func Config(t testing.TB) *rest.Config {
	t.Helper()
	path := os.Getenv("KUBECONFIG")
	if path == "" {
		t.Fatal("KUBECONFIG is unset: a cluster test runs against the node of scripts/kube-node.sh; run make kube-test, or make kube-node and export the line it prints")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("KUBECONFIG %s: %v", path, err)
	}
	return cfg
}

// Client is a clientset for Config(t). It fails t when the API server
// does not answer.
func Client(t testing.TB) (*kubernetes.Clientset, *rest.Config) {
	t.Helper()
	cfg := Config(t)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("client for %s: %v", cfg.Host, err)
	}
	if _, err := cs.Discovery().ServerVersion(); err != nil {
		t.Fatalf("the API server at %s does not answer: %v (is the node running? scripts/kube-node.sh status)", cfg.Host, err)
	}
	return cs, cfg
}

// Namespace makes a namespace of its own for t (a generated name under
// prefix "agentpen-test-") with its default ServiceAccount, which pods
// need before the API server admits them, and returns its name. At
// cleanup it deletes the namespace and waits until it is gone: the
// namespace controller removed what was in it.
func Namespace(t testing.TB, cs kubernetes.Interface) string {
	t.Helper()
	ctx := testenv.Context(t)
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "agentpen-test-", Labels: map[string]string{"io.agentpen/test": "true"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create a test namespace: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := testenv.CleanupContext(t)
		defer cancel()
		if err := DeleteNamespace(ctx, cs, ns.Name, ns.UID); err != nil {
			t.Errorf("remove test namespace %s: %v", ns.Name, err)
		}
	})
	no := false
	if _, err := cs.CoreV1().ServiceAccounts(ns.Name).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta:                   metav1.ObjectMeta{Name: "default"},
		AutomountServiceAccountToken: &no,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the default ServiceAccount of %s: %v", ns.Name, err)
	}
	return ns.Name
}

// DeleteNamespace deletes namespace name, only while its UID is uid
// (a namespace made again under the name is left alone), and waits until
// it is gone or ctx ends.
func DeleteNamespace(ctx context.Context, cs kubernetes.Interface, name string, uid types.UID) error {
	err := cs.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete namespace %s: %w", name, err)
	}
	for {
		ns, err := cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err), err == nil && ns.UID != uid:
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("namespace %s still there (phase %s): %w", name, ns.Status.Phase, ctx.Err())
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// WaitPod polls pod ns/name (every 250 ms) until cond holds and returns
// it. It fails t at once when the pod can never get there: it failed, a
// container waits for a reason that does not pass (an image the node
// lacks, a spec the runtime refuses), or the kubelet failed to make its
// sandbox three times; and at the test's deadline otherwise. Each
// failure says the pod's phase, its containers' states and its last
// warning event.
func WaitPod(t testing.TB, cs kubernetes.Interface, ns, name, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	ctx := testenv.Context(t)
	for {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get pod %s/%s (waiting for it to be %s): %v", ns, name, what, err)
		}
		if cond(p) {
			return p
		}
		warning, sandboxFailures := podWarnings(ctx, cs, p)
		if why := stuck(p); why != "" || sandboxFailures >= 3 {
			t.Fatalf("pod %s/%s will not become %s: %s; last warning: %s%s", ns, name, what, describe(p), warning, logTail(ctx, cs, p))
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waited until the test's deadline for pod %s/%s to be %s: %s; last warning: %s", ns, name, what, describe(p), warning)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// logTail is the last lines each container of p wrote, for a failure.
func logTail(ctx context.Context, cs kubernetes.Interface, p *corev1.Pod) string {
	var s string
	lines := int64(20)
	for _, c := range p.Spec.Containers {
		b, err := cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name, TailLines: &lines}).Do(ctx).Raw()
		if err == nil && len(b) > 0 {
			s += fmt.Sprintf("\n--- last lines of container %s:\n%s", c.Name, b)
		}
	}
	return s
}

// podWarnings returns the message of p's last warning event and how often
// the kubelet failed to make its sandbox.
func podWarnings(ctx context.Context, cs kubernetes.Interface, p *corev1.Pod) (last string, sandboxFailures int32) {
	evs, err := cs.CoreV1().Events(p.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(p.UID)})
	if err != nil {
		return "events unreadable: " + err.Error(), 0
	}
	var at time.Time
	for _, e := range evs.Items {
		if e.Type != corev1.EventTypeWarning {
			continue
		}
		if e.Reason == "FailedCreatePodSandBox" {
			sandboxFailures += max(e.Count, 1)
		}
		if ts := e.LastTimestamp.Time; last == "" || ts.After(at) {
			last, at = e.Reason+": "+e.Message, ts
		}
	}
	if last == "" {
		last = "none"
	}
	return last, sandboxFailures
}

// Running reports whether every container of p runs and is ready.
func Running(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) == 0 {
		return false
	}
	for _, c := range p.Status.ContainerStatuses {
		if !c.Ready {
			return false
		}
	}
	return true
}

// stuck says why p cannot become running, or "".
func stuck(p *corev1.Pod) string {
	if p.Status.Phase == corev1.PodFailed {
		return describe(p)
	}
	for _, c := range p.Status.ContainerStatuses {
		if w := c.State.Waiting; w != nil {
			switch w.Reason {
			case "ErrImageNeverPull", "CreateContainerConfigError", "CreateContainerError", "InvalidImageName", "RunContainerError", "CrashLoopBackOff":
				return describe(p)
			}
		}
	}
	return ""
}

// describe is p's phase, conditions and container states, for a failure.
func describe(p *corev1.Pod) string {
	if p == nil {
		return "no pod read"
	}
	s := fmt.Sprintf("phase %s", p.Status.Phase)
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			s += fmt.Sprintf("; %s: %s", c.Type, c.Message)
		}
	}
	for _, c := range p.Status.ContainerStatuses {
		switch {
		case c.State.Waiting != nil:
			s += fmt.Sprintf("; %s waiting: %s %s", c.Name, c.State.Waiting.Reason, c.State.Waiting.Message)
		case c.State.Terminated != nil:
			s += fmt.Sprintf("; %s terminated: exit %d %s %s", c.Name, c.State.Terminated.ExitCode, c.State.Terminated.Reason, c.State.Terminated.Message)
		case c.State.Running != nil:
			s += fmt.Sprintf("; %s running (ready %v)", c.Name, c.Ready)
		}
	}
	return s
}
