package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/workbench/bind"
	"github.com/agentpen/agentpen/workbench/results"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/streaming/pkg/httpstream"
)

// A workspace on a cluster is reached through the API server: its
// workbench through pods/portforward to the pod's loopback, its bind file,
// activity and results through pods/exec. Nothing of it is on
// agentpen's host.

// Workspace is the handle on the workspace ag: its pod, by the journal's
// name and UID.
func (d *Driver) Workspace(ag campaign.AgentPlan, live []campaign.Resource) (driver.Workspace, error) {
	w := driver.Workspace{AgentID: ag.AgentID}
	for _, r := range live {
		if r.Kind == campaign.KindContainer && r.Role == campaign.RoleWork && r.ID != "" && !r.Orphan && strings.HasSuffix(r.Name, "/"+workspacePod(ag)) {
			w.ID = r.ID
			w.Resources = append(w.Resources, r)
		}
	}
	if w.ID == "" {
		return w, fmt.Errorf("workspace %s: its pod is not in the journal", ag.AgentID)
	}
	return w, nil
}

// podOf is the workspace's pod: its namespace and name.
func podOf(w driver.Workspace) (ns, name string, err error) {
	for _, r := range w.Resources {
		if r.Kind == campaign.KindContainer {
			ns, name = splitName(r.Kind, r.Name)
			return ns, name, nil
		}
	}
	return "", "", fmt.Errorf("workspace %s: no pod", w.AgentID)
}

// Exec runs cmd in the pod whose UID is id (the journal's name is found
// by listing: an exec names a pod by namespace and name).
func (d *Driver) Exec(ctx context.Context, id string, cmd []string, opts driver.ExecOptions) (driver.ExecResult, error) {
	if opts.Privileged {
		return driver.ExecResult{ExitCode: -1}, fmt.Errorf("exec in %s: a cluster's exec has no privileged mode: %w", id, driver.ErrRefused)
	}
	if opts.Stdin != nil || opts.Stdout != nil {
		return driver.ExecResult{ExitCode: -1}, fmt.Errorf("exec in %s: this driver's exec streams nothing (Capabilities.StreamingExec): %w", id, driver.ErrRefused)
	}
	ns, name, err := d.podByUID(ctx, id)
	if err != nil {
		return driver.ExecResult{ExitCode: -1}, err
	}
	return d.exec(ctx, ns, name, cmd, nil)
}

// podByUID finds the pod with a UID among agentpen's pods.
func (d *Driver) podByUID(ctx context.Context, id string) (ns, name string, err error) {
	found, err := d.List(ctx, campaign.LabelOwner+"="+campaign.OwnerValue)
	if err != nil {
		return "", "", err
	}
	for _, f := range found {
		if f.Kind == campaign.KindContainer && f.ID == id {
			ns, name = splitName(f.Kind, f.Name)
			return ns, name, nil
		}
	}
	return "", "", driver.Kind("no pod of agentpen's has UID "+id, driver.ErrNotFound)
}

// exec runs cmd in the pod's first container, with stdin, and returns its
// exit code and output (at most 1 MiB of each).
func (d *Driver) exec(ctx context.Context, ns, name string, cmd []string, stdin io.Reader) (driver.ExecResult, error) {
	req := d.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Command: cmd, Stdin: stdin != nil, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(d.rest, "GET", req.URL().String())
	if err != nil {
		return driver.ExecResult{ExitCode: -1}, err
	}
	sp, err := remotecommand.NewSPDYExecutor(d.rest, "POST", req.URL())
	if err != nil {
		return driver.ExecResult{ExitCode: -1}, err
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, sp, func(err error) bool { return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err) })
	if err != nil {
		return driver.ExecResult{ExitCode: -1}, err
	}
	var stdout, stderr limited
	stdout.n, stderr.n = 1<<20, 1<<20
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: &stdout, Stderr: &stderr})
	res := driver.ExecResult{Stdout: stdout.String(), Stderr: stderr.String()}
	var code interface{ ExitStatus() int }
	switch {
	case err == nil:
	case errors.As(err, &code):
		res.ExitCode = code.ExitStatus()
		err = nil
	default:
		res.ExitCode = -1
		err = classify(fmt.Errorf("exec in %s/%s: %w", ns, name, err))
	}
	return res, err
}

