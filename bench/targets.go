package main

import (
	"slices"
	"time"
)

// A Target is one line of issue 16's targets: which benchmark (and, for a
// memory target, which metric) it reads and what bounds it. Exactly one
// bound is set. A benchmark reports median-ns, p90-ns and n
// (internal/testkit/testlatency), and raw-median-ns for a raw limit it
// measures interleaved; one that measures several things reports each as a
// family of its own (up-median-ns, raw-up-median-ns, cli-up-median-ns,
// ...), and a target names the families it reads (Prefix, RawPrefix). The
// benchmark's package goes into Packages.
type Target struct {
	// Name is what the table shows, e.g. "reset".
	Name string
	// Benchmark is the benchmark's name as go test prints it without the
	// -GOMAXPROCS suffix, sub-benchmarks included ("BenchmarkTool/check").
	Benchmark string
	// Metric is the metric a byte target reads (e.g. rss-idle-bytes);
	// empty means a latency family's median.
	Metric string
	// Prefix is the latency family the target reads
	// (internal/testkit/testlatency's prefix): "up-" reads up-median-ns,
	// up-p90-ns and up-n; empty means median-ns.
	Prefix string
	// RawPrefix is the family of the raw limit that OverRaw and MaxRatio
	// compare with; empty means "raw-" + Prefix.
	RawPrefix string
	// Seed is the seed's figure from issue 16, for reference only.
	Seed string

	// Max bounds the median.
	Max time.Duration
	// MaxP99 bounds the 99th percentile (the family's p99-ns), MaxP95
	// the 95th (p95-ns).
	MaxP99 time.Duration
	MaxP95 time.Duration
	// OverRaw bounds the median minus the raw median.
	OverRaw time.Duration
	// MaxRatio bounds the median divided by the raw median.
	MaxRatio float64
	// MaxBytes bounds Metric.
	MaxBytes int64
}

// Packages are the packages whose benchmarks make bench runs.
var Packages = []string{"./workbench/sandbox", "./workbench/episode", "./workbench/probe/gitaudit", "./bench", "./adapter/docker", "./launcher"}

// Targets are issue 16's targets (and issue 27's, the fork server's, and
// issue 29's, the pool's): the workbench's, then the campaigns'.
var Targets = slices.Concat(workbenchTargets, integrityTargets, campaignTargets("none"), campaignTargets("per-agent"), poolTargets, kubeTargets)

// integrityTargets are issue 44's: an image's first git audit of a
// repository of 10,000 commits (gitaudit.BenchmarkGitAudit), bounded and
// compared with C git listing every object the history reaches, measured
// in the same run; and the probe's work for a repository whose audit is
// cached (attest.GitCache: finding it and its state key).
var integrityTargets = []Target{
	{Name: "git audit of 10,000 commits, an image's first", Benchmark: "BenchmarkGitAudit", Prefix: "first-", Max: time.Second},
	{Name: "git audit of 10,000 commits vs git rev-list --objects --all", Benchmark: "BenchmarkGitAudit", Prefix: "first-", MaxRatio: 2},
	{Name: "git audit of 10,000 commits, cached (state key unchanged)", Benchmark: "BenchmarkGitAudit", Prefix: "key-", Max: 100 * time.Millisecond},
}

// kubeTargets are issue 37's: a campaign of 256 workspaces on the
// project's node (adapter/kube.BenchmarkKubeCampaign256, build tag kube,
// make kube-bench), its bring-up and its removal beside raw client-go
// making the same objects at the same concurrency, without a journal or
// a check.
var kubeTargets = []Target{
	{Name: "cluster: 256 workspaces brought up, vs raw client-go", Benchmark: "BenchmarkKubeCampaign256", Prefix: "up-", MaxRatio: 1.15},
	{Name: "cluster: 256 workspaces removed and verified, vs raw client-go", Benchmark: "BenchmarkKubeCampaign256", Prefix: "down-", MaxRatio: 1.15},
}

