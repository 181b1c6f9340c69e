package tasks

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// Rand is the catalogue's deterministic generator: splitmix64 seeded from the
// sha256 of a task id and variant. It is written out here rather than taken
// from math/rand so the files a variant builds never change with the Go
// release.
type Rand struct{ state uint64 }

// newRand seeds a Rand from the canonical id of a family and a variant.
func newRand(familyID string, variant int) *Rand {
	sum := sha256.Sum256(fmt.Appendf(nil, "agentpen-task\x00%s\x00%d", familyID, variant))
	return &Rand{state: binary.LittleEndian.Uint64(sum[:8])}
}

// Uint64 returns the next 64 random bits.
func (r *Rand) Uint64() uint64 {
	r.state += 0x9e3779b97f4a7c15
	z := r.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// IntN returns a number in [0, n); n must be positive.
func (r *Rand) IntN(n int) int {
	if n <= 0 {
		panic("tasks: Rand.IntN with n <= 0")
	}
	return int(r.Uint64() % uint64(n))
}

// Range returns a number in [lo, hi].
func (r *Rand) Range(lo, hi int) int { return lo + r.IntN(hi-lo+1) }

// Chance reports true with probability p.
func (r *Rand) Chance(p float64) bool { return float64(r.Uint64()>>11)/(1<<53) < p }

// Pick returns one element of s.
func Pick[T any](r *Rand, s []T) T { return s[r.IntN(len(s))] }

// Shuffle permutes s in place.
func Shuffle[T any](r *Rand, s []T) {
	for i := len(s) - 1; i > 0; i-- {
		j := r.IntN(i + 1)
		s[i], s[j] = s[j], s[i]
	}
}

// Sample returns k distinct elements of s in random order (all of s when k >=
// len(s)); s is not changed.
func Sample[T any](r *Rand, s []T, k int) []T {
	c := append([]T(nil), s...)
	Shuffle(r, c)
	if k < len(c) {
		c = c[:k]
	}
	return c
}
