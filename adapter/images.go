package adapter

import (
	"context"
	"errors"
	"slices"

	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/agentpen/agentpen/api"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/store"
)

// Prepare checks what a bring-up of p needs before anything is made, and
// makes p ready for it: the variables it copies allowed (EnvPolicy), the
// API key in agentpen's environment (when the default grader or episode
// servers need one), and every image on the runtime (never pulled), each
// tag resolved to the id of the image it names now, which the plan runs
// from then on (campaign.Plan.Pin; the spec keeps the tag, the
// generation's begin record the id). The error is a
// *campaign.ValidationError naming the field for bad input, and wraps
// ErrDaemonUnreachable when the runtime did not answer. BringUp calls it;
// a caller that must refuse bad input at once (the launcher's
// asynchronous create) calls it first, and a plan once pinned stays so.
func (a *Adapter) Prepare(ctx context.Context, p *campaign.Plan) error {
	if err := a.EnvPolicy.Check(p); err != nil {
		return err
	}
	if err := a.checkKey(p); err != nil {
		return err
	}
	if err := a.Driver.Check(p); err != nil {
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
		id, err := a.Driver.Resolve(ctx, ref)
		switch {
		case errors.Is(err, driver.ErrNotFound):
			return &campaign.ValidationError{Field: fields[ref], Value: ref, Msg: err.Error()}
		case err != nil:
			return err
		}
		if !campaign.Pinned(ref) {
			ids[ref] = id
		}
	}
	return p.Pin(ids)
}

// Images lists the runtime's local images a spec can name, newest first.
// The error wraps ErrDaemonUnreachable when the runtime did not answer.
func (a *Adapter) Images(ctx context.Context) ([]api.Image, error) {
	return a.Driver.Images(ctx)
}

// PlanOptions are the options a new campaign's spec is validated with in
// root (campaign.Validate): its agent-id key, and the most workspaces a
// campaign may have on this engine's runtime.
func (a *Adapter) PlanOptions(root *store.Root) (campaign.PlanOptions, error) {
	opts, err := root.PlanOptions()
	opts.MaxWorkspaces = a.Driver.Info().MaxWorkspaces
	return opts, err
}