// poolTargets are issue 29's: a claim of a pooled workspace to its first
// tool answer through its base_url while the pool lasts
// (launcher.BenchmarkPoolClaimAPI); adapter.BenchmarkPoolClaim's rows
// are listed beside them, with no target: the same on the workspace's
// socket (warm-) and the drained pool's cold create (cold-).
//
// Issue 41's: the sequential claims' p99, a burst of 16 and of 64 claims
// at once (launcher.BenchmarkPoolClaimBurstAPI, five bursts of each
// pooled; its raw-burst- control, the same first answers without the
// claim, beside them), and the time to interactive of a cold campaign
// of 1 and 8 workspaces against the floor measured in the same rounds
// (adapter.BenchmarkTimeToInteractive: the raw SDK's create and start
// of the same containers and one exec round in each), and the memory of
// one workspace in three states (adapter.BenchmarkDensity).
var poolTargets = []Target{
	{Name: "pool: claim to first tool answer (p50)", Benchmark: "BenchmarkPoolClaimAPI", Prefix: "warm-", Max: 50 * time.Millisecond},
	{Name: "pool: claim to first tool answer (p95)", Benchmark: "BenchmarkPoolClaimAPI", Prefix: "warm-", MaxP95: 150 * time.Millisecond},
	{Name: "pool: claim to first tool answer (p99)", Benchmark: "BenchmarkPoolClaimAPI", Prefix: "warm-", MaxP99: 50 * time.Millisecond},
	{Name: "pool: a burst of 16 claims, each to its first answer (p99 of 5 bursts)", Benchmark: "BenchmarkPoolClaimBurstAPI", Prefix: "burst-16-", MaxP99: 150 * time.Millisecond},
	{Name: "pool: a burst of 64 claims, each to its first answer (p99 of 5 bursts)", Benchmark: "BenchmarkPoolClaimBurstAPI", Prefix: "burst-64-", MaxP99: 400 * time.Millisecond},
	{Name: "time to interactive, cold, 1 workspace (attested) vs the floor", Benchmark: "BenchmarkTimeToInteractive", Prefix: "cold-1-", MaxRatio: 1.3},
	{Name: "time to interactive, cold, 8 workspaces (attested) vs the floor", Benchmark: "BenchmarkTimeToInteractive", Prefix: "cold-8-", MaxRatio: 1.3},
	// Density (adapter.BenchmarkDensity): one workspace's PSS, the median
	// of 8 brought up together; >= 100 idle workspaces per GiB, >= 50
	// with a session reset (its fork server's template started).
	{Name: "density: PSS of an idle workspace (>= 100 per GiB)", Benchmark: "BenchmarkDensity", Metric: "pss-idle-bytes", MaxBytes: (1 << 30) / 100},
	{Name: "density: PSS of a workspace with a session reset, its template ready (>= 50 per GiB)", Benchmark: "BenchmarkDensity", Metric: "pss-template-bytes", MaxBytes: (1 << 30) / 50},
	{Name: "density: PSS of a workspace with a live episode (after a run)", Benchmark: "BenchmarkDensity", Metric: "pss-live-bytes"},
	{Name: "density: PSS of the grader (one per campaign)", Benchmark: "BenchmarkDensity", Metric: "pss-grader-bytes"},
}

var workbenchTargets = []Target{
	// Issue 40: a reset after an episode that ended takes the workspace
	// made ahead (namespaces, tmpfs and fork server, made once the ended
	// one was torn down, after its answer) and writes the task's files;
	// the seed's reset made a directory. Its ratio bound is 0.6 ms over a
	// bare spawn of this machine (about 9.3 ms).
	{Name: "reset after an episode (the next made ahead; idle machine)", Benchmark: "BenchmarkReset", Seed: "0.62 ms", Max: 600 * time.Microsecond},
	{Name: "reset after an episode vs bare spawn", Benchmark: "BenchmarkReset", MaxRatio: 0.065},
	{Name: "episode namespaces set-up and tear-down (made ahead, off reset's path)", Benchmark: "BenchmarkEpisodeSetup", Max: 10 * time.Millisecond},
	{Name: "fork flood at the process limit, 4 busy loops per core: end of run to last process reaped (p99)", Benchmark: "BenchmarkForkFloodKill", MaxP99: 250 * time.Millisecond},
	{Name: "submit, text task", Benchmark: "BenchmarkSubmitText", Seed: "1.4 ms", Max: 800 * time.Microsecond},
	{Name: "submit, text task, after a code run (fork server up)", Benchmark: "BenchmarkSubmitTextAfterRun", Seed: "1.5 ms", Max: 900 * time.Microsecond},
	{Name: "list_files", Benchmark: "BenchmarkTool/list_files", Max: 100 * time.Microsecond},
	{Name: "read_file", Benchmark: "BenchmarkTool/read_file", Max: 100 * time.Microsecond},
	{Name: "check", Benchmark: "BenchmarkTool/check", Max: 100 * time.Microsecond},
	{Name: "write_file", Benchmark: "BenchmarkTool/write_file", Max: 200 * time.Microsecond},
	{Name: "WebSocket overhead (list_files)", Benchmark: "BenchmarkWSListFiles", Seed: "about 0.2 ms", OverRaw: 150 * time.Microsecond},
	{Name: "MCP tool call vs step", Benchmark: "BenchmarkMCPToolCall", OverRaw: time.Millisecond},
	// Every run spawned (Config.NoForkServer): the fallback, and the
	// control of the fork server's rows below.
	{Name: "run_python print(1) vs bare spawn", Benchmark: "BenchmarkRunPython", Seed: "bare + 2.7 ms", OverRaw: time.Millisecond},
	{Name: "run_tests (1 + 3 examples) vs bare spawn", Benchmark: "BenchmarkRunTests", Seed: "8.7x", MaxRatio: 6},
	{Name: "submit, code task (3 + 6 cases) vs bare spawn", Benchmark: "BenchmarkSubmitCode", Seed: "19.6x", MaxRatio: 12},
	// Issue 27: runs forked from the episode's fork server (the default).
	{Name: "fork server: run_python vs bare spawn", Benchmark: "BenchmarkForkRunPython", MaxRatio: 0.3},
	{Name: "fork server: run_tests (1 + 3) vs bare spawn", Benchmark: "BenchmarkForkRunTests", MaxRatio: 2},
	{Name: "fork server: submit, code task (3 + 6) vs bare spawn", Benchmark: "BenchmarkForkSubmitCode", MaxRatio: 4},
	{Name: "fork server: first run_tests after a reset, back to back, vs bare spawn", Benchmark: "BenchmarkForkFirstRunTests", MaxRatio: 2},
	{Name: "fork server: RSS per live episode beyond one idle interpreter", Benchmark: "BenchmarkForkServerMemory", Metric: "beyond-idle-bytes", MaxBytes: 10 << 20},
	// Issue 40: 8 sessions are bound by the machine's cores, so their wall
	// time measures the other load of a shared machine as much as the
	// server (on this machine other tests took half the cores during the
	// 8 sessions and hardly any of one session's time). The row reads
	// what the 8 sessions' episodes cost the machine: the CPU time of the
	// server, its children, this client and the kernel's threads per
	// episode, per core (cap-), against one session's wall time; the wall
	// time of the 8 sessions is beside it, with the others' CPU time
	// (others-) and the idle time (idle-) in the same rounds.
	{Name: "8 sessions: the machine's time per episode (CPU per core) vs 1 session's (>= 1.8x episodes/min)", Benchmark: "BenchmarkWSEpisodes", Prefix: "cap-", RawPrefix: "raw-", MaxRatio: 0.55},
	// Issue 40: an idle server's RSS is mostly its binary's pages, mapped
	// from the page cache (the kernel maps 64 KiB around each page
	// touched): about 0.77x the binary's size for any Go server (a bare
	// net/http one: 4.4 of its 5.7 MB). The bound is on what is its own.
	{Name: "workbench serve RSS idle", Benchmark: "BenchmarkWSEpisodes", Metric: "rss-idle-bytes", Seed: "34 MB"},
	{Name: "workbench serve RSS idle: its binary's pages", Benchmark: "BenchmarkWSEpisodes", Metric: "rss-idle-file-bytes"},
	{Name: "workbench serve RSS idle less its binary's pages", Benchmark: "BenchmarkWSEpisodes", Metric: "rss-idle-own-bytes", MaxBytes: 2 << 20},
	{Name: "workbench serve RSS, 8 live sessions", Benchmark: "BenchmarkWSEpisodes", Metric: "rss-8-sessions-bytes", MaxBytes: 24 << 20},
}

