package docker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/agentpen/agentpen/api"
	"github.com/agentpen/agentpen/campaign"
	"github.com/docker/docker/api/types/image"
)

// Resolve returns the id of the image ref names on the daemon now, never
// pulling: a reference that is an id answers with itself once the daemon
// holds it.
func (d *Driver) Resolve(ctx context.Context, ref string) (string, error) {
	img, err := d.api.ImageInspect(ctx, ref)
	switch err := classify(err); {
	case errors.Is(err, driver.ErrNotFound):
		msg := "no such image on the daemon (agentpen never pulls; build or load it first; agentpen images lists the local ones)"
		if strings.Contains(ref, "@sha256:") {
			msg = "no such image on the daemon: repo@sha256:<digest> must be one of the image's registry digests (RepoDigests), and a locally built image has none; " +
				"name it by its tag or its image id instead: " + campaign.ImageIDCommand + "<repo:tag> (agentpen never pulls)"
		}
		return "", driver.Kind(msg, driver.ErrNotFound)
	case err != nil:
		return "", fmt.Errorf("inspect image %s: %w", ref, err)
	}
	if campaign.Pinned(ref) {
		return ref, nil
	}
	return img.ID, nil
}

// Images lists the daemon's local images a spec can name: every image
// with a tag (an untagged one is a build's leftover), newest first.
func (d *Driver) Images(ctx context.Context) ([]api.Image, error) {
	list, err := d.api.ImageList(ctx, image.ListOptions{})
	if err != nil {
		return nil, errorf("list images: %w", err)
	}
	out := []api.Image{}
	for _, img := range list {
		var tags []string
		for _, t := range img.RepoTags {
			if t != "" && t != "<none>:<none>" {
				tags = append(tags, t)
			}
		}
		if len(tags) == 0 {
			continue
		}
		slices.Sort(tags)
		out = append(out, api.Image{ID: img.ID, Tags: tags, Created: time.Unix(img.Created, 0).UTC(), Workbench: img.Labels[api.WorkbenchLabel]})
	}
	slices.SortStableFunc(out, func(x, y api.Image) int {
		if c := y.Created.Compare(x.Created); c != 0 {
			return c
		}
		return strings.Compare(x.ID, y.ID)
	})
	return out, nil
}
