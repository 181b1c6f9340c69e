// Package testlatency records per-operation times in Go benchmarks and reports
// their median, 90th and 99th percentiles and count as benchmark metrics,
// under the names `make bench` (package bench) reads: median-ns, p90-ns,
// p99-ns and n, and
// with a prefix for a raw limit measured in the same benchmark
// (raw-median-ns, raw-p90-ns, raw-n). It does not decide pass or miss:
// the bench targets do.
package testlatency

import (
	"slices"
	"testing"
	"time"
)

// Samples are the measured times of one operation.
type Samples []time.Duration

// Time runs fn and records how long it took.
func (s *Samples) Time(fn func()) {
	start := time.Now()
	fn()
	*s = append(*s, time.Since(start))
}

// Quantile returns the q-quantile (0..1, nearest rank) of s; 0 when s is
// empty.
func (s Samples) Quantile(q float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	sorted := slices.Clone(s)
	slices.Sort(sorted)
	i := int(q*float64(len(sorted)-1) + 0.5)
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// Median returns the median of s.
func (s Samples) Median() time.Duration { return s.Quantile(0.5) }

// Report reports s on b as <prefix>median-ns, <prefix>p90-ns,
// <prefix>p99-ns and <prefix>n; prefix is "" for the measured operation
// and "raw-" for its raw limit.
func (s Samples) Report(b *testing.B, prefix string) {
	if len(s) == 0 {
		return
	}
	b.ReportMetric(float64(s.Median().Nanoseconds()), prefix+"median-ns")
	b.ReportMetric(float64(s.Quantile(0.9).Nanoseconds()), prefix+"p90-ns")
	b.ReportMetric(float64(s.Quantile(0.95).Nanoseconds()), prefix+"p95-ns")
	b.ReportMetric(float64(s.Quantile(0.99).Nanoseconds()), prefix+"p99-ns")
	b.ReportMetric(float64(len(s)), prefix+"n")
}
