package kube

import (
	"context"
	"fmt"
	"strings"

	authv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A Permission is one kind of call the driver makes, by the names the API
// server authorizes it under.
type Permission struct {
	Verb, Group, Resource, Subresource string
}

func (p Permission) String() string {
	r := p.Resource
	if p.Subresource != "" {
		r += "/" + p.Subresource
	}
	if p.Group != "" {
		r += "." + p.Group
	}
	return p.Verb + " " + r
}

// Permissions are every call the driver makes: on each kind it holds,
// get, list (across namespaces), create, delete and patch (the finalizer's
// removal); exec and port-forward into pods; and reading nodes (their
// images, their readiness). Custody needs them all: a removal that may
// not delete or patch cannot finish.
func Permissions() []Permission {
	var out []Permission
	for _, r := range []struct{ group, resource string }{
		{"", "namespaces"}, {"", "serviceaccounts"}, {"", "secrets"}, {"", "pods"}, {"networking.k8s.io", "networkpolicies"},
	} {
		for _, verb := range []string{"get", "list", "create", "delete", "patch"} {
			out = append(out, Permission{Verb: verb, Group: r.group, Resource: r.resource})
		}
	}
	return append(out,
		Permission{Verb: "create", Resource: "pods", Subresource: "exec"},
		Permission{Verb: "create", Resource: "pods", Subresource: "portforward"},
		Permission{Verb: "get", Resource: "nodes"},
		Permission{Verb: "list", Resource: "nodes"},
	)
}

// Checkup is what agentpen doctor says of a cluster.
type Checkup struct {
	// Server is the API server's URL, Version its version and Identity
	// the cluster's (its kube-system namespace's UID).
	Server   string `json:"server"`
	Version  string `json:"version"`
	Identity string `json:"identity"`
	// Nodes are the nodes pods may run on (the configured one, or every
	// node) and whether each is Ready.
	Nodes []NodeStatus `json:"nodes"`
	// Denied are the Permissions the kubeconfig's user lacks, as the API
	// server answered a SelfSubjectAccessReview for each.
	Denied []string `json:"denied,omitempty"`
}

// NodeStatus is one node's readiness.
type NodeStatus struct {
	Name  string `json:"name"`
	Ready bool   `json:"ready"`
}

// Usable returns nil when a campaign's custody can run on the cluster:
// every permission granted and a Ready node to run on; otherwise an
// error saying what is missing.
func (c Checkup) Usable() error {
	var why []string
	if len(c.Denied) > 0 {
		why = append(why, "the kubeconfig's user may not "+strings.Join(c.Denied, ", ")+" (grant them, or run as a user that has them)")
	}
	ready := false
	for _, n := range c.Nodes {
		ready = ready || n.Ready
	}
	if !ready {
		why = append(why, "no node to run pods on is Ready")
	}
	if len(why) == 0 {
		return nil
	}
	return fmt.Errorf("kubernetes: %s: %s", c.Server, strings.Join(why, "; "))
}

// Checkup asks the API server what agentpen doctor reports: the
// cluster's identity, the readiness of the nodes pods may run on, and
// whether each Permission is granted. It changes nothing. The error is
// for an API server that does not answer those questions.
func (d *Driver) Checkup(ctx context.Context) (Checkup, error) {
	c := Checkup{Server: d.rest.Host, Version: d.info.Runtime.ServerVersion, Identity: d.info.Runtime.ID}
	nodes, err := d.nodes(ctx)
	if err != nil {
		return c, err
	}
	c.Nodes = []NodeStatus{}
	for _, n := range nodes {
		s := NodeStatus{Name: n.Name}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				s.Ready = cond.Status == corev1.ConditionTrue
			}
		}
		c.Nodes = append(c.Nodes, s)
	}
	for _, p := range Permissions() {
		review := &authv1.SelfSubjectAccessReview{Spec: authv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authv1.ResourceAttributes{Verb: p.Verb, Group: p.Group, Resource: p.Resource, Subresource: p.Subresource}}}
		r, err := d.cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			return c, classify(fmt.Errorf("may the kubeconfig's user %s: %w", p, err))
		}
		if !r.Status.Allowed {
			c.Denied = append(c.Denied, p.String())
		}
	}
	return c, nil
}
