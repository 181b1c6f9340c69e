// Command bench is `make bench`: it runs the benchmarks of Packages with
// -benchmem, reads the latency metrics they report (package
// internal/latency: median-ns, p90-ns, n, and raw-median-ns for a raw
// limit measured in the same benchmark), checks them against Targets,
// prints a table, and writes bench/results.json and docs/bench.md (the
// latest table and the machine it ran on). Every benchmark that reports
// median-ns gets a row, with or without a target. Run it from the
// repository root, as root (the uid sandbox), e.g.
//
//	go run ./bench -benchtime 50x
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// Result is one row of bench/results.json.
type Result struct {
	Target    string  `json:"target"`
	Value     float64 `json:"value"`
	Unit      string  `json:"unit"`
	Pass      *bool   `json:"pass"` // null: no target
	Limit     string  `json:"limit,omitempty"`
	Benchmark string  `json:"benchmark"`
	// Family and RawFamily are the latency families read (empty: the
	// unprefixed one, and "raw-").
	Family    string  `json:"family,omitempty"`
	RawFamily string  `json:"raw_family,omitempty"`
	MedianMS  float64 `json:"median_ms,omitempty"`
	P90MS     float64 `json:"p90_ms,omitempty"`
	P99MS     float64 `json:"p99_ms,omitempty"`
	N         int     `json:"n,omitempty"`
	RawMS     float64 `json:"raw_median_ms,omitempty"`
	Ratio     float64 `json:"ratio_to_raw,omitempty"`
	Seed      string  `json:"seed,omitempty"`
	// Size and PerAddedMS are a scale row's: its size (e.g. workspaces)
	// and the median's growth per unit added since the size before.
	Size       int     `json:"size,omitempty"`
	PerAddedMS float64 `json:"per_added_ms,omitempty"`
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	benchtime := fs.String("benchtime", "30x", "go test -benchtime")
	pattern := fs.String("bench", ".", "go test -bench pattern")
	results := fs.String("results", "bench/results.json", "where to write the results")
	doc := fs.String("doc", "docs/bench.md", "where to write the table (empty: nowhere)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	goArgs := append([]string{"test", "-run", "^$", "-bench", *pattern, "-benchmem", "-benchtime", *benchtime, "-count", "1", "-timeout", "60m"}, Packages...)
	cmd := exec.Command("go", goArgs...)
	var out bytes.Buffer
	cmd.Stdout = io.MultiWriter(&out, os.Stderr)
	cmd.Stderr = os.Stderr
	runErr := cmd.Run()
	metrics := parse(out.String())
	rows := evaluate(metrics)
	table := render(rows)
	fmt.Fprint(stdout, table)
	var data bytes.Buffer
	enc := json.NewEncoder(&data)
	enc.SetEscapeHTML(false) // "<= 0.40 ms", not "\u003c= 0.40 ms"
	enc.SetIndent("", "  ")
	if err := enc.Encode(rows); err != nil {
		return err
	}
	if err := os.WriteFile(*results, data.Bytes(), 0o644); err != nil {
		return err
	}
	if *doc != "" {
		md := "# Benchmarks (`make bench`)\n\nLatest run: " + machine() + "\n\n" + table + "\n" + docNotes
		if err := os.WriteFile(*doc, []byte(md), 0o644); err != nil {
			return err
		}
	}
	if runErr != nil {
		return fmt.Errorf("go test: %w", runErr)
	}
	return nil
}

// parse reads go test's benchmark lines into benchmark -> metric -> value.
func parse(out string) map[string]map[string]float64 {
	m := map[string]map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := f[0]
		if i := strings.LastIndex(name, "-"); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		vals := map[string]float64{}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				break
			}
			vals[f[i+1]] = v
		}
		m[name] = vals
	}
	return m
}

func ms(ns float64) float64 { return ns / 1e6 }

