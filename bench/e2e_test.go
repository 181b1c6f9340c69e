package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentpen/agentpen/internal/latency"
	"github.com/agentpen/agentpen/internal/oracle"
	"github.com/agentpen/agentpen/internal/testenv"
	"github.com/agentpen/agentpen/workbench/episode"
	"github.com/agentpen/agentpen/workbench/sandbox"
	"github.com/agentpen/agentpen/workbench/tasks"
)

// The end-to-end benchmarks run a real `workbench serve` (built here, run
// as root with the uid sandbox) on a unix socket and drive it over the
// WebSocket, as a trainer would.

// serveProc is a running `workbench serve`.
type serveProc struct {
	cmd    *exec.Cmd
	socket string
}

func startServe(b *testing.B) *serveProc {
	b.Helper()
	testenv.RequireRoot(b) // the server runs episodes as sandbox uids
	dir := b.TempDir()
	bin := filepath.Join(dir, "workbench")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "../cmd/workbench")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build workbench: %v\n%s", err, out)
	}
	sockDir := filepath.Join(dir, "run")
	os.Mkdir(sockDir, 0o700)
	socket := filepath.Join(sockDir, "wb.sock")
	// Room for a closing session's slot to be freed while the next ones
	// connect.
	cmd := exec.Command(bin, "serve", "--listen", "unix://"+socket, "--log-level", "warn", "--max-sessions", "16")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("unix", socket); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("workbench serve did not listen")
		}
	}
	return &serveProc{cmd: cmd, socket: socket}
}

// rss returns the server's resident set (VmRSS) in bytes.
func (s *serveProc) rss() int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
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

// wsSession is one WebSocket episode session.
type wsSession struct {
	ctx  context.Context
	conn *websocket.Conn
}

func (s *serveProc) dial(b *testing.B, ctx context.Context) *wsSession {
	b.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", s.socket)
	}}}
	c, _, err := websocket.Dial(ctx, "ws://workbench/ws", &websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		b.Fatalf("dial: %v", err)
	}
	c.SetReadLimit(16 << 20)
	b.Cleanup(func() { c.CloseNow() })
	return &wsSession{ctx: ctx, conn: c}
}

func (w *wsSession) call(msg map[string]any) (map[string]any, error) {
	data, _ := json.Marshal(msg)
	if err := w.conn.Write(w.ctx, websocket.MessageText, data); err != nil {
		return nil, err
	}
	_, reply, err := w.conn.Read(w.ctx)
	if err != nil {
		return nil, err
	}
	var r map[string]any
	if err := json.Unmarshal(reply, &r); err != nil {
		return nil, err
	}
	if r["type"] == "error" {
		return nil, fmt.Errorf("server error: %v", r["data"])
	}
	d, _ := r["data"].(map[string]any)
	return d, nil
}

func (w *wsSession) reset(taskID string) (string, error) {
	d, err := w.call(map[string]any{"type": "reset", "data": map[string]any{"task_id": taskID}})
	if err != nil {
		return "", err
	}
	o, _ := d["observation"].(map[string]any)
	return fmt.Sprint(o["task"]), nil
}

func (w *wsSession) step(tool string, args map[string]any) (oracle.Result, error) {
	if args == nil {
		args = map[string]any{}
	}
	d, err := w.call(map[string]any{"type": "step", "data": map[string]any{"tool": tool, "args": args}})
	if err != nil {
		return oracle.Result{}, err
	}
	o, _ := d["observation"].(map[string]any)
	r := oracle.Result{Done: d["done"] == true}
	r.Output, _ = o["output"].(string)
	r.Error, _ = o["error"].(string)
	r.Reward, _ = d["reward"].(float64)
	return r, nil
}

// BenchmarkWSListFiles: list_files over the WebSocket, against the same
// call on an in-process environment, interleaved; the difference is what
// the wire adds.
func BenchmarkWSListFiles(b *testing.B) {
	srv := startServe(b)
	ws := srv.dial(b, b.Context())
	if _, err := ws.reset("data/csv_region_total"); err != nil {
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
	var wire, local latency.Samples
	steps := 0
	for i := 0; i < b.N; i++ {
		if steps == 18 {
			ws.reset("data/csv_region_total")
			env.Reset(context.Background(), episode.ResetOptions{TaskID: "data/csv_region_total"})
			steps = 0
		}
		local.Time(func() {
			if _, err := env.Step(context.Background(), episode.Action{Tool: "list_files"}); err != nil {
				b.Fatal(err)
			}
		})
		wire.Time(func() {
			if _, err := ws.step("list_files", nil); err != nil {
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

func playOne(w *wsSession, taskID string) error {
	task, err := tasks.Build(taskID)
	if err != nil {
		return err
	}
	code, err := oracle.Load(taskID)
	if err != nil {
		return err
	}
	instruction, err := w.reset(taskID)
	if err != nil {
		return err
	}
	r, err := oracle.Play(task.Kind, instruction, code, task.Files[0].Path, w.step)
	if err != nil {
		return err
	}
	if r.Reward != 1 {
		return fmt.Errorf("%s: reward %v", taskID, r.Reward)
	}
	return nil
}

// BenchmarkWSEpisodes: oracle episodes over the WebSocket by 8 concurrent
// sessions against 1 session, as wall time per episode (median-ns: 8
// sessions; raw-median-ns: 1 session), and the server's resident memory
// idle (rss-idle-bytes) and at most during the 8 sessions
// (rss-8-sessions-bytes). Each round plays 4 episodes on one session,
// then 4 on each of 8 sessions at once; it runs at most episodeRounds
// rounds whatever b.N is (a round takes seconds).
func BenchmarkWSEpisodes(b *testing.B) {
	srv := startServe(b)
	time.Sleep(200 * time.Millisecond)
	idle := srv.rss()
	const perSession = 4
	var one, eight latency.Samples
	var peak int64
	for i := 0; i < min(b.N, episodeRounds); i++ {
		ws := srv.dial(b, b.Context())
		start := time.Now()
		for e := range perSession {
			if err := playOne(ws, episodeTasks[e%len(episodeTasks)]); err != nil {
				b.Fatal(err)
			}
		}
		one = append(one, time.Since(start)/perSession)
		ws.conn.Close(websocket.StatusNormalClosure, "")

		sessions := make([]*wsSession, 8)
		for s := range sessions {
			sessions[s] = srv.dial(b, b.Context())
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
					if err := playOne(w, episodeTasks[(s+e)%len(episodeTasks)]); err != nil {
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
			w.conn.Close(websocket.StatusNormalClosure, "")
		}
	}
	eight.Report(b, "")
	one.Report(b, "raw-")
	b.ReportMetric(float64(idle), "rss-idle-bytes")
	b.ReportMetric(float64(peak), "rss-8-sessions-bytes")
}
