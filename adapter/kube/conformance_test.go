//go:build kube

package kube_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/agentpen/agentpen/adapter/drivertest"
	"github.com/agentpen/agentpen/adapter/kube"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/kuberig"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

func TestMain(m *testing.M) { drivertest.Main(m, reopen) }

// reopen opens the driver a conformance child is told of.
func reopen() (driver.Driver, error) {
	return kube.Open(context.Background(), kube.Config{Kubeconfig: os.Getenv("KUBECONFIG"), NodeName: kuberig.NodeName, SeccompProfile: kuberig.SeccompProfile})
}

// open is the driver on the rig's cluster.
func open(t testing.TB) *kube.Driver {
	t.Helper()
	kuberig.Config(t) // fails, never skips, without the rig
	d, err := kube.Open(t.Context(), kube.Config{Kubeconfig: os.Getenv("KUBECONFIG"), NodeName: kuberig.NodeName, SeccompProfile: kuberig.SeccompProfile})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// hand is another client of the cluster: client-go as anyone may use it.
type hand struct {
	cs    kubernetes.Interface
	image string
}

func split(r campaign.Resource) (ns, name string) {
	if r.Kind == campaign.KindNamespace {
		return "", r.Name
	}
	ns, name, _ = strings.Cut(r.Name, "/")
	return ns, name
}

// Remove removes the object by UID, its finalizers first (another
// client need not honour agentpen's custody).
func (h hand) Remove(ctx context.Context, r campaign.Resource) error {
	ns, name := split(r)
	uid := types.UID(r.ID)
	opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}, GracePeriodSeconds: new(int64)}
	strip := []byte(`{"metadata":{"finalizers":null}}`)
	switch r.Kind {
	case campaign.KindContainer:
		h.cs.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, strip, metav1.PatchOptions{})
		return h.cs.CoreV1().Pods(ns).Delete(ctx, name, opts)
	case campaign.KindSecret:
		h.cs.CoreV1().Secrets(ns).Patch(ctx, name, types.MergePatchType, strip, metav1.PatchOptions{})
		return h.cs.CoreV1().Secrets(ns).Delete(ctx, name, opts)
	case campaign.KindServiceAccount:
		h.cs.CoreV1().ServiceAccounts(ns).Patch(ctx, name, types.MergePatchType, strip, metav1.PatchOptions{})
		return h.cs.CoreV1().ServiceAccounts(ns).Delete(ctx, name, opts)
	case campaign.KindNetworkPolicy:
		h.cs.NetworkingV1().NetworkPolicies(ns).Patch(ctx, name, types.MergePatchType, strip, metav1.PatchOptions{})
		return h.cs.NetworkingV1().NetworkPolicies(ns).Delete(ctx, name, opts)
	case campaign.KindNamespace:
		h.cs.CoreV1().Namespaces().Patch(ctx, name, types.MergePatchType, strip, metav1.PatchOptions{})
		return h.cs.CoreV1().Namespaces().Delete(ctx, name, opts)
	}
	return fmt.Errorf("remove a %s by hand: %w", r.Kind, errors.ErrUnsupported)
}

func (h hand) Occupy(ctx context.Context, kind campaign.Kind, name string) (string, error) {
	return h.Copy(ctx, campaign.Resource{Kind: kind}, name, nil)
}

// Copy makes a pod (or a secret) named name with labels in the name's
// namespace.
func (h hand) Copy(ctx context.Context, r campaign.Resource, name string, labels map[string]string) (string, error) {
	ns, n := split(campaign.Resource{Kind: r.Kind, Name: name})
	switch r.Kind {
	case campaign.KindContainer:
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: ns, Labels: labels}, Spec: corev1.PodSpec{
			NodeName: kuberig.NodeName, RestartPolicy: corev1.RestartPolicyNever, AutomountServiceAccountToken: new(bool),
			ServiceAccountName: "agentpen", TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{Name: "c", Image: h.image, ImagePullPolicy: corev1.PullNever, Command: []string{"sleep", "3600"}}}}}
		out, err := h.cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			return "", err
		}
		return string(out.UID), nil
	case campaign.KindSecret:
		out, err := h.cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: ns, Labels: labels}}, metav1.CreateOptions{})
		if err != nil {
			return "", err
		}
		return string(out.UID), nil
	}
	return "", fmt.Errorf("copy a %s: %w", r.Kind, errors.ErrUnsupported)
}

// Relabel replaces the pod's labels in place.
func (h hand) Relabel(ctx context.Context, r campaign.Resource, labels map[string]string) error {
	if r.ID == "none" {
		return nil // Mutants asks whether relabelling is possible
	}
	ns, name := split(r)
	pod, err := h.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	pod.Labels = labels
	_, err = h.cs.CoreV1().Pods(ns).Update(ctx, pod, metav1.UpdateOptions{})
	return err
}

// target is the driver on the rig, as the suite drives it.
func target(t *testing.T) drivertest.Target {
	d := open(t)
	cs, _ := kuberig.Client(t)
	image, err := d.Resolve(t.Context(), testenv.WorkbenchImage())
	if err != nil {
		t.Fatalf("the workbench image on the node: %v (make kube-test imports it)", err)
	}
	base, err := d.Resolve(t.Context(), kuberig.PythonBase)
	if err != nil {
		t.Fatalf("the python base on the node: %v", err)
	}
	key := "conformance-key-0123456789abcdef"
	return drivertest.Target{
		Driver:         d,
		Spec:           drivertest.MedianSpec(image),
		Refused:        drivertest.AbsentImageSpec,
		Processes:      true,
		Hand:           hand{cs: cs, image: base},
		Getenv:         func(k string) string { return map[string]string{campaign.DefaultAPIKeyEnv: key}[k] },
		Child:          map[string]string{"KUBECONFIG": os.Getenv("KUBECONFIG")},
		CleanupTimeout: 2 * time.Minute,
	}
}

// TestConformance: the Kubernetes driver keeps every demand of the
// driver conformance suite on the rig's cluster.
func TestConformance(t *testing.T) {
	drivertest.Run(t, target(t))
}

// TestConformanceMutants: on the cluster, every case a driver can fail
// fails on a Kubernetes driver broken the way it guards against.
func TestConformanceMutants(t *testing.T) {
	drivertest.Mutants(t, target(t))
}