// campaignTargets are a campaign's of 1 server + 16 workspaces in a
// topology (adapter.BenchmarkCampaign16): bring-up and teardown against
// the raw limit (the same containers, and networks, by direct SDK calls
// with no journal, proof or readiness) and the sequential docker CLI, all
// measured in the same rounds; cleanup with verification; the
// attestation's own time, its probes apart.
func campaignTargets(topology string) []Target {
	bench := "BenchmarkCampaign16/" + topology
	name := "campaign 1+16, " + topology + ": "
	return []Target{
		{Name: name + "bring-up vs raw SDK", Benchmark: bench, Prefix: "up-", MaxRatio: 1.15},
		{Name: name + "bring-up vs sequential docker CLI", Benchmark: bench, Prefix: "up-", RawPrefix: "cli-up-", MaxRatio: 0.6},
		{Name: name + "teardown vs raw SDK", Benchmark: bench, Prefix: "down-", MaxRatio: 1.15},
		{Name: name + "teardown vs sequential docker CLI", Benchmark: bench, Prefix: "down-", RawPrefix: "cli-down-", MaxRatio: 0.6},
		{Name: name + "cleanup with verification", Benchmark: bench, Prefix: "down-", Max: 2 * time.Second},
		{Name: name + "attestation without the probes", Benchmark: bench, Prefix: "attest-noprobes-", Max: time.Second},
	}
}

// Scales are the marginal-cost tables: a campaign's bring-up and teardown
// from 1 to 64 workspaces (adapter.BenchmarkCampaignScale).
var Scales = []Scale{campaignScale("none"), campaignScale("per-agent")}

func campaignScale(topology string) Scale {
	return Scale{Name: "campaign, " + topology, Benchmark: "BenchmarkCampaignScale/" + topology, Unit: "workspaces",
		Sizes: []int{1, 8, 16, 32, 64}, Steps: []Step{{Name: "bring-up", Stem: "up"}, {Name: "teardown", Stem: "down"}}}
}

// A Scale is a marginal-cost table: a benchmark that reports one latency
// family per size and step (<stem>-<size>-median-ns, e.g.
// up-16-median-ns), shown per size with the median's growth per unit added
// since the size before.
type Scale struct {
	// Name is what the table shows, e.g. "campaign, topology none".
	Name string
	// Benchmark is the benchmark's name as go test prints it.
	Benchmark string
	// Unit names what a size counts, e.g. "workspaces".
	Unit string
	// Sizes are the sizes measured, ascending.
	Sizes []int
	// Steps are the steps measured at each size.
	Steps []Step
}

// A Step is one measured step of a Scale: its name and the stem of its
// families.
type Step struct {
	Name string
	Stem string
}
