package adapter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agentpen/agentpen/campaign"
	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"golang.org/x/sync/errgroup"
)

// ErrCampaignExists is returned by BringUp when the campaign's directory
// already journals resources that were not removed.
var ErrCampaignExists = errors.New("campaign already exists")

// BringUp validates spec, journals and creates the campaign's network,
// server and workspaces, and waits until each is ready. On any failure
// (including ctx cancellation) it removes what it created, by exact id, and
// says so in the journal; the error names the failing resource.
func (a *Adapter) BringUp(ctx context.Context, spec campaign.CampaignSpec) (*Campaign, error) {
	p, err := campaign.NewPlan(spec)
	if err != nil {
		return nil, err
	}
	if err := a.checkKey(p); err != nil {
		return nil, err
	}
	if err := a.checkImages(ctx, p); err != nil {
		return nil, err
	}
	dir := a.CampaignDir(p.CampaignID)
	if recs, err := campaign.ReadJournal(filepath.Join(dir, campaign.JournalFile)); err == nil {
		for _, r := range campaign.Resources(recs) {
			if !r.Removed {
				return nil, fmt.Errorf("campaign %q (%s): %w; clean it up first", p.CampaignID, dir, ErrCampaignExists)
			}
		}
	}
	j, err := campaign.OpenJournal(dir)
	if err != nil {
		return nil, err
	}
	defer j.Close()
	if err := writeSpec(dir, spec); err != nil {
		return nil, err
	}
	if err := a.recordDaemon(dir); err != nil {
		return nil, err
	}
	c := &Campaign{Plan: p, Dir: dir}
	if err := j.Append(campaign.Record{Op: campaign.OpNote, Note: fmt.Sprintf("bring-up started: %d workspaces, egress %s", len(p.Agents), p.Egress)}); err != nil {
		return nil, err
	}
	if err := a.bringUp(ctx, j, c); err != nil {
		a.log().Warn("bring-up failed; rolling back", "campaign", p.CampaignID, "err", err)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		rbErr := a.removeJournalled(rctx, j)
		a.removeRunRoot(p.Key)
		note := "bring-up failed: " + err.Error() + "; rolled back"
		if rbErr != nil {
			note += " with errors: " + rbErr.Error()
		}
		return nil, errors.Join(err, rbErr, j.Append(campaign.Record{Op: campaign.OpNote, Note: note}))
	}
	// Every id is journalled already; the note only marks the moment, so a
	// failure to write it is logged rather than undoing a ready campaign.
	if err := j.Append(campaign.Record{Op: campaign.OpNote, Note: "ready"}); err != nil {
		a.log().Warn("journal the ready note", "campaign", p.CampaignID, "err", err)
	}
	a.log().Info("campaign ready", "campaign", p.CampaignID, "network", c.NetworkID, "workspaces", len(c.Workspaces))
	return c, nil
}

func writeSpec(dir string, spec campaign.CampaignSpec) error {
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return fmt.Errorf("campaign spec: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, SpecFile), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write campaign spec: %w", err)
	}
	return nil
}

// checkKey refuses a campaign whose default grader or episode servers need
// the API key when agentpen's environment does not hold it (they would
// refuse to start, after everything was created) or holds a placeholder
// (apikey.Policy: the same list the attestation applies).
func (a *Adapter) checkKey(p *campaign.Plan) error {
	needs := p.Server.NeedsKey
	for _, ag := range p.Agents {
		needs = needs || ag.NeedsKey
	}
	if !needs {
		return nil
	}
	st := a.keyPolicy().Check(a.getenv(p.Server.Spec.APIKeyEnv))
	switch {
	case !st.Present:
		return &campaign.ValidationError{Field: "server.api_key_env", Value: p.Server.Spec.APIKeyEnv, Msg: "is unset or empty in agentpen's environment; the grader and the workspaces' episode servers need it"}
	case st.Placeholder:
		// The value is never repeated; its fingerprint names it.
		return &campaign.ValidationError{Field: "server.api_key_env", Value: p.Server.Spec.APIKeyEnv, Msg: "holds a placeholder or a publicly documented example key (fingerprint " + st.Fingerprint + "), not a real key"}
	}
	return nil
}

// checkImages refuses a campaign whose images are not present locally:
// nothing is ever pulled.
func (a *Adapter) checkImages(ctx context.Context, p *campaign.Plan) error {
	refs := map[string]string{p.Server.Spec.Image: "server.image"}
	for _, ag := range p.Agents {
		refs[ag.Spec.Image] = fmt.Sprintf("workspaces[%d].image", ag.Index)
	}
	for _, ref := range sortedKeys(refs) {
		if _, err := a.api().ImageInspect(ctx, ref); err != nil {
			if cerrdefs.IsNotFound(err) {
				return &campaign.ValidationError{Field: refs[ref], Value: ref, Msg: "no such image on the daemon (agentpen never pulls; build or load it first)"}
			}
			return fmt.Errorf("inspect image %s: %w", ref, err)
		}
	}
	return nil
}

