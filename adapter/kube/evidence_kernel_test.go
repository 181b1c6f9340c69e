package kube

import (
	"context"
	"testing"

	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/agentpen/agentpen/campaign"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
)

// TestEvidenceKernelIsThePodsNode: the runtime's kernel (the
// fingerprint's kernel_version) is the kernel of the node the campaign's
// pods run on. A campaign brought up on node-b and attested by a driver
// configured with node-a (serve restarted with another node) is reported
// as running node-a's kernel: identity reads Config.NodeName's node, and
// nothing compares it with the pods' spec.nodeName. (Review of fabdeba.)
func TestEvidenceKernelIsThePodsNode(t *testing.T) {
	node := func(name, kernel string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KernelVersion: kernel}}}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "agent-1", Namespace: "ns", UID: types.UID("pod-uid-1")},
		Spec: corev1.PodSpec{NodeName: "node-b", Containers: []corev1.Container{{Name: "workspace", Image: "img"}}}}
	cs := fake.NewClientset(node("node-a", "6.1.0-a"), node("node-b", "5.4.0-b"), pod,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: metav1.NamespaceSystem, UID: "ks"}})
	d := &Driver{cfg: Config{NodeName: "node-a"}, rest: &rest.Config{Host: "https://api"}, cs: cs, slots: make(chan struct{}, 4)}
	rt := d.Evidence(context.Background(), driver.EvidenceQuery{CampaignID: "c", Resources: []campaign.Resource{
		{Kind: campaign.KindNamespace, Name: "ns", ID: "ns-uid"},
		{Kind: campaign.KindContainer, Name: "ns/agent-1", ID: "pod-uid-1"},
	}})
	if c := rt.Containers["pod-uid-1"]; c.Pod == nil || c.Pod.Node != "node-b" {
		t.Fatalf("the pod's evidence: %+v", c)
	}
	if got := rt.Daemon.KernelVersion; got == "6.1.0-a" {
		t.Fatalf("the campaign's pods run on node-b (5.4.0-b); the evidence names the kernel %q of the configured node-a", got)
	}
}
