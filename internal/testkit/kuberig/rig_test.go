//go:build kube

package kuberig_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentpen/agentpen/internal/testkit/kuberig"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

// TestRig is the node's smoke test: the API server reports the version
// the node script stamps, the node is Ready, a user-namespaced pod of an
// imported image runs and execs, and a deleted namespace with a pod and a
// ConfigMap in it finishes (the namespace controller runs).
func TestRig(t *testing.T) {
	cs, cfg := kuberig.Client(t)
	ctx := testenv.Context(t)

	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != "v1.37.2" {
		t.Errorf("server version %q, want v1.37.2 (the node script's version stamp)", v.GitVersion)
	}

	node, err := cs.CoreV1().Nodes().Get(ctx, kuberig.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("node %s: %v", kuberig.NodeName, err)
	}
	ready := false
	for _, c := range node.Status.Conditions {
		ready = ready || c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
	}
	if !ready {
		t.Fatalf("node %s is not Ready: %+v", kuberig.NodeName, node.Status.Conditions)
	}

	ns := kuberig.Namespace(t, cs)
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "content"}, Data: map[string]string{"k": "v"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	no, grace := false, int64(1)
	pod, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "sleeper"},
		Spec: corev1.PodSpec{
			NodeName:                      kuberig.NodeName,
			HostUsers:                     &no,
			AutomountServiceAccountToken:  &no,
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name:            "main",
				Image:           kuberig.Image(kuberig.PythonBase),
				ImagePullPolicy: corev1.PullNever,
				Command:         []string{"sleep", "3600"},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kuberig.WaitPod(t, cs, ns, pod.Name, "running", kuberig.Running)
	out, stderr, err := kuberig.Exec(ctx, cs, cfg, ns, pod.Name, "main", nil, "cat", "/proc/self/uid_map")
	if err != nil {
		t.Fatalf("exec: %v (stderr %q)", err, stderr)
	}
	// hostUsers: false maps the container's uid 0 to an unprivileged
	// host uid; the host's own namespace maps 0 to 0.
	f := strings.Fields(out)
	if len(f) != 3 || f[0] != "0" || f[1] == "0" {
		t.Errorf("uid_map in a hostUsers: false pod is %q, want 0 mapped to a host uid other than 0", out)
	}

	// The namespace controller empties a deleted namespace and removes
	// it; without it the namespace stays Terminating.
	nsObj, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := kuberig.DeleteNamespace(ctx, cs, ns, nsObj.UID); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "content", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the ConfigMap of deleted namespace %s: %v, want not found", ns, err)
	}
	t.Logf("namespace %s with a running pod deleted in %v", ns, time.Since(start).Round(10*time.Millisecond))
}