// evaluate makes the rows: one per target, then one per scale point,
// then one per other latency family of any benchmark (with its raw-
// family beside it when there is one).
func evaluate(metrics map[string]map[string]float64) []Result {
	var rows []Result
	used := map[string]map[string]bool{} // benchmark -> family
	use := func(bench, family string) {
		if used[bench] == nil {
			used[bench] = map[string]bool{}
		}
		used[bench][family] = true
	}
	for _, t := range Targets {
		m, ok := metrics[t.Benchmark]
		rawFamily := t.RawPrefix
		if rawFamily == "" {
			rawFamily = "raw-" + t.Prefix
		}
		r := Result{Target: t.Name, Benchmark: t.Benchmark, Seed: t.Seed, Family: t.Prefix}
		if t.MaxRatio > 0 || t.OverRaw > 0 {
			r.RawFamily = rawFamily
		}
		if !ok {
			r.Limit = "not run"
			rows = append(rows, r)
			continue
		}
		use(t.Benchmark, t.Prefix)
		p := t.Prefix
		r.MedianMS, r.P90MS, r.P99MS, r.N = ms(m[p+"median-ns"]), ms(m[p+"p90-ns"]), ms(m[p+"p99-ns"]), int(m[p+"n"])
		if raw, ok := m[rawFamily+"median-ns"]; ok && raw > 0 {
			use(t.Benchmark, rawFamily)
			r.RawMS, r.Ratio = ms(raw), m[p+"median-ns"]/raw
		}
		var pass bool
		switch {
		case t.MaxBytes > 0:
			r.Value, r.Unit = m[t.Metric]/(1<<20), "MiB"
			r.Limit = fmt.Sprintf("<= %d MiB", t.MaxBytes>>20)
			pass = m[t.Metric] > 0 && m[t.Metric] <= float64(t.MaxBytes)
			r.MedianMS, r.P90MS, r.N, r.RawMS, r.Ratio = 0, 0, 0, 0, 0
		case t.MaxP99 > 0:
			r.Value, r.Unit = r.P99MS, "ms (p99)"
			r.Limit = fmt.Sprintf("p99 <= %.2f ms", ms(float64(t.MaxP99)))
			pass = r.N > 0 && r.P99MS > 0 && r.P99MS <= ms(float64(t.MaxP99))
		case t.Max > 0:
			r.Value, r.Unit = r.MedianMS, "ms"
			r.Limit = fmt.Sprintf("<= %.2f ms", ms(float64(t.Max)))
			pass = r.N > 0 && r.MedianMS <= ms(float64(t.Max))
		case t.OverRaw > 0:
			r.Value, r.Unit = r.MedianMS-r.RawMS, "ms over raw"
			r.Limit = fmt.Sprintf("<= raw + %.2f ms", ms(float64(t.OverRaw)))
			pass = r.RawMS > 0 && r.Value <= ms(float64(t.OverRaw))
		case t.MaxRatio > 0:
			r.Value, r.Unit = r.Ratio, "x raw"
			r.Limit = fmt.Sprintf("<= %.2fx raw", t.MaxRatio)
			pass = r.RawMS > 0 && r.Ratio <= t.MaxRatio
		}
		r.Pass = &pass
		rows = append(rows, r)
	}
	for _, sc := range Scales {
		m := metrics[sc.Benchmark]
		for _, st := range sc.Steps {
			prev, prevSize := 0.0, 0
			for _, size := range sc.Sizes {
				p := fmt.Sprintf("%s-%d-", st.Stem, size)
				use(sc.Benchmark, p)
				r := Result{Target: fmt.Sprintf("%s: %s, %d %s", sc.Name, st.Name, size, sc.Unit), Benchmark: sc.Benchmark, Family: p, Size: size}
				med, ok := m[p+"median-ns"]
				if !ok {
					r.Limit = "not run"
					rows = append(rows, r)
					prevSize = 0
					continue
				}
				r.MedianMS, r.P90MS, r.N = ms(med), ms(m[p+"p90-ns"]), int(m[p+"n"])
				r.Value, r.Unit = r.MedianMS, "ms"
				if prevSize > 0 {
					r.PerAddedMS = (r.MedianMS - prev) / float64(size-prevSize)
				}
				prev, prevSize = r.MedianMS, size
				rows = append(rows, r)
			}
		}
	}
	var names []string
	for name := range metrics {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		m := metrics[name]
		fams := families(m)
		for _, f := range fams {
			if used[name][f] || strings.HasPrefix(f, "raw-") && slices.Contains(fams, strings.TrimPrefix(f, "raw-")) {
				continue
			}
			r := Result{Target: "(no target)", Benchmark: name, Family: f, Value: ms(m[f+"median-ns"]), Unit: "ms",
				MedianMS: ms(m[f+"median-ns"]), P90MS: ms(m[f+"p90-ns"]), N: int(m[f+"n"])}
			if raw, ok := m["raw-"+f+"median-ns"]; ok && raw > 0 {
				r.RawFamily = "raw-" + f
				r.RawMS, r.Ratio = ms(raw), m[f+"median-ns"]/raw
			}
			rows = append(rows, r)
		}
	}
	return rows
}

