package docker

import (
	"context"
	"slices"
	"strings"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/cleanup"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"golang.org/x/sync/errgroup"
)

// List lists every container (running or not) and network that carries
// all the given labels ("key=value", or "key" for any value). It is how
// agentpen looks for what it may have lost track of, and how it proves
// nothing is left; it never chooses what to remove by itself.
func (d *Driver) List(ctx context.Context, labels ...string) ([]cleanup.Found, error) {
	args := filters.NewArgs()
	for _, l := range labels {
		args.Add("label", l)
	}
	// Both lists at once: they are independent answers.
	var cs []container.Summary
	var ns []network.Summary
	var g errgroup.Group
	g.Go(func() (err error) {
		if cs, err = d.api.ContainerList(ctx, container.ListOptions{All: true, Filters: args}); err != nil {
			return errorf("list containers labelled %v: %w", labels, err)
		}
		return nil
	})
	g.Go(func() (err error) {
		if ns, err = d.api.NetworkList(ctx, network.ListOptions{Filters: args}); err != nil {
			return errorf("list networks labelled %v: %w", labels, err)
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var out []cleanup.Found
	for _, c := range cs {
		name := ""
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		out = append(out, cleanup.Found{Kind: campaign.KindContainer, ID: c.ID, Name: name, Labels: c.Labels})
	}
	for _, n := range ns {
		out = append(out, cleanup.Found{Kind: campaign.KindNetwork, ID: n.ID, Name: n.Name, Labels: n.Labels})
	}
	slices.SortFunc(out, func(x, y cleanup.Found) int {
		return strings.Compare(string(x.Kind)+x.Name+x.ID, string(y.Kind)+y.Name+y.ID)
	})
	return out, nil
}
