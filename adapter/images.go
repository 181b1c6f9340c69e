package adapter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentpen/agentpen/campaign"
	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
)

// WorkbenchLabel is the label the workbench image carries (the
// Dockerfile sets it), whose value is the workbench's version.
const WorkbenchLabel = "io.agentpen.workbench"

// Prepare checks what a bring-up of p needs before anything is made, and
// makes p ready for it: the variables it copies allowed (EnvPolicy), the
// API key in agentpen's environment (when the default grader or episode
// servers need one), and every image on the
// daemon (never pulled), each tag resolved to the id of the image it
// names now, which the plan runs from then on (campaign.Plan.Pin; the
// spec keeps the tag, the generation's begin record the id). The error is
// a *campaign.ValidationError naming the field for bad input, and wraps
// ErrDaemonUnreachable when the daemon did not answer. BringUp calls it;
// a caller that must refuse bad input at once (the launcher's
// asynchronous create) calls it first, and a plan once pinned stays so.
func (a *Adapter) Prepare(ctx context.Context, p *campaign.Plan) error {
	if err := a.EnvPolicy.Check(p); err != nil {
		return err
	}
	if err := a.checkKey(p); err != nil {
		return err
	}
	ids := map[string]string{}
	fields := p.ImageFields()
	refs := make([]string, 0, len(fields))
	for ref := range fields {
		refs = append(refs, ref)
	}
	slices.Sort(refs)
	for _, ref := range refs {
		img, err := a.api().ImageInspect(ctx, ref)
		switch {
		case cerrdefs.IsNotFound(err):
			msg := "no such image on the daemon (agentpen never pulls; build or load it first; agentpen images lists the local ones)"
			if strings.Contains(ref, "@sha256:") {
				msg = "no such image on the daemon: repo@sha256:<digest> must be one of the image's registry digests (RepoDigests), and a locally built image has none; " +
					"name it by its tag or its image id instead: " + campaign.ImageIDCommand + "<repo:tag> (agentpen never pulls)"
			}
			return &campaign.ValidationError{Field: fields[ref], Value: ref, Msg: msg}
		case err != nil:
			return lost(fmt.Errorf("inspect image %s: %w", ref, err))
		}
		if !campaign.Pinned(ref) {
			ids[ref] = img.ID
		}
	}
	return p.Pin(ids)
}

// Image is one of the daemon's local images, as GET /v1/images and
// agentpen images describe it.
type Image struct {
	ID      string    `json:"id" doc:"The image id (sha256:...): what a spec pins"`
	Tags    []string  `json:"tags" doc:"Its local tags (repo:tag), sorted; a spec may name one, which is resolved to the id at create time"`
	Created time.Time `json:"created" doc:"When it was built"`
	// Workbench is its workbench version (WorkbenchLabel), "" for none.
	Workbench string `json:"workbench,omitempty" doc:"The workbench version the image carries (its io.agentpen.workbench label); absent for an image without the workbench, which cannot run the default grader or episode server"`
}

// Images lists the daemon's local images a spec can name: every image
// with a tag (an untagged one is a build's leftover), newest first. The
// error wraps ErrDaemonUnreachable when the daemon did not answer.
func (a *Adapter) Images(ctx context.Context) ([]Image, error) {
	list, err := a.Docker.api.ImageList(ctx, image.ListOptions{})
	if err != nil {
		return nil, lost(fmt.Errorf("list images: %w", err))
	}
	out := []Image{}
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
		out = append(out, Image{ID: img.ID, Tags: tags, Created: time.Unix(img.Created, 0).UTC(), Workbench: img.Labels[WorkbenchLabel]})
	}
	slices.SortStableFunc(out, func(x, y Image) int {
		if c := y.Created.Compare(x.Created); c != 0 {
			return c
		}
		return strings.Compare(x.ID, y.ID)
	})
	return out, nil
}

// lost marks an error of a daemon call that found nobody answering (the
// daemon stopped, or its socket went away, after Connect): it then wraps
// ErrDaemonUnreachable, which the launcher answers with 503 and the CLI
// with exit status 3, never as bad input.
func lost(err error) error {
	if err == nil || errors.Is(err, ErrDaemonUnreachable) || !client.IsErrConnectionFailed(err) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrDaemonUnreachable, err)
}
