package docker

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/docker/docker/api/types/network"
)

// DefaultSubnetPool is where agent networks get their subnets: 4096
// subnets of /28 (11 addresses each; an agent network holds two).
var DefaultSubnetPool = netip.MustParsePrefix("10.213.0.0/16")

// subnetBits is the size of an agent network's subnet.
const subnetBits = 28

// subnetLock serialises the daemon's subnet allocations: a lock file in
// the daemon's lock directory (driver.BringUp.Lock), whatever the state
// root and the spelling of DOCKER_HOST, held until the networks exist.
const subnetLock = "subnets.lock"

// ErrExhausted is returned (wrapped) when no subnet is free.
var ErrExhausted = driver.ErrExhausted

// allocateSubnets picks n /28 subnets of the pool that overlap no subnet
// of any network on the daemon. The caller holds the subnet lock until its
// networks exist.
func (d *Driver) allocateSubnets(ctx context.Context, n int) ([]netip.Prefix, error) {
	pool := d.SubnetPool
	if !pool.IsValid() {
		pool = DefaultSubnetPool
	}
	nets, err := d.api.NetworkList(ctx, network.ListOptions{})
	if err != nil {
		return nil, errorf("list networks: %w", err)
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
