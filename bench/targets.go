package main

import "time"

// A Target is one line of issue 16's targets: which benchmark (and, for
// a memory target, which metric) it reads and what bounds it. Exactly one
// bound is set. Campaign targets (adapter/) are added here the same way:
// the benchmark reports median-ns, p90-ns and n (internal/latency), and
// raw-median-ns for a raw limit it measures interleaved; its package goes
// into Packages.
type Target struct {
	// Name is what the table shows, e.g. "reset".
	Name string
	// Benchmark is the benchmark's name as go test prints it without the
	// -GOMAXPROCS suffix, sub-benchmarks included ("BenchmarkTool/check").
	Benchmark string
	// Metric is the metric a byte target reads (e.g. rss-idle-bytes);
	// empty means median-ns.
	Metric string
	// Seed is the seed's figure from issue 16, for reference only.
	Seed string

	// Max bounds the median.
	Max time.Duration
	// OverRaw bounds the median minus the raw median.
	OverRaw time.Duration
	// MaxRatio bounds the median divided by the raw median.
	MaxRatio float64
	// MaxBytes bounds Metric.
	MaxBytes int64
}

// Packages are the packages whose benchmarks make bench runs.
var Packages = []string{"./workbench/sandbox", "./workbench/episode", "./bench"}

// Targets are issue 16's targets for the workbench.
var Targets = []Target{
	{Name: "reset", Benchmark: "BenchmarkReset", Seed: "0.62 ms", Max: 400 * time.Microsecond},
	{Name: "submit, text task", Benchmark: "BenchmarkSubmitText", Seed: "1.4 ms", Max: 800 * time.Microsecond},
	{Name: "list_files", Benchmark: "BenchmarkTool/list_files", Max: 100 * time.Microsecond},
	{Name: "read_file", Benchmark: "BenchmarkTool/read_file", Max: 100 * time.Microsecond},
	{Name: "check", Benchmark: "BenchmarkTool/check", Max: 100 * time.Microsecond},
	{Name: "write_file", Benchmark: "BenchmarkTool/write_file", Max: 200 * time.Microsecond},
	{Name: "WebSocket overhead (list_files)", Benchmark: "BenchmarkWSListFiles", Seed: "about 0.2 ms", OverRaw: 150 * time.Microsecond},
	{Name: "run_python print(1) vs bare spawn", Benchmark: "BenchmarkRunPython", Seed: "bare + 2.7 ms", OverRaw: time.Millisecond},
	{Name: "run_tests (1 + 3 examples) vs bare spawn", Benchmark: "BenchmarkRunTests", Seed: "8.7x", MaxRatio: 6},
	{Name: "submit, code task (3 + 6 cases) vs bare spawn", Benchmark: "BenchmarkSubmitCode", Seed: "19.6x", MaxRatio: 12},
	{Name: "8 sessions: time per episode vs 1 session (>= 2x episodes/min)", Benchmark: "BenchmarkWSEpisodes", MaxRatio: 0.5},
	{Name: "workbench serve RSS idle", Benchmark: "BenchmarkWSEpisodes", Metric: "rss-idle-bytes", Seed: "34 MB", MaxBytes: 10 << 20},
	{Name: "workbench serve RSS, 8 live sessions", Benchmark: "BenchmarkWSEpisodes", Metric: "rss-8-sessions-bytes", MaxBytes: 24 << 20},
}
