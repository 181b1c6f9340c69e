package sandbox

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestRangeFromEnv(t *testing.T) {
	for _, c := range []struct {
		base, count string
		want        Range
		err         string
	}{
		{"", "", DefaultRange, ""},
		{"20064", "64", Range{20064, 64}, ""},
		{"65440", "64", Range{65440, 64}, ""},
		{"65472", "64", Range{}, "must lie within"}, // would reach 65534, the overflow uid
		{"20000", "", Range{}, "set both or neither"},
		{"", "64", Range{}, "set both or neither"},
		{"0x4e20", "64", Range{}, "not numbers"},
		{"20000", "64 ", Range{}, "not numbers"},
		{"19999", "64", Range{}, "must lie within"},
		{"65473", "64", Range{}, "must lie within"},
		{"20000", "1", Range{}, "at least 2"},
		{"20000", "-5", Range{}, "at least 2"},
		{"-20000", "64", Range{}, "must lie within"},
	} {
		env := map[string]string{"WORKBENCH_UID_BASE": c.base, "WORKBENCH_UID_COUNT": c.count}
		got, err := RangeFromEnv(func(k string) string { return env[k] })
		if c.err == "" {
			if err != nil || got != c.want {
				t.Errorf("%q/%q: %v %v, want %v", c.base, c.count, got, err, c.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%q/%q: %v %v, want an error with %q", c.base, c.count, got, err, c.err)
		}
	}
}

func TestRangeShape(t *testing.T) {
	r := Range{Base: 30000, Count: 64}
	if r.Slots() != 63 || r.Killer() != 30063 || r.String() != "30000-30063" {
		t.Fatalf("%v: slots %d killer %d", r, r.Slots(), r.Killer())
	}
	if !r.Contains(30000) || !r.Contains(30062) || r.Contains(30063) || r.Contains(29999) {
		t.Fatal("Contains: the killer or a uid outside counted as an episode uid")
	}
	// The default keeps the uids of servers started before ranges existed.
	if DefaultRange.Base != 20000 || DefaultRange.Slots() != 1024 || DefaultRange.Killer() != 21024 {
		t.Fatalf("DefaultRange %v", DefaultRange)
	}
	for _, u := range []int{SpaceFirst, r.Killer(), SpaceLimit - 1} {
		if !IsSandboxUID(u) {
			t.Errorf("IsSandboxUID(%d) = false: a uid of some workspace's block", u)
		}
	}
	for _, u := range []int{0, 1000, SpaceFirst - 1, SpaceLimit, 65534, 65535} {
		if IsSandboxUID(u) {
			t.Errorf("IsSandboxUID(%d) = true", u)
		}
	}
}

// TestPoolStaysInRange: a pool of a small range hands out each episode uid
// once, never the killer, then reports no free uid.
func TestPoolStaysInRange(t *testing.T) {
	r := Range{Base: 40128, Count: 4}
	p := NewPool(t.TempDir(), r)
	var got []int
	for range r.Slots() {
		uid, err := p.Claim()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, uid)
	}
	if _, err := p.Claim(); !errors.Is(err, ErrNoFreeUID) {
		t.Fatalf("claim past the range's %d episode uids: %v, want ErrNoFreeUID", r.Slots(), err)
	}
	slices.Sort(got)
	if want := []int{40128, 40129, 40130}; !slices.Equal(got, want) {
		t.Fatalf("claimed %v, want %v", got, want)
	}
	p.Release(40129)
	if uid, err := p.Claim(); err != nil || uid != 40129 {
		t.Fatalf("claim after a release: %d %v", uid, err)
	}
}
