//go:build kube

package kube_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/kuberig"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestForeignsInTheCampaignsPods: another client of the cluster adds
// what the campaign did not make to its namespace and its pods; each must
// make the attestation fail. (Found by the review of issue 38.)
//
//   - a pod in the campaign's namespace carrying the role label the
//     campaign's policies select by (io.agentpen.role=server) but not the
//     campaign label: the policies let every workspace reach it on the
//     grader's port, and Evidence lists pods by the campaign label only;
//   - an ephemeral container added to the grader pod (pods/ephemeralcontainers):
//     Evidence counts spec.containers only.
func TestForeignsInTheCampaignsPods(t *testing.T) {
	d, h, ctx, id := onTheNode(t, "rv38")
	s := spec(t, d, id, 1)
	image := s.Workspaces[0].Image
	if _, err := h.BringUp(ctx, s); err != nil {
		t.Fatal(err)
	}
	src, _, rep, err := h.Observe(ctx, id, adapter.AttestOptions{})
	if err != nil || !rep.OK {
		t.Fatalf("the campaign does not attest: %v %v", err, rep.FailureLines())
	}
	var ns, grader string
	for _, r := range campaign.Resources(src.Records) {
		if r.ID == "" || r.Removed {
			continue
		}
		switch {
		case r.Kind == campaign.KindNamespace:
			ns = r.Name
		case r.Kind == campaign.KindContainer && r.Labels[campaign.LabelRole] == campaign.RoleServer:
			grader = r.Name[strings.Index(r.Name, "/")+1:]
		}
	}
	cs, _ := kuberig.Client(t)
	sc := &corev1.SecurityContext{AllowPrivilegeEscalation: ptrTo(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}

	t.Run("pod_with_the_role_label_only", func(t *testing.T) {
		foreign := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "impostor", Namespace: ns,
			Labels: map[string]string{campaign.LabelRole: campaign.RoleServer}},
			Spec: corev1.PodSpec{NodeName: kuberig.NodeName, ServiceAccountName: "agentpen", AutomountServiceAccountToken: ptrTo(false), Containers: []corev1.Container{{
				Name: "x", Image: image, ImagePullPolicy: corev1.PullNever, Command: []string{"sleep", "infinity"}, SecurityContext: sc}}}}
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		defer cs.CoreV1().Pods(ns).Delete(context.Background(), foreign.Name, metav1.DeleteOptions{GracePeriodSeconds: ptrTo(int64(0))})
		rep, err := h.Attest(ctx, id, adapter.AttestOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK {
			t.Errorf("attested ok with a foreign pod %s/%s that the campaign's policies select as its grader", ns, foreign.Name)
		}
	})

	t.Run("ephemeral_container_in_the_grader_pod", func(t *testing.T) {
		pod, err := cs.CoreV1().Pods(ns).Get(ctx, grader, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers, corev1.EphemeralContainer{
			TargetContainerName: pod.Spec.Containers[0].Name,
			EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debugger", Image: image, ImagePullPolicy: corev1.PullNever,
				Command: []string{"sleep", "infinity"}, SecurityContext: sc}})
		if _, err := cs.CoreV1().Pods(ns).UpdateEphemeralContainers(ctx, grader, pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		rep, err := h.Attest(ctx, id, adapter.AttestOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK {
			t.Errorf("attested ok with a foreign (ephemeral) container %q in the grader pod, sharing its process namespace", "debugger")
		}
	})
}

func ptrTo[T any](v T) *T { return &v }
