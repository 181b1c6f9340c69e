package adapter

import (
	"context"
	"fmt"
	"strconv"

	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/store"
)

// Runtime-wide allocations (uid blocks, a driver's subnets) are
// serialised by a lock file each in the runtime's lock directory
// (Adapter.locks), whatever the state root and the spelling of the
// runtime's address, like the per-campaign locks.
const (
	uidLock   = "uid-blocks.lock"
	uidClaims = "uid-blocks"
)

// ErrExhausted is returned (wrapped) when no subnet or uid block is free.
var ErrExhausted = driver.ErrExhausted

// lockFile takes an exclusive flock on name in the runtime's lock
// directory, waiting until ctx is done.
func (a *Adapter) lockFile(ctx context.Context, name string) (*store.Lock, error) {
	l, err := a.locks()
	if err != nil {
		return nil, err
	}
	return l.Take(ctx, name, store.DefaultLockWait)
}

// lockName is lockFile for a driver (driver.BringUp.Lock).
func (a *Adapter) lockName(ctx context.Context, name string) (func(), error) {
	l, err := a.lockFile(ctx, name)
	if err != nil {
		return nil, err
	}
	return l.Unlock, nil
}

// uidClaim holds uid blocks for a bring-up until its workspaces carry
// their io.agentpen.uid-block labels: each block's claim file is flocked
// by this process, so a concurrent bring-up (any state root) skips it,
// and a crash releases it.
type uidClaim struct{ locks []*store.Lock }

func (c *uidClaim) release() {
	for _, l := range c.locks {
		l.Unlock()
	}
	c.locks = nil
}

// claimUIDBlocks claims n uid blocks no container on the runtime holds
// (by its io.agentpen.uid-block label, in any state) and no bring-up in
// flight has claimed.
func (a *Adapter) claimUIDBlocks(ctx context.Context, n int) ([]int, *uidClaim, error) {
	if a.Driver.Info().OwnUserNamespaces {
		// Every workspace has a user namespace of its own: its uids are
		// its own whatever block it runs, so blocks are handed out in turn
		// and claimed nowhere.
		bases := make([]int, n)
		for i := range bases {
			bases[i] = campaign.UIDBlockFirst + i%campaign.UIDBlocks*campaign.UIDBlockSize
		}
		return bases, &uidClaim{}, nil
	}
	lock, err := a.lockFile(ctx, uidLock)
	if err != nil {
		return nil, nil, err
	}
	defer lock.Unlock()
	locks, err := a.locks()
	if err != nil {
		return nil, nil, err
	}
	cs, err := a.Driver.List(ctx, campaign.LabelUIDBlock)
	if err != nil {
		return nil, nil, fmt.Errorf("list uid blocks in use: %w", err)
	}
	used := map[int]bool{}
	for _, c := range cs {
		if base, ok := campaign.ParseUIDBlock(c.Labels[campaign.LabelUIDBlock]); ok {
			used[base] = true
		}
	}
	claim := &uidClaim{}
	var bases []int
	for i := range campaign.UIDBlocks {
		if len(bases) == n {
			break
		}
		base := campaign.UIDBlockFirst + i*campaign.UIDBlockSize
		if used[base] {
			continue
		}
		l, ok, err := locks.TryClaim(uidClaims, strconv.Itoa(base))
		if err != nil {
			claim.release()
			return nil, nil, fmt.Errorf("uid block claim: %w", err)
		}
		if !ok {
			continue // claimed by a bring-up in flight
		}
		claim.locks = append(claim.locks, l)
		bases = append(bases, base)
	}
	if len(bases) < n {
		claim.release()
		return nil, nil, fmt.Errorf("%w: %d free uid blocks of %d uids, %d needed", ErrExhausted, len(bases), campaign.UIDBlockSize, n)
	}
	return bases, claim, nil
}