func (a *Adapter) bringUp(ctx context.Context, j *campaign.Journal, c *Campaign) error {
	p := c.Plan
	netID, err := a.createNetwork(ctx, j, p)
	if err != nil {
		return err
	}
	c.NetworkID = netID

	// Server.
	apiKey := a.getenv(p.Server.Spec.APIKeyEnv)
	secrets := map[string]string{}
	for _, k := range p.Server.Spec.SecretEnv {
		if v := a.getenv(k); v != "" {
			secrets[k] = v
		}
	}
	srvID, err := a.createStart(ctx, j, serverSpec(p, apiKey, secrets, a.Docker.Host().SocketPath))
	if err != nil {
		return err
	}
	c.ServerID = srvID

	// Workspaces, concurrently with a bound.
	c.Workspaces = make([]Workspace, len(p.Agents))
	g, gctx := errgroup.WithContext(ctx)
	limit := a.Parallelism
	if limit <= 0 {
		limit = DefaultParallelism
	}
	g.SetLimit(limit)
	for i, ag := range p.Agents {
		g.Go(func() error {
			runDir, err := a.makeRunDir(j, p, ag)
			if err != nil {
				return err
			}
			id, err := a.createStart(gctx, j, workspaceSpec(p, ag, runDir, apiKey))
			if err != nil {
				return err
			}
			c.Workspaces[i] = Workspace{AgentID: ag.AgentID, ContainerID: id, RunDir: runDir, Socket: filepath.Join(runDir, filepath.Base(campaign.WorkbenchSocket))}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}

	// Readiness.
	g, gctx = errgroup.WithContext(ctx)
	g.SetLimit(limit + 1)
	g.Go(func() error { return a.waitServer(gctx, c) })
	for _, ws := range c.Workspaces {
		g.Go(func() error { return a.waitWorkspace(gctx, ws) })
	}
	return g.Wait()
}

// createNetwork journals the intent, creates the campaign network and
// journals its id. A create that failed with a conflict names another
// network that already has the name: it is never adopted (a twin
// campaign's network carries the same campaign labels). Any other failure
// may still have made the network (a cancelled call): it is adopted only
// when its labels prove it is this campaign's.
func (a *Adapter) createNetwork(ctx context.Context, j *campaign.Journal, p *campaign.Plan) (string, error) {
	if err := j.Append(campaign.Record{Op: campaign.OpIntent, Kind: campaign.KindNetwork, Role: campaign.RoleNetwork, Name: p.Network.Name, Labels: p.Network.Labels}); err != nil {
		return "", err
	}
	resp, err := a.api().NetworkCreate(ctx, p.Network.Name, networkCreateOptions(p))
	if err != nil {
		err = fmt.Errorf("create network %s: %w", p.Network.Name, err)
		jerr := j.Append(campaign.Record{Op: campaign.OpCreateFailed, Kind: campaign.KindNetwork, Name: p.Network.Name, Note: err.Error()})
		if !cerrdefs.IsConflict(err) {
			jerr = errors.Join(jerr, a.adoptNetwork(j, p))
		}
		return "", errors.Join(err, jerr)
	}
	if err := j.Append(campaign.Record{Op: campaign.OpCreated, Kind: campaign.KindNetwork, Name: p.Network.Name, ID: resp.ID}); err != nil {
		return resp.ID, err
	}
	a.log().Info("network created", "name", p.Network.Name, "id", short(resp.ID), "internal", p.Network.Internal)
	return resp.ID, nil
}

// createStart journals the intent, creates and starts one container, and
// journals its id. A create that failed may still have made the container
// (a cancelled call): adopt looks it up by name and records it only when
// its labels prove it is this campaign's. A conflict names another
// container that already had the name: it is never adopted.
func (a *Adapter) createStart(ctx context.Context, j *campaign.Journal, s containerSpec) (string, error) {
	api := a.api()
	if err := j.Append(campaign.Record{Op: campaign.OpIntent, Kind: campaign.KindContainer, Role: s.Role, Name: s.Name, Labels: s.Config.Labels}); err != nil {
		return "", err
	}
	resp, err := api.ContainerCreate(ctx, s.Config, s.HostConfig, s.Networking, nil, s.Name)
	if err != nil {
		err = fmt.Errorf("create %s: %w", s, err)
		jerr := j.Append(campaign.Record{Op: campaign.OpCreateFailed, Kind: campaign.KindContainer, Name: s.Name, Note: err.Error()})
		if !cerrdefs.IsConflict(err) {
			jerr = errors.Join(jerr, a.adoptContainer(j, s))
		}
		return "", errors.Join(err, jerr)
	}
	if err := j.Append(campaign.Record{Op: campaign.OpCreated, Kind: campaign.KindContainer, Role: s.Role, Name: s.Name, ID: resp.ID}); err != nil {
		return resp.ID, err
	}
	a.log().Info("container created", "role", s.Role, "name", s.Name, "id", short(resp.ID))
	if err := api.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		return resp.ID, fmt.Errorf("start %s %s: %w", s.Role, s.Name, err)
	}
	return resp.ID, nil
}

// adoptContainer records a container a failed create left behind, when its
// labels prove ownership. Not finding one is not an error; failing to
// journal one that was found is.
func (a *Adapter) adoptContainer(j *campaign.Journal, s containerSpec) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := a.api().ContainerInspect(ctx, s.Name)
	if err != nil || info.Config == nil || !campaign.OwnedBy(info.Config.Labels, s.Config.Labels) {
		return nil
	}
	return j.Append(campaign.Record{Op: campaign.OpCreated, Kind: campaign.KindContainer, Role: s.Role, Name: s.Name, ID: info.ID, Note: "found after a failed create"})
}

// adoptNetwork is adoptContainer for the campaign network.
func (a *Adapter) adoptNetwork(j *campaign.Journal, p *campaign.Plan) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := a.api().NetworkInspect(ctx, p.Network.Name, network.InspectOptions{})
	if err != nil || info.Name != p.Network.Name || !campaign.OwnedBy(info.Labels, p.Network.Labels) {
		return nil
	}
	return j.Append(campaign.Record{Op: campaign.OpCreated, Kind: campaign.KindNetwork, Role: campaign.RoleNetwork, Name: p.Network.Name, ID: info.ID, Note: "found after a failed create"})
}
