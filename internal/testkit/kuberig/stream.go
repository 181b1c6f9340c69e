package kuberig

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
)

// Exec runs cmd in container of pod ns/name through pods/exec (SPDY, the
// path client-go's executors share with kubectl), stdin from stdin when
// not nil, and returns what it wrote. err is the command's failure (a
// non-zero exit is a remotecommand exit error) or the stream's.
func Exec(ctx context.Context, cs kubernetes.Interface, cfg *rest.Config, ns, name, container string, stdin io.Reader, cmd ...string) (stdout, stderr string, err error) {
	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: container,
			Command:   cmd,
			Stdin:     stdin != nil,
			Stdout:    true,
			Stderr:    true,
		}, scheme.ParameterCodec)
	ex, err := remotecommand.NewSPDYExecutor(cfg, http.MethodPost, req.URL())
	if err != nil {
		return "", "", fmt.Errorf("exec in %s/%s: %w", ns, name, err)
	}
	var out, errb bytes.Buffer
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: &out, Stderr: &errb})
	return out.String(), errb.String(), err
}

// Forward forwards a loopback port of this host to port of pod ns/name
// through pods/portforward (SPDY, client-go's portforward package) and
// returns the local address (127.0.0.1:<port>). The forward ends when t
// does.
func Forward(t testing.TB, cfg *rest.Config, ns, name string, port int) string {
	t.Helper()
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatalf("API server URL %q: %v", cfg.Host, err)
	}
	u.Path = fmt.Sprintf("/api/v1/namespaces/%s/pods/%s/portforward", ns, name)
	rt, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		t.Fatalf("port-forward transport: %v", err)
	}
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: rt}, http.MethodPost, u)
	stop, ready := make(chan struct{}), make(chan struct{})
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:" + strconv.Itoa(port)}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatalf("port-forward to %s/%s:%d: %v", ns, name, port, err)
	}
	done := make(chan error, 1)
	go func() { done <- fw.ForwardPorts() }()
	t.Cleanup(func() {
		close(stop)
		if err := <-done; err != nil {
			t.Logf("port-forward to %s/%s:%d ended: %v", ns, name, port, err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		done <- err
		t.Fatalf("port-forward to %s/%s:%d: %v", ns, name, port, err)
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) != 1 {
		t.Fatalf("port-forward to %s/%s:%d: local ports %v: %v", ns, name, port, ports, err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(int(ports[0].Local)))
}

// ConnectAsCommand is the command that, run in a workbench's pod as its
// container's root, connects to the workbench's port on the pod's
// loopback as uid (setuid first) and asks for /health: it prints
// "served" when a status line came back, "refused" on a reset or an EOF
// before any byte.
func ConnectAsCommand(uid, port int) []string {
	const script = `import os, socket, sys
uid, port = int(sys.argv[1]), int(sys.argv[2])
os.setgroups([]); os.setgid(uid); os.setuid(uid)
try:
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(b"GET /health HTTP/1.0\r\nHost: workbench\r\n\r\n")
    data = s.recv(64)
except (ConnectionResetError, BrokenPipeError):
    data = b""
print("served" if data.startswith(b"HTTP/") else "refused" if not data else "other: %r" % data)
`
	return []string{"python3", "-c", script, strconv.Itoa(uid), strconv.Itoa(port)}
}