// families are the latency families a benchmark reported: each prefix p
// with a p+"median-ns" metric, sorted.
func families(m map[string]float64) []string {
	var out []string
	for k := range m {
		if p, ok := strings.CutSuffix(k, "median-ns"); ok {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

func render(rows []Result) string {
	var b strings.Builder
	b.WriteString("| target | benchmark | median ms | p90 ms | n | raw median ms | ratio | value | limit | pass | seed |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	var scale []Result
	for _, r := range rows {
		if r.Size > 0 {
			scale = append(scale, r)
			continue
		}
		pass := ""
		if r.Pass != nil {
			pass = map[bool]string{true: "pass", false: "MISS"}[*r.Pass]
		}
		value := ""
		if r.Unit != "" {
			value = strconv.FormatFloat(r.Value, 'f', 3, 64) + " " + r.Unit
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			r.Target, benchName(r), num(r.MedianMS), num(r.P90MS), count(r.N), num(r.RawMS), num(r.Ratio), value, r.Limit, pass, r.Seed)
	}
	if len(scale) == 0 {
		return b.String()
	}
	b.WriteString("\n| scale | benchmark | median ms | p90 ms | n | per added unit ms |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	for _, r := range scale {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", r.Target, benchName(r), num(r.MedianMS), num(r.P90MS), count(r.N), num(r.PerAddedMS))
	}
	return b.String()
}

// benchName is the benchmark with the families read, when not the
// unprefixed ones: "BenchmarkX [up- vs cli-up-]".
func benchName(r Result) string {
	switch {
	case r.RawFamily != "" && r.RawFamily != "raw-"+r.Family:
		return fmt.Sprintf("%s [%s vs %s]", r.Benchmark, r.Family, r.RawFamily)
	case r.Family != "":
		return fmt.Sprintf("%s [%s]", r.Benchmark, r.Family)
	}
	return r.Benchmark
}

func num(v float64) string {
	if v == 0 {
		return ""
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

func count(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

func machine() string {
	model := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	load, _ := os.ReadFile("/proc/loadavg")
	return fmt.Sprintf("%s, %s, %d cores, Linux %s, %s, euid %d, load average at the end %s (the machine is shared)",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), model, runtime.NumCPU(), strings.TrimSpace(string(kernel)), runtime.Version(), os.Geteuid(),
		strings.Join(strings.Fields(string(load))[:3], " "))
}

const docNotes = `Each row is one benchmark of ` + "`make bench`" + ` (` + "`go run ./bench`" + `): the median, 90th percentile
and count of per-operation times, and for spawning steps the bare ` + "`/usr/bin/python3 -E -s -c pass`" + `
spawn measured interleaved in the same benchmark ("raw"). The WebSocket row's raw is the same
call on an in-process environment; the 8-session row's raw is the time per episode of one
session. Seed figures are issue 16's, for reference. ` + "`bench/results.json`" + ` has the same rows.
How to add a target (campaign benchmarks in adapter/): see ` + "`bench/targets.go`" + `.

## What bounds the tight rows

The machine is shared (2 cores; other engineers' tests raise the load average to 10-20), so rows
near their limit move across it from run to run: in the runs of 2026-11-30, code submit measured
11.4x to 12.2x, run_tests 5.2x to 6.0x, 8 sessions 0.50x to 0.57x, run_python bare + 0.6 to
1.2 ms; and at load averages around 10, reset and text submit (thread hand-offs and small file
operations, each waiting for a core) rose from 0.17 / 0.10 ms to 0.8 / 1.7 ms in one run.

- **Code grading** (run_tests, code submit) is bounded by one interpreter start per graded case
  (the design: each case runs alone, from a clean state): 3 + 6 starts of the probe plus, for
  run_tests, test_solution.py. Neither imports anything (importing json cost about 9 ms of every
  run_tests: 23.6 -> 14.6 ms against a 12.4 ms bare start, measured interleaved). Per case the
  server adds the episode's /tmp and /dev/shm emptied, the digest, one switch to the uid, and the
  run's launcher (below). Going well below needs a pre-started interpreter per episode (issue
  27, on the namespaces of issue 21).
- **per-agent teardown** is bounded by the daemon's network removal: it removes networks one at
  a time (about 180 ms each here, with the server's endpoint on every one), so the raw SDK
  removal of 1 + 16 containers and 16 networks is itself about 2.9 s. agentpen's cleanup with
  verification is 1.0x that raw limit; "<= 0.6x the sequential CLI" and "cleanup <= 2 s" would
  need to beat the raw limit, so they miss. The none topology (the default) has no network and
  passes both (about 0.4 s).
- **8 sessions** cannot exceed about 2x one session on 2 cores: one session already keeps one core
  busy with interpreter starts.
- **reset** makes the episode's user, mount and network namespaces and its tmpfs (a set-up
  process cloned into them, about 1.9 ms: the episode set-up row) and drops the previous
  episode's (closing descriptors); nothing of an episode is on the server's file system to
  remove.
- **run_python** over the bare spawn: the launcher's exec, its setns into three namespaces and
  unshare of two (microseconds), two forks (the PID namespace's init and the program), and at
  the end three hand-offs the bare spawn does not have (the launcher wakes, kills the init, the
  init exits and empties the namespace, the launcher wakes again). In CPU time that is about
  1.2 ms (BenchmarkRunPass's cpu- row against raw-cpu-); in wall time each hand-off waits for a
  core, so on a busy machine the gap grows with the load (13 ms at a load average of 25-40).
`
