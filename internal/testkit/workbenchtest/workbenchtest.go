// Package workbenchtest runs the workbench for tests: the workbench
// binary built once per test process, `workbench serve` started on a
// loopback port and a unix socket, episode sessions (workbench/client)
// closed when the test ends, and the oracle played over a session.
//
// It does not decide whether a test may run as root or needs the
// sandbox: callers use testenv first. It imports no server package, so
// the workbench's own packages can use it in their tests.
package workbenchtest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/oracle"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/internal/testkit/testlog"
	"github.com/agentpen/agentpen/workbench/client"
)

// Dial opens an episode session at target (any form client.ParseTarget
// reads) and closes its connection when the test ends. It fails t when
// it cannot connect, so call it from the test's goroutine; elsewhere use
// client.Dial.
func Dial(t testing.TB, ctx context.Context, target string) *client.Session {
	t.Helper()
	s, err := client.Dial(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Conn().CloseNow() })
	return s
}

// Args is a step's arguments as JSON (client.Session.Step's args). It
// panics on a value JSON cannot encode.
func Args(kv map[string]any) json.RawMessage {
	b, err := json.Marshal(kv)
	if err != nil {
		panic(err)
	}
	return b
}

// Stepper is s's Step as an oracle.Stepper: args go as a JSON object,
// and a tool's refusal comes back in Result.Error.
func Stepper(ctx context.Context, s *client.Session) oracle.Stepper {
	return func(tool string, args map[string]any) (oracle.Result, error) {
		b, err := json.Marshal(args)
		if err != nil {
			return oracle.Result{}, err
		}
		r, err := s.Step(ctx, tool, b)
		if err != nil {
			return oracle.Result{}, err
		}
		return oracle.Result{Output: r.Observation.Output, Error: r.Observation.Error, Done: r.Done, Reward: r.Reward}, nil
	}
}

// PlayOracle resets s to taskID and plays its oracle (oracle.PlayTask):
// an error unless the episode ended with reward 1.0.
func PlayOracle(ctx context.Context, s *client.Session, taskID string) error {
	r, err := s.Reset(ctx, client.ResetOptions{TaskID: taskID})
	if err != nil {
		return fmt.Errorf("%s: reset: %w", taskID, err)
	}
	_, err = oracle.PlayTask(taskID, r.Observation.Task, Stepper(ctx, s))
	return err
}

// build builds the workbench binary once per test process.
var build = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "workbench-bin")
	if err != nil {
		return "", err
	}
	// The sandbox uids run nothing from here, but the directory must not
	// be a private one they cannot traverse if they ever need to: the
	// binary alone is closed to them, as make build installs it (serve
	// refuses to start from one they could read or run).
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "workbench")
	// As make build builds it: static and stripped (the memory targets
	// are for this binary).
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "github.com/agentpen/agentpen/cmd/workbench")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	if err := os.Chmod(bin, 0o700); err != nil {
		return "", err
	}
	return bin, nil
})

// Binary returns the path of the workbench binary, built on first use as
// make build builds it (static, stripped, 0700). It is left in a
// temporary directory for the rest of the process.
func Binary(t testing.TB) string {
	t.Helper()
	bin, err := build()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// Proc is a running workbench subcommand that logs JSON and listens on
// TCP (serve, grader).
type Proc struct {
	// Cmd is its process.
	Cmd *exec.Cmd
	// Addr is its TCP listener, host:port, from its "listening" log line.
	Addr string
	// Logs holds its log lines (JSON), stderr as written.
	Logs *testlog.Buffer

	exited chan error
	term   sync.Once
}

// Start runs the workbench binary bin with args, env added to the test's
// environment, and returns once it logged where it listens on TCP. It is
// stopped (SIGTERM) when the test ends, and the test fails if it then
// does not exit 0; its log is shown if the test failed.
func Start(t testing.TB, bin string, env []string, args ...string) *Proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	cmd.Stdout = os.Stdout
	p := &Proc{Cmd: cmd, Logs: &testlog.Buffer{}, exited: make(chan error, 1)}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- cmd.Wait(); pw.Close() }()
	addr := make(chan string, 1)
	var copying sync.WaitGroup
	copying.Go(func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			p.Logs.Write([]byte(sc.Text() + "\n"))
			var rec struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "listening" && strings.HasPrefix(rec.Addr, "tcp://") {
				select {
				case addr <- strings.TrimPrefix(rec.Addr, "tcp://"):
				default:
				}
			}
		}
		io.Copy(io.Discard, pr)
	})
	t.Cleanup(func() {
		if err := p.Stop(t); err != nil {
			t.Errorf("workbench %s exited: %v", args[0], err)
		}
		copying.Wait()
		if t.Failed() {
			t.Logf("workbench %s's log:\n%s", args[0], p.Logs.String())
		}
	})
	select {
	case a := <-addr:
		p.Addr = a
	case err := <-p.exited:
		p.exited <- err
		t.Fatalf("workbench %s exited at start: %v\n%s", args[0], err, p.Logs.String())
	case <-testenv.Context(t).Done():
		t.Fatalf("workbench %s did not report its address by the test's deadline\n%s", args[0], p.Logs.String())
	}
	return p
}

// Stop sends SIGTERM (once) and returns the exit error: nil for exit 0.
// A process still running at the test's deadline is killed and t fails.
func (p *Proc) Stop(t testing.TB) error {
	t.Helper()
	p.term.Do(func() { p.Cmd.Process.Signal(syscall.SIGTERM) })
	// Stop runs in cleanups too, once t.Context() is done.
	wait, cancel := testenv.CleanupContext(t)
	defer cancel()
	select {
	case err := <-p.exited:
		p.exited <- err
		return err
	case <-wait.Done():
		p.Cmd.Process.Kill()
		t.Error("the workbench did not exit after SIGTERM by the test's deadline")
		err := <-p.exited
		p.exited <- err
		return err
	}
}

// Options are what Serve starts.
type Options struct {
	// Binary is the workbench binary; empty means Binary(t).
	Binary string
	// Env is added to the test's environment.
	Env []string
	// Args are more flags after serve's own (--max-sessions 3, ...).
	// {{RUNDIR}} in one stands for the socket's directory, as a
	// campaign workspace's run directory holds both the socket and
	// the bind file.
	Args []string
}

// Server is a running `workbench serve`.
type Server struct {
	*Proc
	// URL is its TCP listener, http://127.0.0.1:port.
	URL string
	// Socket is its unix socket's path.
	Socket string
	// HomeDir holds its episodes' homes.
	HomeDir string
}

// Serve starts `workbench serve` (Start) on a free loopback port and a
// unix socket, logging JSON, with episode homes in a fresh directory.
func Serve(t testing.TB, o Options) *Server {
	t.Helper()
	bin := o.Binary
	if bin == "" {
		bin = Binary(t)
	}
	home, err := os.MkdirTemp("", "wb-homes")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(home, 0o755) // the sandbox uids pass through it to their homes
	t.Cleanup(func() { os.RemoveAll(home) })
	sock := filepath.Join(t.TempDir(), "run", "wb.sock")
	args := []string{"serve", "--listen", "127.0.0.1:0", "--listen", "unix://" + sock,
		"--log-format", "json", "--home-dir", home}
	for _, a := range o.Args {
		args = append(args, strings.ReplaceAll(a, "{{RUNDIR}}", filepath.Dir(sock)))
	}
	p := Start(t, bin, o.Env, args...)
	return &Server{Proc: p, URL: "http://" + p.Addr, Socket: sock, HomeDir: home}
}
