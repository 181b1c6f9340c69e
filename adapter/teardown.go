package adapter

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/cleanup"
	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
)

// ErrNotOwned is returned (wrapped) when a journalled id names a resource
// whose io.agentpen.* labels do not match the journal's intent: it is left
// alone.
var ErrNotOwned = errors.New("labels do not prove ownership")

// ErrRefused is returned (wrapped) when the evidence about a journalled
// resource does not allow a decision (see cleanup.Refuse): nothing is done
// to it.
var ErrRefused = errors.New("removal refused")

// TearDown removes, by exact id, everything a campaign's journal records as
// created and not removed, and journals each removal. It never looks
// anything up by name or label. (The cleanup report, with verification, is
// package cleanup's; this is the removal itself.)
func (a *Adapter) TearDown(ctx context.Context, campaignID string) error {
	if err := campaign.CheckID("campaign_id", campaignID); err != nil {
		return err
	}
	dir := a.CampaignDir(campaignID)
	if _, err := os.Stat(filepath.Join(dir, campaign.JournalFile)); err != nil {
		return fmt.Errorf("campaign %q: no journal in %s: %w", campaignID, dir, err)
	}
	j, err := campaign.OpenJournal(dir)
	if err != nil {
		return err
	}
	defer j.Close()
	if err := j.Append(campaign.Record{Op: campaign.OpNote, Note: "teardown started"}); err != nil {
		return err
	}
	if err := a.removeJournalled(ctx, j); err != nil {
		return err
	}
	a.removeRunRoot(campaign.Key(campaignID))
	return j.Append(campaign.Record{Op: campaign.OpNote, Note: "teardown complete"})
}

// removeJournalled removes, by exact id and in reverse order, everything
// the journal says was created and not yet removed (containers, then
// directories, then the network), and journals each removal. Each resource
// goes through observe, cleanup.Decide and act; one that is not ours or
// whose evidence is refused is left alone and named in the error.
func (a *Adapter) removeJournalled(ctx context.Context, j *campaign.Journal) error {
	recs, err := campaign.ReadJournal(j.Path())
	if err != nil {
		return err
	}
	res := campaign.Resources(recs)
	var errs []error
	for _, kind := range []campaign.Kind{campaign.KindContainer, campaign.KindDir, campaign.KindNetwork} {
		for i := len(res) - 1; i >= 0; i-- {
			r := res[i]
			if r.Kind != kind || r.Removed || r.ID == "" {
				continue
			}
			if err := a.removeOne(ctx, j, r); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// removeOne observes r, decides and acts, and journals a removal.
func (a *Adapter) removeOne(ctx context.Context, j *campaign.Journal, r campaign.Resource) error {
	d := cleanup.Decide(r, a.observe(ctx, r))
	switch d.Action {
	case cleanup.NotOurs:
		return fmt.Errorf("remove %s %s (%s): %w: %s", r.Kind, r.Name, short(r.ID), ErrNotOwned, d.Reason)
	case cleanup.Refuse:
		return fmt.Errorf("remove %s %s (%s): %w: %s", r.Kind, r.Name, short(r.ID), ErrRefused, d.Reason)
	case cleanup.Remove:
		if err := a.act(ctx, r); err != nil {
			return fmt.Errorf("remove %s %s (%s): %w", r.Kind, r.Name, short(r.ID), err)
		}
	}
	return j.Append(campaign.Record{Op: campaign.OpRemoved, Kind: r.Kind, Role: r.Role, Name: r.Name, ID: r.ID, Note: string(d.Action)})
}

// observe asks the daemon (or the file system, for a directory) about one
// journalled resource, by its id.
func (a *Adapter) observe(ctx context.Context, r campaign.Resource) cleanup.Observation {
	var obs cleanup.Observation
	var err error
	switch r.Kind {
	case campaign.KindContainer:
		var info container.InspectResponse
		info, err = a.api().ContainerInspect(ctx, r.ID)
		if err == nil {
			obs = cleanup.Observation{State: cleanup.Present, ID: info.ID}
			if info.Config != nil {
				obs.Labels = info.Config.Labels
			}
		}
	case campaign.KindNetwork:
		var info network.Inspect
		info, err = a.api().NetworkInspect(ctx, r.ID, network.InspectOptions{})
		if err == nil {
			obs = cleanup.Observation{State: cleanup.Present, ID: info.ID, Labels: info.Labels}
		}
	case campaign.KindDir:
		obs.RunRoot = a.runBase()
		if _, err = os.Lstat(r.ID); err == nil {
			obs.State = cleanup.Present
		} else if errors.Is(err, os.ErrNotExist) {
			obs.State = cleanup.Absent
			err = nil
		}
	}
	switch {
	case err == nil:
	case cerrdefs.IsNotFound(err):
		obs.State = cleanup.Absent
	default:
		obs.State, obs.Err = cleanup.Unknown, err.Error()
	}
	return obs
}

// act removes one resource whose removal was decided.
func (a *Adapter) act(ctx context.Context, r campaign.Resource) error {
	var err error
	switch r.Kind {
	case campaign.KindContainer:
		err = a.api().ContainerRemove(ctx, r.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
	case campaign.KindNetwork:
		err = a.api().NetworkRemove(ctx, r.ID)
	case campaign.KindDir:
		err = os.RemoveAll(r.ID)
	default:
		err = fmt.Errorf("unknown kind %q", r.Kind)
	}
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	return err
}
