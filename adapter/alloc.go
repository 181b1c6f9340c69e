package adapter

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/store"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
)

// DefaultSubnetPool is where agent networks get their subnets: 4096
// subnets of /28 (11 addresses each; an agent network holds two).
var DefaultSubnetPool = netip.MustParsePrefix("10.213.0.0/16")

// subnetBits is the size of an agent network's subnet.
const subnetBits = 28

// Daemon-wide allocations (subnets, uid blocks) are serialised by a lock
// file each in the daemon's lock directory (Adapter.locks), whatever the
// state root and the spelling of DOCKER_HOST, like the per-campaign locks.
const (
	subnetLock = "subnets.lock"
	uidLock    = "uid-blocks.lock"
	uidClaims  = "uid-blocks"
)

// ErrExhausted is returned (wrapped) when no subnet or uid block is free.
var ErrExhausted = errors.New("daemon-wide pool exhausted")

// lockFile takes an exclusive flock on name in the daemon's lock
// directory, waiting until ctx is done.
func (a *Adapter) lockFile(ctx context.Context, name string) (*store.Lock, error) {
	l, err := a.locks()
	if err != nil {
		return nil, err
	}
	return l.Take(ctx, name, store.DefaultLockWait)
}

// allocateSubnets picks n /28 subnets of the pool that overlap no subnet
// of any network on the daemon. The caller holds the subnet lock until its
// networks exist.
func (a *Adapter) allocateSubnets(ctx context.Context, n int) ([]netip.Prefix, error) {
	pool := a.SubnetPool
	if !pool.IsValid() {
		pool = DefaultSubnetPool
	}
	nets, err := a.api().NetworkList(ctx, network.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list networks: %w", err)
	}
	var used []netip.Prefix
	for _, nw := range nets {
		for _, c := range nw.IPAM.Config {
			if p, err := netip.ParsePrefix(c.Subnet); err == nil {
				used = append(used, p.Masked())
			}
		}
	}
	return freeSubnets(pool, used, n)
}

// freeSubnets returns the first n /28 subnets of pool that overlap none of
// used.
func freeSubnets(pool netip.Prefix, used []netip.Prefix, n int) ([]netip.Prefix, error) {
	pool = pool.Masked()
	if !pool.Addr().Is4() || pool.Bits() > subnetBits {
		return nil, fmt.Errorf("subnet pool %s: want an IPv4 prefix of /%d or larger", pool, subnetBits)
	}
	var out []netip.Prefix
	step := uint32(1) << (32 - subnetBits)
	b := pool.Addr().As4()
	start := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	count := uint32(1) << (subnetBits - pool.Bits())
	for i := range count {
		v := start + i*step
		cand := netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), subnetBits)
		free := true
		for _, u := range used {
			if u.Overlaps(cand) {
				free = false
				break
			}
		}
		if free {
			out = append(out, cand)
			if len(out) == n {
				return out, nil
			}
		}
	}
	return nil, fmt.Errorf("%w: %d free /%d subnets in %s, %d needed", ErrExhausted, len(out), subnetBits, pool, n)
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

// claimUIDBlocks claims n uid blocks no container on the daemon holds
// (by its io.agentpen.uid-block label, in any state) and no bring-up in
// flight has claimed.
func (a *Adapter) claimUIDBlocks(ctx context.Context, n int) ([]int, *uidClaim, error) {
	lock, err := a.lockFile(ctx, uidLock)
	if err != nil {
		return nil, nil, err
	}
	defer lock.Unlock()
	locks, err := a.locks()
	if err != nil {
		return nil, nil, err
	}
	cs, err := a.api().ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", campaign.LabelUIDBlock))})
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
