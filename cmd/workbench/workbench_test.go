package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/agentpen/agentpen/internal/logbuf"
	"github.com/agentpen/agentpen/internal/testenv"
	"github.com/coder/websocket"
)

// buildOnce builds the workbench binary once per test run.
var buildOnce = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "workbench-bin")
	if err != nil {
		return "", err
	}
	// The sandbox uids run nothing from here, but the directory must not be
	// a private one they cannot traverse if they ever need to: the binary
	// alone is closed to them, as make build installs it (serve refuses
	// to start from one they could read or run).
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "workbench")
	// As make build builds it: static, stripped (the memory targets are
	// for this binary).
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	if err := os.Chmod(bin, 0o700); err != nil {
		return "", err
	}
	return bin, nil
})

func binary(t *testing.T) string {
	t.Helper()
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// liveServer is a running `workbench serve`.
type liveServer struct {
	cmd     *exec.Cmd
	base    string // http://127.0.0.1:port
	sock    string // unix socket path
	homeDir string
	logs    *logbuf.Buffer
	exited  chan error
}

// startServe runs `workbench serve` on a free TCP port and a unix socket,
// with episode homes in a fresh directory, and stops it at cleanup.
func startServe(t *testing.T, extra ...string) *liveServer {
	t.Helper()
	return startServeBinary(t, binary(t), extra...)
}

// startServeBinary is startServe with the binary at bin.
func startServeBinary(t *testing.T, bin string, extra ...string) *liveServer {
	t.Helper()
	return startServeEnv(t, bin, nil, extra...)
}

// startServeEnv is startServeBinary with env added to the server's
// environment.
func startServeEnv(t *testing.T, bin string, env []string, extra ...string) *liveServer {
	t.Helper()
	home, err := os.MkdirTemp("", "wb-homes")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(home, 0o755) // the sandbox uids pass through it to their homes
	t.Cleanup(func() { os.RemoveAll(home) })
	sock := filepath.Join(t.TempDir(), "run", "wb.sock")
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--listen", "unix://" + sock,
		"--log-format", "json", "--home-dir", home}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	pr, pw := io.Pipe()
	logs := &logbuf.Buffer{}
	cmd.Stderr = pw
	cmd.Stdout = os.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ls := &liveServer{cmd: cmd, sock: sock, homeDir: home, logs: logs, exited: make(chan error, 1)}
	go func() { ls.exited <- cmd.Wait(); pw.Close() }()
	addr := make(chan string, 1)
	var copying sync.WaitGroup
	copying.Go(func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			logs.Write([]byte(line + "\n"))
			var rec struct {
				Msg, Addr string
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "listening" && strings.HasPrefix(rec.Addr, "tcp://") {
				select {
				case addr <- strings.TrimPrefix(rec.Addr, "tcp://"):
				default:
				}
			}
		}
		io.Copy(io.Discard, pr)
	})
	t.Cleanup(func() {
		ls.stop(t)
		copying.Wait()
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	select {
	case a := <-addr:
		ls.base = "http://" + a
	case err := <-ls.exited:
		ls.exited <- err
		t.Fatalf("workbench serve exited at start: %v\n%s", err, logs.String())
	case <-testenv.Context(t).Done():
		t.Fatalf("workbench serve did not report its address\n%s", logs.String())
	}
	return ls
}

// stop sends SIGTERM and returns the exit error (nil for exit 0).
func (ls *liveServer) stop(t *testing.T) error {
	t.Helper()
	if ls.cmd.ProcessState == nil {
		ls.cmd.Process.Signal(syscall.SIGTERM)
	}
	wait, cancel := testenv.CleanupContext(t)
	defer cancel()
	select {
	case err := <-ls.exited:
		ls.exited <- err
		return err
	case <-wait.Done():
		ls.cmd.Process.Kill()
		t.Error("workbench serve did not exit after SIGTERM")
		return <-ls.exited
	}
}

// specs returns `workbench tasks --json`.
func specs(t *testing.T) []struct{ ID, Domain, Kind string } {
	t.Helper()
	out, err := exec.Command(binary(t), "tasks", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var raw []struct {
		ID     string `json:"id"`
		Domain string `json:"domain"`
		Kind   string `json:"answer_kind"`
	}
	if err := json.Unmarshal(out, &raw); err != nil {
		t.Fatalf("tasks --json: %v\n%s", err, out)
	}
	var s []struct{ ID, Domain, Kind string }
	for _, r := range raw {
		s = append(s, struct{ ID, Domain, Kind string }{r.ID, r.Domain, r.Kind})
	}
	return s
}

const oracles = "../../testdata/oracles"

// onePerDomain picks, per domain, the first task whose oracle exists.
func onePerDomain(t *testing.T) []struct{ ID, Domain, Kind string } {
	t.Helper()
	seen := map[string]bool{}
	var out []struct{ ID, Domain, Kind string }
	for _, s := range specs(t) {
		if seen[s.Domain] {
			continue
		}
		if _, err := os.Stat(filepath.Join(oracles, s.ID+".py")); err != nil {
			continue
		}
		seen[s.Domain] = true
		out = append(out, s)
	}
	if len(out) == 0 {
		t.Fatal("no task in the catalogue has an oracle")
	}
	return out
}

// TestPythonClientPlaysEveryDomain: the standard-library Python client
// plays one episode per domain against a live `workbench serve` with the
// oracle answers, over TCP and over the unix socket, and every reward is 1.
func TestPythonClientPlaysEveryDomain(t *testing.T) {
	ls := startServe(t)
	picks := onePerDomain(t)
	var args []string
	for _, p := range picks {
		args = append(args, p.ID+"="+p.Kind)
	}
	for _, transport := range [][]string{{"--url", ls.base}, {"--unix", ls.sock}} {
		t.Run(strings.TrimPrefix(transport[0], "--"), func(t *testing.T) {
			taskArgs := args
			if transport[0] == "--unix" {
				taskArgs = args[:1] // the transport, not the catalogue, is under test here
			}
			ctx := testenv.Context(t)
			cmd := exec.CommandContext(ctx, "python3", append([]string{"../../testdata/clients/workbench_client.py", "--oracles", oracles}, append(transport, taskArgs...)...)...)
			out, err := cmd.CombinedOutput()
			t.Logf("python client:\n%s", out)
			if err != nil {
				t.Fatalf("python client: %v", err)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			var summary struct {
				Rewards map[string]float64 `json:"rewards"`
			}
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &summary); err != nil {
				t.Fatalf("summary line: %v", err)
			}
			if len(summary.Rewards) != len(taskArgs) {
				t.Fatalf("%d rewards for %d tasks", len(summary.Rewards), len(taskArgs))
			}
			for id, r := range summary.Rewards {
				if r != 1.0 {
					t.Errorf("%s: reward %v, want 1.0", id, r)
				}
			}
		})
	}
}

// wsClient is EnvClient's framing, as in package server's tests.
type wsClient struct{ c *websocket.Conn }

func dial(t *testing.T, ctx context.Context, base string) *wsClient {
	t.Helper()
	c, _, err := websocket.Dial(ctx, strings.Replace(base, "http://", "ws://", 1)+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(100 << 20)
	t.Cleanup(func() { c.CloseNow() })
	return &wsClient{c}
}

type result struct {
	Observation struct {
		Task, Output, Error string
	} `json:"observation"`
	Reward   float64        `json:"reward"`
	Done     bool           `json:"done"`
	Metadata map[string]any `json:"metadata"`
}

func (w *wsClient) call(ctx context.Context, msg any, into any) error {
	b, _ := json.Marshal(msg)
	if err := w.c.Write(ctx, websocket.MessageText, b); err != nil {
		return err
	}
	_, b, err := w.c.Read(ctx)
	if err != nil {
		return err
	}
	var reply struct {
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &reply); err != nil {
		return err
	}
	if reply.Type == "error" {
		return fmt.Errorf("Server error: %s", reply.Data)
	}
	return json.Unmarshal(reply.Data, into)
}

func (w *wsClient) reset(ctx context.Context, kw map[string]any) (result, error) {
	var r result
	return r, w.call(ctx, map[string]any{"type": "reset", "data": kw}, &r)
}

func (w *wsClient) step(ctx context.Context, tool string, args map[string]any) (result, error) {
	var r result
	if args == nil {
		args = map[string]any{}
	}
	return r, w.call(ctx, map[string]any{"type": "step", "data": map[string]any{"tool": tool, "args": args}}, &r)
}

var exitTrailer = regexp.MustCompile(`^\[exit code -?\d+\]$`)

// playOracle plays one episode of id with its oracle (testdata/oracles
// README) and returns the final result; before submitting, check sees only
// this session's files.
func playOracle(ctx context.Context, w *wsClient, id, kind string, marker string) (result, error) {
	oracle, err := os.ReadFile(filepath.Join(oracles, id+".py"))
	if err != nil {
		return result{}, err
	}
	first, err := w.reset(ctx, map[string]any{"task_id": id, "episode_id": "ep-" + marker})
	if err != nil {
		return result{}, err
	}
	// A marker file, then a listing: another session's marker must never
	// show up here, nor this one's there.
	if _, err := w.step(ctx, "write_file", map[string]any{"path": "marker_" + marker + ".txt", "content": marker}); err != nil {
		return result{}, err
	}
	ls, err := w.step(ctx, "list_files", nil)
	if err != nil {
		return result{}, err
	}
	if n := strings.Count(ls.Observation.Output, "marker_"); n != 1 || !strings.Contains(ls.Observation.Output, "marker_"+marker+".txt") {
		return result{}, fmt.Errorf("%s: listing shows other sessions' files: %q", marker, ls.Observation.Output)
	}
	if kind == "code" {
		if _, err := w.step(ctx, "read_file", map[string]any{"path": "solution.py"}); err != nil {
			return result{}, err
		}
		if _, err := w.step(ctx, "write_file", map[string]any{"path": "solution.py", "content": string(oracle)}); err != nil {
			return result{}, err
		}
		if r, err := w.step(ctx, "run_tests", nil); err != nil || r.Observation.Error != "" {
			return result{}, fmt.Errorf("run_tests: %v %q", err, r.Observation.Error)
		}
		return w.step(ctx, "submit", map[string]any{"answer": "fixed"})
	}
	q, _ := json.Marshal(first.Observation.Task)
	run, err := w.step(ctx, "run_python", map[string]any{"code": "INSTRUCTION = " + string(q) + "\n" + string(oracle)})
	if err != nil {
		return result{}, err
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(run.Observation.Output), "\n") {
		if strings.TrimSpace(l) != "" && !exitTrailer.MatchString(strings.TrimSpace(l)) {
			lines = append(lines, strings.TrimSpace(l))
		}
	}
	if len(lines) == 0 {
		return result{}, fmt.Errorf("oracle printed nothing: %q", run.Observation.Output)
	}
	answer := lines[len(lines)-1]
	if _, err := w.step(ctx, "check", map[string]any{"answer": answer}); err != nil {
		return result{}, err
	}
	return w.step(ctx, "submit", map[string]any{"answer": answer})
}

// TestConcurrentEpisodes: eight WebSocket sessions, the default capacity,
// play full episodes at once to reward 1.0, each seeing only its own files
// (the Go client follows EnvClient's framing). Then SIGTERM mid-episode:
// exit 0 and no episode home left behind.
func TestConcurrentEpisodes(t *testing.T) {
	ls := startServe(t)
	all := specs(t)
	var picks []struct{ ID, Domain, Kind string }
	for _, s := range all {
		if _, err := os.Stat(filepath.Join(oracles, s.ID+".py")); err == nil {
			picks = append(picks, s)
		}
	}
	if len(picks) == 0 {
		t.Fatal("no oracles")
	}
	ctx := testenv.Context(t)
	const n = 8
	errs := make(chan error, n)
	rewards := make([]float64, n)
	var wg sync.WaitGroup
	for i := range n {
		p := picks[(i*7)%len(picks)]
		wg.Go(func() {
			w := dial(t, ctx, ls.base)
			r, err := playOracle(ctx, w, p.ID, p.Kind, fmt.Sprint(i))
			if err != nil {
				errs <- fmt.Errorf("session %d (%s): %w", i, p.ID, err)
				return
			}
			if !r.Done || r.Reward != 1.0 {
				errs <- fmt.Errorf("session %d (%s): done=%v reward %v, want 1.0: %q", i, p.ID, r.Done, r.Reward, r.Observation.Output)
			}
			rewards[i] = r.Reward
			w.c.Close(websocket.StatusNormalClosure, "")
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("rewards: %v", rewards)

	// SIGTERM with a session mid-episode.
	w := dial(t, ctx, ls.base)
	if _, err := w.reset(ctx, map[string]any{"task_id": picks[0].ID}); err != nil {
		t.Fatal(err)
	}
	if err := ls.stop(t); err != nil {
		t.Fatalf("exit after SIGTERM: %v, want exit 0", err)
	}
	left, _ := os.ReadDir(ls.homeDir)
	if len(left) != 0 {
		t.Errorf("episode homes left after shutdown: %v", left)
	}
	logs := ls.logs.String()
	for _, want := range []string{`"msg":"session start"`, `"msg":"session end"`, `"msg":"episode end"`, `"reward":1`, `"msg":"stopped"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %s", want)
		}
	}
}

// TestAgentCodeRefused (root): code an agent runs with run_python that
// calls the server over TCP has its connection closed at accept, without
// a reply, and over the unix socket cannot connect; a normal client on the
// same server is served.
func TestAgentCodeRefused(t *testing.T) {
	testenv.RequireRoot(t)
	ls := startServe(t)
	ctx := testenv.Context(t)
	w := dial(t, ctx, ls.base)
	if _, err := w.reset(ctx, map[string]any{"task_id": onePerDomain(t)[0].ID}); err != nil {
		t.Fatal(err)
	}
	hostport := strings.TrimPrefix(ls.base, "http://")
	code := fmt.Sprintf(`import os, socket
def call(connect):
    try:
        s = connect()
        s.sendall(b"POST /reset HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
        data = b""
        while True:
            c = s.recv(65536)
            if not c:
                break
            data += c
        return data.split(b"\r\n", 1)[0].decode() + " | " + data.partition(b"\r\n\r\n")[2].decode().strip()
    except OSError as e:
        return "errno %%d" %% e.errno
host, port = %q.rsplit(":", 1)
print("uid", os.getuid())
print("tcp", call(lambda: socket.create_connection((host, int(port)))))
def unix():
    s = socket.socket(socket.AF_UNIX)
    s.connect(%q)
    return s
print("unix", call(unix))
`, hostport, ls.sock)
	r, err := w.step(ctx, "run_python", map[string]any{"code": code})
	if err != nil {
		t.Fatal(err)
	}
	out := r.Observation.Output
	t.Logf("agent code printed:\n%s", out)
	if !strings.Contains(out, "uid 2") {
		t.Errorf("agent code did not run as a sandbox uid: %q", out)
	}
	// Closed at accept: reset before a reply (or before the request was
	// written), or an empty reply.
	if !strings.Contains(out, fmt.Sprintf("tcp errno %d\n", syscall.ECONNRESET)) && !strings.Contains(out, fmt.Sprintf("tcp errno %d\n", syscall.EPIPE)) &&
		!strings.Contains(out, "tcp  | \n") {
		t.Errorf("agent code over TCP was not refused: %q", out)
	}
	if !strings.Contains(out, fmt.Sprintf("unix errno %d", syscall.EACCES)) {
		t.Errorf("agent code reached the unix socket: %q", out)
	}
	// The normal client, and the server itself, still work.
	resp, err := http.Get(ls.base + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("health from a normal client: %v %v", resp, err)
	}
	resp.Body.Close()
	if _, err := w.step(ctx, "list_files", nil); err != nil {
		t.Errorf("the session broke after its agent was refused: %v", err)
	}
}

func TestTasksCommand(t *testing.T) {
	t.Parallel()
	var out, errb strings.Builder
	if err := run(t.Context(), []string{"tasks"}, &out, &errb, os.Getenv); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "ID") || !strings.Contains(out.String(), "data/csv_region_total") {
		t.Errorf("tasks table:\n%s", out.String())
	}
	out.Reset()
	if err := run(t.Context(), []string{"tasks", "show", "--json", "data/csv_region_total@3"}, &out, &errb, os.Getenv); err != nil {
		t.Fatal(err)
	}
	var shown shownTask
	if err := json.Unmarshal([]byte(out.String()), &shown); err != nil {
		t.Fatal(err)
	}
	if shown.ID != "data/csv_region_total@3" || shown.Instruction == "" || len(shown.Files) == 0 {
		t.Errorf("show: %+v", shown)
	}
	// Never an answer: nothing of the key appears.
	if strings.Contains(strings.ToLower(out.String()), "answer\":") || strings.Contains(out.String(), "hidden") {
		t.Errorf("show leaks key fields: %s", out.String())
	}
	for _, tt := range []struct {
		name string
		args []string
		want error
	}{
		{"no_command", nil, errUsage},
		{"unknown_command", []string{"frobnicate"}, errUsage},
		{"unknown_task", []string{"tasks", "show", "nope/nope"}, errUsage}, // exit 2: bad input
		{"help", []string{"serve", "--help"}, nil},
		{"bad_flag", []string{"serve", "--max-sessions", "0"}, errUsage},
		{"bad_log_format", []string{"serve", "--log-format", "xml"}, errUsage},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var o, e strings.Builder
			err := run(t.Context(), tt.args, &o, &e, os.Getenv)
			if err == nil {
				t.Fatal("want an error")
			}
			if tt.want != nil && !matchesWant(err, tt.want) {
				t.Errorf("got %v, want %v", err, tt.want)
			}
		})
	}
}
