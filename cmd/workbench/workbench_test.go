package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/oracle"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/internal/testkit/workbenchtest"
	"github.com/agentpen/agentpen/workbench/client"
)

// binary is the workbench binary under test, built once per test run.
func binary(t *testing.T) string { return workbenchtest.Binary(t) }

// startServe runs `workbench serve` with extra flags on a free TCP port
// and a unix socket, and stops it at cleanup.
func startServe(t *testing.T, extra ...string) *workbenchtest.Server {
	t.Helper()
	return workbenchtest.Serve(t, workbenchtest.Options{Args: extra})
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

// oracles is testdata/oracles, where each task family's oracle is.
var oracles = oracle.Dir()

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
	for _, transport := range [][]string{{"--url", ls.URL}, {"--unix", ls.Socket}} {
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

// playIsolated plays one episode of id with its oracle
// (oracle.PlayTask) after writing a marker file and listing the files:
// another session's marker must never show up here, nor this one's there.
func playIsolated(ctx context.Context, s *client.Session, id, marker string) error {
	first, err := s.Reset(ctx, client.ResetOptions{TaskID: id, EpisodeID: "ep-" + marker})
	if err != nil {
		return err
	}
	if _, err := s.Step(ctx, "write_file", workbenchtest.Args(map[string]any{"path": "marker_" + marker + ".txt", "content": marker})); err != nil {
		return err
	}
	ls, err := s.Step(ctx, "list_files", nil)
	if err != nil {
		return err
	}
	if n := strings.Count(ls.Observation.Output, "marker_"); n != 1 || !strings.Contains(ls.Observation.Output, "marker_"+marker+".txt") {
		return fmt.Errorf("%s: listing shows other sessions' files: %q", marker, ls.Observation.Output)
	}
	_, err = oracle.PlayTask(id, first.Observation.Task, workbenchtest.Stepper(ctx, s))
	return err
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
	var wg sync.WaitGroup
	for i := range n {
		p := picks[(i*7)%len(picks)]
		wg.Go(func() {
			w, err := client.Dial(ctx, ls.URL)
			if err != nil {
				errs <- fmt.Errorf("session %d: %w", i, err)
				return
			}
			defer w.Close()
			if err := playIsolated(ctx, w, p.ID, fmt.Sprint(i)); err != nil {
				errs <- fmt.Errorf("session %d (%s): %w", i, p.ID, err)
				return
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	// SIGTERM with a session mid-episode.
	w := workbenchtest.Dial(t, ctx, ls.URL)
	if _, err := w.Reset(ctx, client.ResetOptions{TaskID: picks[0].ID}); err != nil {
		t.Fatal(err)
	}
	if err := ls.Stop(t); err != nil {
		t.Fatalf("exit after SIGTERM: %v, want exit 0", err)
	}
	left, _ := os.ReadDir(ls.HomeDir)
	if len(left) != 0 {
		t.Errorf("episode homes left after shutdown: %v", left)
	}
	logs := ls.Logs.String()
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
	for _, mode := range []string{"namespaces", "uid-only"} {
		t.Run(mode, func(t *testing.T) { agentCodeRefused(t, mode) })
	}
}

// agentCodeRefused: in namespaces agent code reaches neither of the
// server's sockets (its loopback is its own, the socket's directory is in
// the server's /tmp, not the episode's); with the uid-only sandbox it
// reaches them and is refused: closed at accept, EACCES on the socket.
func agentCodeRefused(t *testing.T, mode string) {
	ls := startServe(t, "--sandbox", mode)
	ctx := testenv.Context(t)
	w := workbenchtest.Dial(t, ctx, ls.URL)
	if _, err := w.Reset(ctx, client.ResetOptions{TaskID: onePerDomain(t)[0].ID}); err != nil {
		t.Fatal(err)
	}
	hostport := strings.TrimPrefix(ls.URL, "http://")
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
`, hostport, ls.Socket)
	r, err := w.Step(ctx, "run_python", workbenchtest.Args(map[string]any{"code": code}))
	if err != nil {
		t.Fatal(err)
	}
	out := r.Observation.Output
	t.Logf("agent code printed:\n%s", out)
	if !strings.Contains(out, "uid 2") {
		t.Errorf("agent code did not run as a sandbox uid: %q", out)
	}
	if mode == "namespaces" {
		if !strings.Contains(out, fmt.Sprintf("tcp errno %d\n", syscall.ECONNREFUSED)) || !strings.Contains(out, fmt.Sprintf("unix errno %d", syscall.ENOENT)) {
			t.Errorf("agent code reached a socket of the server's from its namespaces: %q", out)
		}
	} else {
		// Closed at accept: reset before a reply (or before the request
		// was written), or an empty reply.
		if !strings.Contains(out, fmt.Sprintf("tcp errno %d\n", syscall.ECONNRESET)) && !strings.Contains(out, fmt.Sprintf("tcp errno %d\n", syscall.EPIPE)) &&
			!strings.Contains(out, "tcp  | \n") {
			t.Errorf("agent code over TCP was not refused: %q", out)
		}
		if !strings.Contains(out, fmt.Sprintf("unix errno %d", syscall.EACCES)) {
			t.Errorf("agent code reached the unix socket: %q", out)
		}
	}
	// The normal client, and the server itself, still work.
	resp, err := http.Get(ls.URL + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("health from a normal client: %v %v", resp, err)
	}
	resp.Body.Close()
	if _, err := w.Step(ctx, "list_files", nil); err != nil {
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
