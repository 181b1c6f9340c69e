package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/internal/testkit/workbenchtest"
	"github.com/agentpen/agentpen/workbench/client"
)

// procKB reads a "Vm...:  N kB" line of /proc/<pid>/status.
func procKB(t *testing.T, pid int, field string) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field+":" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// resetPeak makes VmHWM start again from the current RSS (proc(5),
// clear_refs "5").
func resetPeak(t *testing.T, pid int) {
	t.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		t.Fatal(err)
	}
}

// Memory targets of `workbench serve` (issue 16).
const (
	idleRSSLimitKB = 10 << 10
	liveRSSLimitKB = 24 << 10
	peakRSSLimitKB = 48 << 10
	// guard is how far over a target this test fails: it is a guard
	// against regressions on a busy machine, where a few hundred KiB of
	// RSS come and go; the targets themselves are make bench's
	// (bench/results.json says met or missed).
	guard = 1.5
)

// TestServeMemory (root): `workbench serve` with 8 concurrent WebSocket
// sessions, each playing an oracle episode to reward 1.0, run after run
// (WB_MEMORY_RUNS, default 3; the measure is 20): its resident set
// idle, with 8 live sessions, and at its peak (VmHWM, reset before each
// run) stay within the targets. WB_MEMORY_BINARY runs another build of the
// binary instead (to measure an older one).
func TestServeMemory(t *testing.T) {
	testenv.RequireRoot(t)
	runs := 3
	if n, err := strconv.Atoi(os.Getenv("WB_MEMORY_RUNS")); err == nil && n > 0 {
		runs = n
	}
	profile := os.Getenv("WB_MEMORY_PROFILE") // a directory to save the heap and allocation profiles in
	var extra []string
	if profile != "" {
		extra = []string{"--debug-listen", "127.0.0.1:0"}
	}
	ls := workbenchtest.Serve(t, workbenchtest.Options{Binary: os.Getenv("WB_MEMORY_BINARY"), Args: extra})
	pid := ls.Cmd.Process.Pid
	var picks []struct{ ID, Domain, Kind string }
	for _, s := range specs(t) {
		if _, err := os.Stat(filepath.Join(oracles, s.ID+".py")); err == nil {
			picks = append(picks, s)
		}
	}
	time.Sleep(time.Second)
	idle := procKB(t, pid, "VmRSS")
	episodes := 1
	if e, err := strconv.Atoi(os.Getenv("WB_MEMORY_EPISODES")); err == nil && e > 0 {
		episodes = e
	}
	// The whole tree (the server, its launchers and the agents' Pythons)
	// is sampled too: a peak there is not the server's.
	stopSampling := make(chan struct{})
	var sampling sync.WaitGroup
	maxTree, treeParts := 0, ""
	sampling.Go(func() {
		for {
			if kb, parts := treeRSS(pid); kb > maxTree {
				maxTree, treeParts = kb, parts
			}
			select {
			case <-stopSampling:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	})
	const n = 8
	maxLive, maxPeak := 0, 0
	var peaks []int
	for r := range runs {
		resetPeak(t, pid)
		ctx, cancel := context.WithCancel(testenv.Context(t))
		var ready, played sync.WaitGroup
		ready.Add(n)
		start := make(chan struct{})
		errs := make(chan error, n)
		for i := range n {
			p := picks[(r*n+i)%len(picks)]
			played.Go(func() {
				w, err := client.Dial(ctx, ls.URL)
				if err != nil {
					ready.Done()
					errs <- err
					return
				}
				defer w.Close()
				if _, err := w.Reset(ctx, client.ResetOptions{TaskID: p.ID}); err != nil {
					ready.Done()
					errs <- err
					return
				}
				ready.Done()
				<-start
				for e := range episodes {
					p := picks[(r*n*episodes+i*episodes+e)%len(picks)]
					if err := playIsolated(ctx, w, p.ID, fmt.Sprintf("%d-%d-%d", r, i, e)); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		ready.Wait()
		live := procKB(t, pid, "VmRSS")
		if profile != "" && r == 0 {
			saveProfile(t, debugAddr(t, ls.Logs.String()), "heap", filepath.Join(profile, "heap-live.pb.gz"))
		}
		close(start)
		played.Wait()
		cancel()
		close(errs)
		for err := range errs {
			t.Errorf("run %d: %v", r, err)
		}
		// The server frees a slot once the session's episode is cleaned
		// up, after the client's close: wait for all of them.
		testenv.WaitFor(t, fmt.Sprintf("run %d's sessions to end", r), func() bool {
			return strings.Count(ls.Logs.String(), `"msg":"session end"`) >= n*(r+1)
		})
		peak := procKB(t, pid, "VmHWM")
		peaks = append(peaks, peak)
		maxLive, maxPeak = max(maxLive, live), max(maxPeak, peak)
	}
	close(stopSampling)
	sampling.Wait()
	if profile != "" {
		base := debugAddr(t, ls.Logs.String())
		for _, name := range []string{"heap", "allocs"} {
			saveProfile(t, base, name, filepath.Join(profile, name+".pb.gz"))
		}
	}
	t.Logf("workbench serve RSS: idle %.1f MB; with %d live sessions up to %.1f MB; peak per run (MB) %v; max %.1f MB over %d runs of %d episodes per session; the process tree peaked at %.1f MB (sampled every 5 ms: %s)",
		mb(idle), n, mb(maxLive), mbs(peaks), mb(maxPeak), runs, episodes, mb(maxTree), treeParts)
	if os.Getenv("WB_MEMORY_BINARY") != "" {
		return // measuring another build: no targets
	}
	if float64(idle) > guard*idleRSSLimitKB {
		t.Errorf("idle RSS %.1f MB, more than %.1fx the 10 MB target", mb(idle), guard)
	}
	if float64(maxLive) > guard*liveRSSLimitKB {
		t.Errorf("RSS with %d live sessions %.1f MB, more than %.1fx the 24 MB target", n, mb(maxLive), guard)
	}
	if float64(maxPeak) > guard*peakRSSLimitKB {
		t.Errorf("peak RSS %.1f MB, more than %.1fx the 48 MB target", mb(maxPeak), guard)
	}
}

// saveProfile saves the named pprof profile of the server at base.
func saveProfile(t *testing.T, base, name, path string) {
	t.Helper()
	resp, err := http.Get(base + "/debug/pprof/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// treeRSS sums VmRSS over pid and every process below it, and says what
// they were ("python3 x8 70.1 MB, workbench x9 ..." by command name).
func treeRSS(pid int) (int, string) {
	children := map[int][]int{}
	rss := map[int]int{}
	comm := map[int]string{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			switch {
			case len(f) >= 2 && f[0] == "Name:":
				comm[p] = f[1]
			case len(f) >= 2 && f[0] == "PPid:":
				pp, _ := strconv.Atoi(f[1])
				children[pp] = append(children[pp], p)
			case len(f) >= 2 && f[0] == "VmRSS:":
				rss[p], _ = strconv.Atoi(f[1])
			}
		}
	}
	total := 0
	count, kb := map[string]int{}, map[string]int{}
	for stack := []int{pid}; len(stack) > 0; {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		total += rss[p]
		count[comm[p]]++
		kb[comm[p]] += rss[p]
		stack = append(stack, children[p]...)
	}
	var parts []string
	for name, n := range count {
		parts = append(parts, fmt.Sprintf("%s x%d %.1f MB", name, n, mb(kb[name])))
	}
	sort.Strings(parts)
	return total, strings.Join(parts, ", ")
}

func mb(kb int) float64 { return float64(kb) / 1024 }

func mbs(kbs []int) []string {
	var out []string
	for _, k := range kbs {
		out = append(out, fmt.Sprintf("%.1f", mb(k)))
	}
	return out
}
