package adapter

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/cleanup"
)

// Orphan is a resource carrying agentpen's labels that no journal in the
// state root accounts for by id.
type Orphan struct {
	cleanup.Found
	// CampaignID and Instance are what its labels claim.
	CampaignID string `json:"campaign_id"`
	Instance   string `json:"instance,omitempty"`
	// Provable is true when a journal in this state root has a generation
	// of that campaign with that instance nonce: its labels then prove it
	// is that generation's, and RemoveOrphan may remove it.
	Provable bool   `json:"provable"`
	Why      string `json:"why"`
}

// ErrNotOrphan is returned (wrapped) by RemoveOrphan for an id that is not
// an orphan, or whose ownership no journal here can prove.
var ErrNotOrphan = errors.New("not a removable orphan")

// Orphans lists (read-only) the containers and networks labelled as
// agentpen's that no journal in the state root accounts for.
func (a *Adapter) Orphans(ctx context.Context) ([]Orphan, error) {
	states, err := a.Campaigns()
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	instances := map[[2]string]bool{}
	for _, st := range states {
		for _, g := range st.Generations {
			instances[[2]string{st.CampaignID, g.Instance}] = true
			for _, r := range g.Resources {
				if r.ID != "" {
					known[r.ID] = true
				}
			}
		}
	}
	found, err := a.listLabelled(ctx, campaign.LabelOwner+"="+campaign.OwnerValue)
	if err != nil {
		return nil, err
	}
	var out []Orphan
	for _, f := range found {
		if known[f.ID] {
			continue
		}
		o := Orphan{Found: f, CampaignID: f.Labels[campaign.LabelCampaign], Instance: f.Labels[campaign.LabelInstance]}
		switch {
		case o.Instance == "":
			o.Why = "it carries no instance nonce: no journal can prove it is agentpen's"
		case !instances[[2]string{o.CampaignID, o.Instance}]:
			o.Why = "no journal in this state root has a generation of this campaign with its instance nonce"
		default:
			o.Provable = true
			o.Why = "its campaign and instance nonce are a generation's in this state root, whose journal lost its id"
		}
		out = append(out, o)
	}
	return out, nil
}

// RemoveOrphan removes one orphan by its exact id, only when its labels
// prove it belongs to a generation journalled in this state root: the
// id is journalled into that campaign's journal, then observed, decided
// and removed like any journalled resource. Nothing else is touched.
func (a *Adapter) RemoveOrphan(ctx context.Context, id string) (cleanup.Outcome, error) {
	orphans, err := a.Orphans(ctx)
	if err != nil {
		return cleanup.Outcome{}, err
	}
	var o *Orphan
	for i := range orphans {
		if orphans[i].ID == id {
			o = &orphans[i]
		}
	}
	switch {
	case o == nil:
		return cleanup.Outcome{}, fmt.Errorf("%s: %w: no agentpen-labelled resource unaccounted for has this exact id", id, ErrNotOrphan)
	case !o.Provable:
		return cleanup.Outcome{}, fmt.Errorf("%s %s (%s): %w: %s", o.Kind, o.Name, short(o.ID), ErrNotOrphan, o.Why)
	}
	var out cleanup.Outcome
	_, err = a.withJournal(ctx, o.CampaignID, func(j *campaign.Journal) (*cleanup.Report, error) {
		recs, err := campaign.ReadJournal(j.Path())
		if err != nil {
			return nil, err
		}
		gen := 0
		for _, g := range campaign.Generations(recs) {
			if g.Instance == o.Instance {
				gen = g.N
			}
		}
		r := campaign.Resource{Gen: gen, Kind: o.Kind, Role: o.Labels[campaign.LabelRole], Name: o.Name, ID: o.ID, Labels: o.Labels}
		if err := j.Append(campaign.Record{Op: campaign.OpCreated, Gen: gen, Kind: r.Kind, Role: r.Role, Name: r.Name, ID: r.ID, Labels: r.Labels, Note: "orphan removed by exact id"}); err != nil {
			return nil, err
		}
		out = a.removeOne(ctx, j, r, make(chan struct{}, 1), false)
		return nil, nil
	})
	if err != nil {
		return out, err
	}
	if out.After.State != cleanup.Absent {
		return out, fmt.Errorf("%s %s (%s): %w: %s %s", o.Kind, o.Name, short(o.ID), ErrNotVerified, out.Decision.Action, out.Decision.Reason)
	}
	return out, nil
}