// limited keeps at most n bytes of what is written to it.
type limited struct {
	bytes.Buffer
	n int
}

func (l *limited) Write(p []byte) (int, error) {
	if room := l.n - l.Len(); room > 0 {
		l.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// Bind writes the workspace's bind file into its run directory (an
// emptyDir of the pod), as container root, by an exec that reads the task
// from its stdin (never its argv, which the pod's processes could read):
// created new, 0400.
func (d *Driver) Bind(ctx context.Context, w driver.Workspace, task string) error {
	ns, name, err := podOf(w)
	if err != nil {
		return err
	}
	path := campaign.WorkbenchRunDir + "/" + bind.FileName
	script := `set -e; umask 0377; f=` + path + `; [ ! -e "$f" ] && [ ! -L "$f" ] || { echo "bound already" >&2; exit 3; }; cat >"$f.new"; mv -n "$f.new" "$f"`
	// The pod runs until the workbench's start has made its run
	// directory: retried until ctx is done.
	for delay := 50 * time.Millisecond; ; delay = min(2*delay, time.Second) {
		res, err := d.exec(ctx, ns, name, []string{"/bin/sh", "-c", script}, strings.NewReader(task+"\n"))
		if err == nil && res.ExitCode == 0 {
			return nil
		}
		if err == nil && res.ExitCode == 3 {
			return fmt.Errorf("bind %s: %s", w.AgentID, strings.TrimSpace(res.Stderr))
		}
		// A pod that will never run is not waited for.
		if pod, gerr := d.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); gerr == nil {
			if why := ended(pod); why != "" {
				return fmt.Errorf("bind %s: %w: %s", w.AgentID, driver.ErrNotReady, why)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("bind %s: %v %s: %w", w.AgentID, err, res.Stderr, ctx.Err())
		case <-time.After(delay):
		}
	}
}

// Activity is the latest modification time of the live workspaces'
// workbench sockets, read by an exec in each pod.
func (d *Driver) Activity(ctx context.Context, live []campaign.Resource) time.Time {
	var last time.Time
	for _, r := range live {
		if r.Kind != campaign.KindContainer || r.Role != campaign.RoleWork || r.ID == "" {
			continue
		}
		ns, name := splitName(r.Kind, r.Name)
		res, err := d.exec(ctx, ns, name, []string{"stat", "-c", "%Y", campaign.WorkbenchSocket}, nil)
		if err != nil || res.ExitCode != 0 {
			continue
		}
		if s, err := strconv.ParseInt(strings.TrimSpace(res.Stdout), 10, 64); err == nil && time.Unix(s, 0).After(last) {
			last = time.Unix(s, 0)
		}
	}
	return last
}

// Results reads the workspace's results file from offset by an exec (at
// most results.MaxFile bytes).
func (d *Driver) Results(ctx context.Context, w driver.Workspace, offset int64) ([]byte, error) {
	ns, name, err := podOf(w)
	if err != nil {
		return nil, err
	}
	path := campaign.WorkbenchRunDir + "/" + results.FileName
	script := fmt.Sprintf(`f=%s; [ -e "$f" ] || exit 4; [ -f "$f" ] && [ ! -L "$f" ] || exit 5; s=$(stat -c %%s "$f"); [ "$s" -ge %d ] || exit 6; tail -c +%d "$f" | head -c %d`,
		path, offset, offset+1, results.MaxFile)
	res, err := d.exec(ctx, ns, name, []string{"/bin/sh", "-c", script}, nil)
	switch {
	case err != nil:
		return nil, err
	case res.ExitCode == 4:
		return nil, nil
	case res.ExitCode == 5:
		return nil, fmt.Errorf("%s in %s/%s is not a regular file", path, ns, name)
	case res.ExitCode == 6:
		return nil, results.ErrShrunk
	case res.ExitCode != 0:
		return nil, fmt.Errorf("read %s in %s/%s: exit %d: %s", path, ns, name, res.ExitCode, res.Stderr)
	}
	return []byte(res.Stdout), nil
}

// Dial connects to the workspace's workbench on its pod's loopback
// through pods/portforward.
func (d *Driver) Dial(ctx context.Context, w driver.Workspace) (net.Conn, error) {
	ns, name, err := podOf(w)
	if err != nil {
		return nil, err
	}
	transport, upgrader, err := spdy.RoundTripperFor(d.rest)
	if err != nil {
		return nil, err
	}
	req := d.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(name).SubResource("portforward")
	dialer := spdy.NewDialerForStreaming(upgrader, &http.Client{Transport: transport}, "POST", req.URL())
	type dialed struct {
		c   httpstream.Connection
		err error
	}
	ch := make(chan dialed, 1)
	go func() {
		c, _, err := dialer.Dial(portforward.PortForwardProtocolV1Name)
		ch <- dialed{c, err}
	}()
	var conn httpstream.Connection
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, classify(fmt.Errorf("port-forward to %s/%s: %w", ns, name, r.err))
		}
		conn = r.c
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.c != nil {
				r.c.Close()
			}
		}()
		return nil, ctx.Err()
	}
	h := http.Header{}
	h.Set(corev1.PortHeader, strconv.Itoa(WorkbenchPort))
	h.Set(corev1.PortForwardRequestIDHeader, "0")
	h.Set(corev1.StreamType, corev1.StreamTypeError)
	errStream, err := conn.CreateStream(h)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("port-forward to %s/%s: error stream: %w", ns, name, err)
	}
	errStream.Close() // nothing is written to it
	h.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := conn.CreateStream(h)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("port-forward to %s/%s: data stream: %w", ns, name, err)
	}
	c := &streamConn{conn: conn, data: data, remote: name}
	go func() {
		// An error the kubelet reports (nothing listens) ends the
		// connection.
		if b, _ := io.ReadAll(errStream); len(b) > 0 {
			c.fail(errors.New(string(b)))
		}
	}()
	return c, nil
}

