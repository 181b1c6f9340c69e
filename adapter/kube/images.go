package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/agentpen/agentpen/api"
	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/campaign"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A cluster's images are its nodes': the API server knows them from each
// node's status (the kubelet reports its runtime's images, each under its
// names: tags and repo@sha256 digests). A pod names the image by what the
// plan pinned, with imagePullPolicy Never: a node that lacks it fails the
// pod at once (Ready says so), it is never pulled.

// nodes are the nodes pods may run on: NodeName's, or every node.
func (d *Driver) nodes(ctx context.Context) ([]corev1.Node, error) {
	if d.cfg.NodeName != "" {
		n, err := d.cs.CoreV1().Nodes().Get(ctx, d.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return nil, classify(fmt.Errorf("node %s: %w", d.cfg.NodeName, err))
		}
		return []corev1.Node{*n}, nil
	}
	l, err := d.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, classify(fmt.Errorf("list nodes: %w", err))
	}
	return l.Items, nil
}

// nodeImages are the images of the nodes pods may run on.
func (d *Driver) nodeImages(ctx context.Context) ([]corev1.ContainerImage, error) {
	nodes, err := d.nodes(ctx)
	if err != nil {
		return nil, err
	}
	var out []corev1.ContainerImage
	for _, n := range nodes {
		out = append(out, n.Status.Images...)
	}
	return out, nil
}

// Resolve finds a tag among the nodes' images and answers with the name
// the nodes hold it under (campaign.QualifiedName), which a pod names
// with imagePullPolicy Never. A node reports an image by its
// names alone, not its id, and an image imported from a Docker archive
// has no repository digest: the image a pod runs is proven from its
// status (containerStatuses[].imageID, the image's id), never assumed.
func (d *Driver) Resolve(ctx context.Context, ref string) (string, error) {
	imgs, err := d.nodeImages(ctx)
	if err != nil {
		return "", err
	}
	want := campaign.QualifiedName(ref)
	for _, img := range imgs {
		if want != "" && slices.Contains(img.Names, want) {
			return want, nil
		}
	}
	return "", driver.Kind(fmt.Sprintf("no such image on the cluster's nodes: %s (agentpen never pulls; import it into each node's runtime: scripts/kube-node.sh does for its node)", ref), driver.ErrNotFound)
}

// Images lists the nodes' images by their tags.
func (d *Driver) Images(ctx context.Context) ([]api.Image, error) {
	imgs, err := d.nodeImages(ctx)
	if err != nil {
		return nil, err
	}
	out := []api.Image{}
	for _, img := range imgs {
		var tags []string
		id := ""
		for _, n := range img.Names {
			if strings.Contains(n, "@") {
				id = n
			} else {
				tags = append(tags, n)
			}
		}
		if len(tags) == 0 {
			continue
		}
		slices.Sort(tags)
		out = append(out, api.Image{ID: id, Tags: tags})
	}
	slices.SortFunc(out, func(x, y api.Image) int { return strings.Compare(x.ID, y.ID) })
	return out, nil
}

// Settings are the hardening of the pods' containers, by role, in the
// attestation's terms: read from the pods a layout of p makes.
func (d *Driver) Settings(p *campaign.Plan) map[string]attest.RoleSettings {
	out := map[string]attest.RoleSettings{campaign.RoleServer: settingsOf(d.serverPod("", p, driver.BringUp{}))}
	if len(p.Agents) > 0 {
		out[campaign.RoleWork] = settingsOf(d.workspacePod("", p, p.Agents[0]))
	}
	return out
}
