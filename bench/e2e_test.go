package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
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
func (s *serveProc) rss() int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", s.Cmd.Process.Pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

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
// sessions against 1 session, as wall time per episode (median-ns: 8
// sessions; raw-median-ns: 1 session), and the server's resident memory
// idle (rss-idle-bytes) and at most during the 8 sessions
// (rss-8-sessions-bytes). Each round plays 4 episodes on one session,
// then 4 on each of 8 sessions at once; it runs at most episodeRounds
// rounds whatever b.N is (a round takes seconds).
func BenchmarkWSEpisodes(b *testing.B) {
	srv := startServe(b)
	ctx := b.Context()
	time.Sleep(200 * time.Millisecond)
	idle := srv.rss()
	const perSession = 4
	var one, eight testlatency.Samples
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
		eight = append(eight, time.Since(start)/time.Duration(perSession*len(sessions)))
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
	b.ReportMetric(float64(idle), "rss-idle-bytes")
	b.ReportMetric(float64(peak), "rss-8-sessions-bytes")
}
