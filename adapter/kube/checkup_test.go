//go:build kube

package kube_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentpen/agentpen/adapter/kube"
	"github.com/agentpen/agentpen/internal/testkit/kuberig"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TestCheckupOnTheNode: the node's administrator may make every call
// custody needs and the node is Ready; a service account no role binds
// is denied every one of them, and the checkup says so (nothing is
// created by asking).
func TestCheckupOnTheNode(t *testing.T) {
	d := open(t)
	c, err := d.Checkup(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Usable(); err != nil || len(c.Nodes) != 1 || c.Nodes[0].Name != kuberig.NodeName || c.Identity != d.Info().Runtime.ID {
		t.Fatalf("the administrator's checkup: %+v (%v)", c, err)
	}

	// A user who may read namespaces and nodes and nothing else: a
	// service account bound to a cluster role of the test's own, its
	// token requested for ten minutes.
	cs, _ := kuberig.Client(t)
	name := fmt.Sprintf("agentpen-checkup-%d", time.Now().UnixNano()%1e9)
	ctx := t.Context()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	if _, err := cs.CoreV1().ServiceAccounts(name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "reader"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list"}},
	}}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.RbacV1().ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "reader", Namespace: name}}}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	ttl := int64(600)
	tok, err := cs.CoreV1().ServiceAccounts(name).CreateToken(ctx, "reader", &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &ttl}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conf, err := clientcmd.LoadFromFile(os.Getenv("KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ai := range conf.AuthInfos {
		*ai = clientcmdapi.AuthInfo{Token: tok.Status.Token}
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*conf, kubeconfig); err != nil {
		t.Fatal(err)
	}
	rd, err := kube.Open(ctx, kube.Config{Kubeconfig: kubeconfig, NodeName: kuberig.NodeName})
	if err != nil {
		t.Fatal(err)
	}
	c, err = rd.Checkup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Denied) != len(kube.Permissions())-3 || slices.Contains(c.Denied, "get namespaces") || !slices.Contains(c.Denied, "patch pods") {
		t.Fatalf("the reader's denied permissions: %q", c.Denied)
	}
	if err := c.Usable(); err == nil || !strings.Contains(err.Error(), "may not list namespaces") {
		t.Fatalf("the reader's cluster is usable: %v", err)
	}
}
