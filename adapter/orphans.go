package adapter

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/cleanup"
	"github.com/agentpen/agentpen/store"
)

// Orphan is a resource carrying agentpen's labels that no journal in the
// state root accounts for by id.
type Orphan struct {
	cleanup.Found
	// CampaignID and Instance are what its labels claim.
	CampaignID string `json:"campaign_id"`
	Instance   string `json:"instance,omitempty"`
	// Provable is true when a journal in this state root has an intent of
	// this name whose create was never recorded, with the secret of that
	// create (campaign.LabelCreate) the resource carries: it is that
	// create's, and RemoveOrphan may remove it. Labels alone prove
	// nothing: any daemon client can copy them from a live resource.
	Provable bool   `json:"provable"`
	Why      string `json:"why"`
	gen      int
}

// ErrNotOrphan is returned (wrapped) by RemoveOrphan for an id that is not
// an orphan, or whose ownership no journal here can prove.
var ErrNotOrphan = errors.New("not a removable orphan")

// Orphans lists (read-only) the containers and networks labelled as
// agentpen's that no journal in the state root accounts for. A campaign
// whose journal is corrupt or untrusted does not hide the others: the ids
// its well-formed records name count as accounted for, and what else
// carries its id is listed, never provable.
func (a *Adapter) Orphans(ctx context.Context, root *store.Root) ([]Orphan, error) {
	states, err := root.List()
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	held := map[string]bool{} // the campaign ids this root holds
	type intentKey struct{ campaign, kind, name, secret string }
	intents := map[intentKey]int{} // an unresolved create -> its generation
	unsound := map[string]error{}  // campaign id -> why its state cannot be used
	for _, st := range states {
		held[st.ID] = true
		if st.Err != nil {
			unsound[st.ID] = st.Err
		}
		for _, g := range st.State.Generations {
			for _, r := range g.Resources {
				if r.ID != "" {
					known[r.ID] = true
				} else if st.Err == nil && !r.Removed && r.Labels[campaign.LabelCreate] != "" {
					// Only a sound journal proves a create.
					intents[intentKey{st.ID, string(r.Kind), r.Name, r.Labels[campaign.LabelCreate]}] = g.N
				}
			}
		}
	}
	found, err := a.Driver.List(ctx, campaign.LabelOwner+"="+campaign.OwnerValue)
	if err != nil {
		return nil, err
	}
	var out []Orphan
	for _, f := range found {
		if known[f.ID] {
			continue
		}
		o := Orphan{Found: f, CampaignID: f.Labels[campaign.LabelCampaign], Instance: f.Labels[campaign.LabelInstance]}
		gen, ok := intents[intentKey{o.CampaignID, string(f.Kind), f.Name, f.Labels[campaign.LabelCreate]}]
		switch {
		case unsound[o.CampaignID] != nil:
			o.Why = "its campaign's state here cannot be used, so nothing can be proven: " + unsound[o.CampaignID].Error()
		case !held[o.CampaignID]:
			o.Why = fmt.Sprintf("no campaign %q in this state root: another state root's (agentpen orphans --state-root there accounts for it), or one whose state was removed; labels can be copied: they prove nothing", o.CampaignID)
		case f.Labels[campaign.LabelCreate] == "":
			o.Why = "it carries no create secret: no journal can prove it is agentpen's"
		case !ok:
			o.Why = "no journal in this state root has an unresolved create of this name with its create secret (labels can be copied: they prove nothing)"
		default:
			o.Provable, o.gen = true, gen
			o.Why = "a journal in this state root has the create of this name, with its secret, whose id it lost"
		}
		out = append(out, o)
	}
	return out, nil
}

// MinIDPrefix is the shortest id prefix RemoveOrphan takes for an id: the
// 12 hex digits agentpen orphans (and docker ps) show.
const MinIDPrefix = 12

// RemoveOrphan removes one orphan, named by its id or by an unambiguous
// prefix of it of at least MinIDPrefix hex digits among the orphans, only
// when its labels prove it belongs to a generation journalled in this
// state root: the full id is journalled into that campaign's journal,
// then observed, decided and removed like any journalled resource.
// Nothing else is touched.
func (a *Adapter) RemoveOrphan(ctx context.Context, root *store.Root, id string) (cleanup.Outcome, error) {
	orphans, err := a.Orphans(ctx, root)
	if err != nil {
		return cleanup.Outcome{}, err
	}
	o, err := findOrphan(orphans, id)
	switch {
	case err != nil:
		return cleanup.Outcome{}, err
	case !o.Provable:
		return cleanup.Outcome{}, fmt.Errorf("%s %s (%s): %w: %s", o.Kind, o.Name, short(o.ID), ErrNotOrphan, o.Why)
	}
	c, err := root.Open(o.CampaignID)
	if err != nil {
		return cleanup.Outcome{}, err
	}
	defer c.Close()
	out, err := a.removeOrphan(ctx, c, o)
	if err != nil {
		return out, err
	}
	if out.After.State != cleanup.Absent {
		return out, fmt.Errorf("%s %s (%s): %w: %s %s", o.Kind, o.Name, short(o.ID), ErrNotVerified, out.Decision.Action, out.Decision.Reason)
	}
	return out, nil
}

// removeOrphan journals the orphan o into its campaign's journal (under
// the campaign's lock) and removes it like any journalled resource.
func (a *Adapter) removeOrphan(ctx context.Context, c *store.Campaign, o *Orphan) (cleanup.Outcome, error) {
	lock, err := a.lockCampaign(ctx, c)
	if err != nil {
		return cleanup.Outcome{}, err
	}
	defer lock.Unlock()
	j, err := a.openJournal(c)
	if err != nil {
		return cleanup.Outcome{}, err
	}
	defer j.Close()
	gen := o.gen
	r := campaign.Resource{Gen: gen, Kind: o.Kind, Role: o.Labels[campaign.LabelRole], Name: o.Name, ID: o.ID, Labels: o.Labels, Orphan: true}
	if err := j.Append(campaign.Record{Op: campaign.OpOrphan, Gen: gen, Kind: r.Kind, Role: r.Role, Name: r.Name, ID: r.ID, Labels: r.Labels}); err != nil {
		return cleanup.Outcome{}, err
	}
	return a.removeOne(ctx, j, r, make(chan struct{}, 1), false), nil
}

// findOrphan is the orphan whose id is id, or the only one whose id starts
// with id when id is at least MinIDPrefix hex digits.
func findOrphan(orphans []Orphan, id string) (*Orphan, error) {
	var matches []*Orphan
	for i := range orphans {
		switch {
		case orphans[i].ID == id:
			return &orphans[i], nil
		case len(id) >= MinIDPrefix && isHex(id) && strings.HasPrefix(orphans[i].ID, id):
			matches = append(matches, &orphans[i])
		}
	}
	switch len(matches) {
	case 1:
		return matches[0], nil
	case 0:
		return nil, fmt.Errorf("%s: %w: no agentpen-labelled resource unaccounted for has this id, or an id starting with it (at least %d hex digits); agentpen orphans lists them",
			id, ErrNotOrphan, MinIDPrefix)
	}
	var ids []string
	for _, m := range matches {
		ids = append(ids, m.ID)
	}
	return nil, fmt.Errorf("%s: %w: it starts %d ids (%s): give more of it", id, ErrNotOrphan, len(ids), strings.Join(ids, ", "))
}

func isHex(s string) bool {
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
