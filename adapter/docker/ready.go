package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
)

// Ready waits until a started container answers as ready: the server's
// readiness command exits 0 (by docker exec: no port is published), a
// workbench answers GET /health on its unix socket. The default command
// of topology none asks the grader's /health on its unix socket, which
// the host holds too (the directory mounted in the server): it is asked
// from the host, as a workspace's is, without an exec. It fails at once
// when the container stopped, and with driver.ErrNotReady when ctx's
// deadline passed first.
func (d *Driver) Ready(ctx context.Context, o *driver.Object) error {
	c, ok := o.Spec.(*containerPlan)
	if !ok || o.ID == "" {
		return fmt.Errorf("ready: %s is not a container made by this driver", o)
	}
	switch {
	case c.graderSocket != "":
		return d.waitSocket(ctx, o.ID, "server "+o.Name, c.graderSocket, "http://grader/health")
	case c.socket == "":
		return d.waitServer(ctx, o.ID, o.Name, c.ready)
	}
	return d.waitWorkspace(ctx, o.ID, c.agentID, c.socket)
}

// waitServer runs the readiness command in the server container until it
// exits 0.
func (d *Driver) waitServer(ctx context.Context, id, name string, cmd []string) error {
	var last error
	err := d.poll(ctx, execPoll, func(ctx context.Context) bool {
		code, out, err := d.execOutput(ctx, id, cmd, false)
		switch {
		case err != nil:
			last = err
		case code != 0:
			last = fmt.Errorf("exit %d: %s", code, strings.TrimSpace(truncate(out.Stdout+out.Stderr, 200)))
		default:
			return true
		}
		return false
	}, id)
	if err != nil {
		return fmt.Errorf("server %s: %w (last probe: %v)%s", name, err, last, d.tail(id))
	}
	return nil
}

// waitWorkspace polls GET /health on the workbench's unix socket.
func (d *Driver) waitWorkspace(ctx context.Context, id, agentID, socket string) error {
	return d.waitSocket(ctx, id, fmt.Sprintf("workspace %s (container %s)", agentID, short(id)), socket, "http://workbench/health")
}

// waitSocket polls GET url (its /health) on a unix socket of the host
// until it answers 200; what names the container in the error.
func (d *Driver) waitSocket(ctx context.Context, id, what, socket, url string) error {
	hc := UnixHTTPClient(socket, 2*time.Second)
	defer hc.CloseIdleConnections()
	var last error
	err := d.poll(ctx, socketPoll, func(ctx context.Context) bool {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := hc.Do(req)
		if err != nil {
			last = err
			return false
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			last = fmt.Errorf("status %d", resp.StatusCode)
			return false
		}
		return true
	}, id)
	if err != nil {
		return fmt.Errorf("%s: %w (last check: %v)%s", what, err, last, d.tail(id))
	}
	return nil
}

// A pollSchedule is how often a readiness check is repeated: first after
// first, then each time factor times longer, at most every most.
type pollSchedule struct {
	first, most time.Duration
	factor      float64
}

var (
	// execPoll paces a check that is a docker exec (the server's): each
	// one is a process start in the container and work for the daemon.
	execPoll = pollSchedule{first: 50 * time.Millisecond, most: time.Second, factor: 2}
	// socketPoll paces a connect to a workbench's or the grader's unix
	// socket, which costs nothing until it listens: the last container's
	// readiness is the end of a bring-up, so it is asked often, at most a
	// quarter of the time waited so far after it began to listen (a
	// schedule of 10 ms and 1.5 times more each time found a workbench
	// listening about 12 ms after its start at 25 ms).
	socketPoll = pollSchedule{first: 2 * time.Millisecond, most: 100 * time.Millisecond, factor: 1.25}
)

// exitCheckEvery is how often polling asks the daemon whether the
// container is still running (it fails at once when it exited).
const exitCheckEvery = 250 * time.Millisecond

// poll calls ready on schedule until it reports true, the container stops
// running, or ctx is done (its deadline is the engine's ready timeout).
func (d *Driver) poll(ctx context.Context, sched pollSchedule, ready func(context.Context) bool, id string) error {
	start := time.Now()
	delay := sched.first
	var checked time.Time
	for {
		if ready(ctx) {
			return nil
		}
		if time.Since(checked) >= exitCheckEvery {
			if info, err := d.api.ContainerInspect(ctx, id); err == nil && info.State != nil && !info.State.Running {
				return fmt.Errorf("%w: container exited (status %d)", driver.ErrNotReady, info.State.ExitCode)
			}
			checked = time.Now()
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%w after %s", driver.ErrNotReady, time.Since(start).Round(time.Second))
			}
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(time.Duration(float64(delay)*sched.factor), sched.most)
	}
}

// tail returns the container's last log lines as an error suffix.
func (d *Driver) tail(id string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rc, err := d.api.ContainerLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: "15"})
	if err != nil {
		return ""
	}
	defer rc.Close()
	var out bytes.Buffer
	stdcopy.StdCopy(&out, &out, io.LimitReader(rc, 64<<10))
	if out.Len() == 0 {
		return "; no log output"
	}
	return "; last log lines:\n" + strings.TrimRight(out.String(), "\n")
}

// UnixHTTPClient is an HTTP client whose every request goes to the unix
// socket at path.
func UnixHTTPClient(path string, timeout time.Duration) *http.Client {
	d := &net.Dialer{Timeout: timeout}
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return d.DialContext(ctx, "unix", path)
			},
			DisableKeepAlives: true,
		},
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
