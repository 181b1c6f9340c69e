package main

import (
	"strings"
	"testing"
)

// TestEvaluateFamilies: targets read the families they name (a raw limit
// of another family than raw-<prefix> included), scale rows get the cost
// per added unit, and every family left over gets a row of its own with
// its raw- family beside it.
func TestEvaluateFamilies(t *testing.T) {
	const bench = "BenchmarkCampaign16/none"
	metrics := map[string]map[string]float64{
		bench: {
			"up-median-ns": 2.3e9, "up-p90-ns": 2.6e9, "up-n": 5,
			"raw-up-median-ns": 2e9, "cli-up-median-ns": 5e9,
			"down-median-ns": 0.6e9, "down-n": 5, "raw-down-median-ns": 0.5e9, "cli-down-median-ns": 2e9,
			"attest-noprobes-median-ns": 0.03e9, "attest-noprobes-n": 5, "attest-median-ns": 0.8e9, "attest-probes-median-ns": 0.77e9,
		},
		"BenchmarkCampaignScale/none": {
			"up-1-median-ns": 0.5e9, "up-8-median-ns": 1.2e9, "up-16-median-ns": 2e9, "up-32-median-ns": 3.6e9, "up-64-median-ns": 6.8e9,
			"down-1-median-ns": 0.1e9, "down-8-median-ns": 0.3e9, "down-16-median-ns": 0.5e9, "down-32-median-ns": 0.9e9, "down-64-median-ns": 1.7e9,
		},
		"BenchmarkKillIdle":      {"median-ns": 1e5, "raw-median-ns": 1e6, "n": 60},
		"BenchmarkForkFloodKill": {"median-ns": 60e6, "p90-ns": 100e6, "p99-ns": 260e6, "n": 200},
	}
	rows := evaluate(metrics)
	find := func(target, family string) Result {
		t.Helper()
		for _, r := range rows {
			if r.Target == target && r.Family == family {
				return r
			}
		}
		t.Fatalf("no row %q [%s] in %+v", target, family, rows)
		return Result{}
	}
	tests := []struct {
		name, target, family string
		want                 float64
		pass                 bool
	}{
		{"up_vs_raw", "campaign 1+16, none: bring-up vs raw SDK", "up-", 1.15, true},
		{"up_vs_cli", "campaign 1+16, none: bring-up vs sequential docker CLI", "up-", 0.46, true},
		{"down_vs_raw", "campaign 1+16, none: teardown vs raw SDK", "down-", 1.2, false},
		{"cleanup", "campaign 1+16, none: cleanup with verification", "down-", 600, true},
		{"attest", "campaign 1+16, none: attestation without the probes", "attest-noprobes-", 30, true},
		// A p99 bound reads the p99, not the median, which passes.
		{"p99", "fork flood at the process limit, 4 busy loops per core: end of run to last process reaped (p99)", "", 260, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := find(tt.target, tt.family)
			if r.Pass == nil || *r.Pass != tt.pass || r.Value < tt.want-0.001 || r.Value > tt.want+0.001 {
				t.Errorf("got value %v pass %v, want %v %v (%+v)", r.Value, r.Pass, tt.want, tt.pass, r)
			}
		})
	}
	if r := find("campaign, none: bring-up, 32 workspaces", "up-32-"); r.PerAddedMS != 100 || r.MedianMS != 3600 {
		t.Errorf("scale row %+v: want median 3600 ms, 100 ms per added workspace", r)
	}
	if r := find("campaign, none: teardown, 1 workspaces", "down-1-"); r.PerAddedMS != 0 {
		t.Errorf("the first size has no size before: %+v", r)
	}
	if r := find("(no target)", "attest-"); r.MedianMS != 800 {
		t.Errorf("attest- row %+v", r)
	}
	if r := find("(no target)", ""); r.Benchmark != "BenchmarkKillIdle" || r.RawMS != 1 || r.RawFamily != "raw-" {
		t.Errorf("KillIdle row %+v, want its raw- family beside it", r)
	}
	for _, r := range rows {
		if r.Target == "(no target)" && (r.Benchmark == bench && (r.Family == "up-" || r.Family == "cli-up-" || r.Family == "raw-down-") || strings.HasPrefix(r.Family, "raw-")) {
			t.Errorf("a family a target or another row reads has a row of its own: %+v", r)
		}
	}
	out := render(rows)
	for _, want := range []string{"[up- vs cli-up-]", "| campaign, none: bring-up, 64 workspaces | BenchmarkCampaignScale/none [up-64-] | 6800.000 |"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}
