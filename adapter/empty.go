package adapter

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/store"
)

// ErrStillNamed is returned (wrapped) by DiscardEmpty for an empty
// campaign directory whose id something on the runtime still carries.
var ErrStillNamed = errors.New("its id is still on the runtime")

// DiscardEmpty removes the state directory of the listed campaign l when
// its journal holds no generation (campaign.StatusEmpty: a create that
// stopped before its first record), under the campaign's lock (none is
// waited for: a held one is store.ErrLocked), once nothing on the runtime
// carries a campaign id of its directory's key: a resource labelled with
// one is ErrStillNamed (agentpen orphans lists it), and the
// directory stays. With dryRun nothing is removed: it reports whether it
// would be. The journal is read again under the lock.
func (a *Adapter) DiscardEmpty(ctx context.Context, root *store.Root, l store.Listing, dryRun bool) (bool, error) {
	if l.State.Status != campaign.StatusEmpty {
		return false, nil
	}
	locks, err := a.locks()
	if err != nil {
		return false, err
	}
	lock, err := locks.Campaign(ctx, l.Key, 0)
	if err != nil {
		return false, err
	}
	defer lock.Unlock()
	found, err := a.Driver.List(ctx, campaign.LabelOwner+"="+campaign.OwnerValue)
	if err != nil {
		return false, err
	}
	n := 0
	for _, f := range found {
		if id := f.Labels[campaign.LabelCampaign]; id != "" && campaign.Key(id) == l.Key {
			n++
		}
	}
	if n > 0 {
		return false, fmt.Errorf("campaign directory %s: its journal holds no generation, but %d resources on the runtime carry its id (agentpen orphans lists them): %w", l.Path, n, ErrStillNamed)
	}
	if dryRun {
		return true, nil
	}
	if err := root.RemoveEmpty(l.Key); err != nil {
		return false, err
	}
	a.log().Info("removed an empty campaign directory (a create that stopped before its first record)", "campaign", l.ID, "dir", l.Path)
	return true, nil
}

// SweepCreates removes the staging directories of new campaigns
// (store.Root.Create) whose campaign's lock no process holds: creates
// killed before their first journal record, which made nothing on the
// runtime. It returns how many it removed.
func (a *Adapter) SweepCreates(ctx context.Context, root *store.Root) (int, error) {
	staged, err := root.Staged()
	if err != nil {
		return 0, err
	}
	locks, err := a.locks()
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, s := range staged {
		lock, err := locks.Campaign(ctx, s.Key, 0)
		if errors.Is(err, store.ErrLocked) {
			continue // a create in flight
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		err = root.RemoveStaged(s)
		lock.Unlock()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}
