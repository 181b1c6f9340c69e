package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/internal/testkit/testlatency"
	"github.com/agentpen/agentpen/internal/testkit/workbenchtest"
	"github.com/agentpen/agentpen/workbench/client"
	"github.com/agentpen/agentpen/workbench/episode"
	"github.com/agentpen/agentpen/workbench/sandbox"
)

// The end-to-end benchmarks run a real `workbench serve` (built here, run
// as root with the uid sandbox) on a unix socket and drive it over the
// WebSocket, as a trainer would.

// serveProc is a running `workbench serve`.
type serveProc struct{ *workbenchtest.Server }

func startServe(b *testing.B) *serveProc {
	b.Helper()
	testenv.RequireRoot(b) // the server runs episodes as sandbox uids
	// Room for a closing session's slot to be freed while the next ones
	// connect.
	return &serveProc{workbenchtest.Serve(b, workbenchtest.Options{Args: []string{"--max-sessions", "16"}})}
}

// rss returns the server's resident set (VmRSS) in bytes.
func (s *serveProc) rss() int64 { return s.status("VmRSS") }

// status returns a size field of the server's /proc/<pid>/status in
// bytes (VmRSS; RssFile: its pages that are the binary's, mapped from
// the page cache), 0 when it cannot be read.
func (s *serveProc) status(field string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", s.Cmd.Process.Pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// cpu returns the CPU time (user and system) of process pid and of its
// children that ended and were waited for, theirs included all the way
// down (/proc/<pid>/stat), 0 when it cannot be read.
func cpu(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 16 {
		return 0
	}
	var ticks int64
	for _, v := range f[11:15] { // utime, stime, cutime, cstime
		n, _ := strconv.ParseInt(v, 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks
}

// machineCPU returns the machine's busy CPU time (all but idle and
// waiting for I/O) and all of it, over every core (/proc/stat).
func machineCPU() (busy, all time.Duration) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	for i, v := range strings.Fields(line)[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		d := time.Duration(n) * time.Second / clockTicks
		all += d
		if i != 3 && i != 4 { // idle, iowait
			busy += d
		}
	}
	return busy, all
}

// kernelCPU returns the CPU time of the kernel's threads (kthreadd and
// its children: the workers that free network namespaces, RCU, soft
// interrupts), the work a run leaves the kernel that no process of it is
// charged for (and any other's besides).
func kernelCPU() time.Duration {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	var total time.Duration
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		if f := strings.Fields(string(b[i+1:])); i > 0 && len(f) > 12 && (pid == 2 || f[1] == "2") {
			u, _ := strconv.ParseInt(f[11], 10, 64)
			s, _ := strconv.ParseInt(f[12], 10, 64)
			total += time.Duration(u+s) * time.Second / clockTicks
		}
	}
	return total
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// dial opens a session on the server's unix socket, as a trainer in the
// workspace's container would.
func (s *serveProc) dial(b *testing.B) *client.Session {
	b.Helper()
	return workbenchtest.Dial(b, b.Context(), s.Socket)
}

// BenchmarkWSListFiles: list_files over the WebSocket, against the same
// call on an in-process environment, interleaved; the difference is what
// the wire adds.
func BenchmarkWSListFiles(b *testing.B) {
	srv := startServe(b)
	ctx := b.Context()
	ws := srv.dial(b)
	if _, err := ws.Reset(ctx, client.ResetOptions{TaskID: "data/csv_region_total"}); err != nil {
		b.Fatal(err)
	}
	sb, err := sandbox.New(sandbox.Config{})
	if err != nil {
		b.Fatal(err)
	}
	env, err := episode.New(episode.Config{Sandbox: sb})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { env.Close() })
	if _, err := env.Reset(context.Background(), episode.ResetOptions{TaskID: "data/csv_region_total"}); err != nil {
		b.Fatal(err)
	}
	var wire, local testlatency.Samples
	steps := 0
	for i := 0; i < b.N; i++ {
		if steps == 18 {
			ws.Reset(ctx, client.ResetOptions{TaskID: "data/csv_region_total"})
			env.Reset(context.Background(), episode.ResetOptions{TaskID: "data/csv_region_total"})
			steps = 0
		}
		local.Time(func() {
			if _, err := env.Step(context.Background(), episode.Action{Tool: "list_files"}); err != nil {
				b.Fatal(err)
			}
		})
		wire.Time(func() {
			if _, err := ws.Step(ctx, "list_files", nil); err != nil {
				b.Fatal(err)
			}
		})
		steps++
	}
	wire.Report(b, "")
	local.Report(b, "raw-")
}

// episodeRounds bounds BenchmarkWSEpisodes' rounds.
const episodeRounds = 3

// episodeTasks are the tasks the throughput benchmark cycles through: one
// per domain, text and code.
var episodeTasks = []string{"data/csv_region_total", "software/median", "data/csv_region_total@1", "software/median@1"}

// BenchmarkWSEpisodes: oracle episodes over the WebSocket by 8 concurrent
// sessions against 1 session: wall time per episode (median-ns: 8
// sessions; raw-median-ns: 1 session); what the 8 sessions' episodes
// cost the machine, per core (cap-median-ns: the CPU time of the server,
// its children, this client and the kernel's threads per episode, divided
// by the cores: 8 sessions, bound by the cores, take that long per
// episode on a machine of their own), and in the same rounds the CPU time
// of everything else (others-) and the idle time (idle-), per episode and
// core; and the server's resident memory idle (rss-idle-bytes; of it, its
// binary's pages, rss-idle-file-bytes, and the rest, rss-idle-own-bytes)
// and at most during the 8 sessions (rss-8-sessions-bytes). Each round
// plays 4 episodes on one session, then 4 on each of 8 sessions at once;
// it runs at most episodeRounds rounds whatever b.N is (a round takes
// seconds).
func BenchmarkWSEpisodes(b *testing.B) {
	srv := startServe(b)
	ctx := b.Context()
	time.Sleep(200 * time.Millisecond)
	idleRSS, idleFile := srv.rss(), srv.status("RssFile")
	const perSession = 4
	var one, eight, capacity, others, idle testlatency.Samples
	var peak int64
	for i := 0; i < min(b.N, episodeRounds); i++ {
		ws := srv.dial(b)
		start := time.Now()
		for e := range perSession {
			if err := workbenchtest.PlayOracle(ctx, ws, episodeTasks[e%len(episodeTasks)]); err != nil {
				b.Fatal(err)
			}
		}
		one = append(one, time.Since(start)/perSession)
		ws.Close()

		sessions := make([]*client.Session, 8)
		for s := range sessions {
			sessions[s] = srv.dial(b)
		}
		stop := make(chan struct{})
		var sampler sync.WaitGroup
		sampler.Go(func() {
			for {
				if r := srv.rss(); r > peak {
					peak = r
				}
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Millisecond):
				}
			}
		})
		cpu0 := cpu(srv.Cmd.Process.Pid) + cpu(os.Getpid()) + kernelCPU()
		busy0, all0 := machineCPU()
		start = time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, len(sessions))
		for s, w := range sessions {
			wg.Go(func() {
				for e := range perSession {
					if err := workbenchtest.PlayOracle(ctx, w, episodeTasks[(s+e)%len(episodeTasks)]); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		episodes := time.Duration(perSession * len(sessions))
		eight = append(eight, time.Since(start)/episodes)
		ours := cpu(srv.Cmd.Process.Pid) + cpu(os.Getpid()) + kernelCPU() - cpu0
		capacity = append(capacity, ours/episodes/time.Duration(runtime.NumCPU()))
		busy1, all1 := machineCPU()
		others = append(others, max(busy1-busy0-ours, 0)/episodes/time.Duration(runtime.NumCPU()))
		idle = append(idle, max(all1-all0-(busy1-busy0), 0)/episodes/time.Duration(runtime.NumCPU()))
		close(stop)
		sampler.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		for _, w := range sessions {
			w.Close()
		}
	}
	eight.Report(b, "")
	one.Report(b, "raw-")
	capacity.Report(b, "cap-")
	others.Report(b, "others-")
	idle.Report(b, "idle-")
	b.ReportMetric(float64(idleRSS), "rss-idle-bytes")
	b.ReportMetric(float64(idleRSS-idleFile), "rss-idle-own-bytes")
	b.ReportMetric(float64(idleFile), "rss-idle-file-bytes")
	b.ReportMetric(float64(peak), "rss-8-sessions-bytes")
}