// streamConn is a port-forwarded connection: its data stream as a
// net.Conn (deadlines are not supported: the HTTP client's own timeouts
// and contexts bound it).
type streamConn struct {
	conn   httpstream.Connection
	data   httpstream.Stream
	remote string
	once   sync.Once
	mu     sync.Mutex
	err    error
}

func (c *streamConn) Read(p []byte) (int, error) {
	n, err := c.data.Read(p)
	if err != nil {
		c.mu.Lock()
		if c.err != nil {
			err = c.err
		}
		c.mu.Unlock()
	}
	return n, err
}

func (c *streamConn) Write(p []byte) (int, error) { return c.data.Write(p) }

func (c *streamConn) fail(err error) {
	c.mu.Lock()
	c.err = err
	c.mu.Unlock()
	c.Close()
}

func (c *streamConn) Close() error {
	c.once.Do(func() {
		c.data.Close()
		c.conn.Close()
	})
	return nil
}

func (c *streamConn) LocalAddr() net.Addr                { return forwardAddr("agentpen") }
func (c *streamConn) RemoteAddr() net.Addr               { return forwardAddr(c.remote) }
func (c *streamConn) SetDeadline(t time.Time) error      { return nil }
func (c *streamConn) SetReadDeadline(t time.Time) error  { return nil }
func (c *streamConn) SetWriteDeadline(t time.Time) error { return nil }

type forwardAddr string

func (a forwardAddr) Network() string { return "portforward" }
func (a forwardAddr) String() string  { return string(a) }
