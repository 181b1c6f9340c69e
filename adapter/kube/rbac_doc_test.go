package kube

import (
	"os"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// TestRBACDocIsPermissions: the ClusterRole docs/kubernetes.md gives
// operators grants exactly Permissions: every call the driver makes, and
// nothing else.
func TestRBACDocIsPermissions(t *testing.T) {
	b, err := os.ReadFile("../../docs/kubernetes.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "```yaml\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/kubernetes.md holds no ClusterRole block")
	}
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict([]byte("kind: ClusterRole\n"+block), &role); err != nil {
		t.Fatalf("the ClusterRole block: %v", err)
	}
	var granted []string
	for _, r := range role.Rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				name, sub, _ := strings.Cut(res, "/")
				for _, v := range r.Verbs {
					granted = append(granted, Permission{Verb: v, Group: g, Resource: name, Subresource: sub}.String())
				}
			}
		}
	}
	var need []string
	for _, p := range Permissions() {
		need = append(need, p.String())
	}
	slices.Sort(granted)
	slices.Sort(need)
	if !slices.Equal(granted, need) {
		t.Fatalf("the documented role grants\n  %v\nthe driver needs\n  %v", granted, need)
	}
}
