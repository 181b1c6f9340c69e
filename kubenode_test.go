//go:build kubenode

package agentpen_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

// kubeNode runs scripts/kube-node.sh with args (and env added) and
// returns its standard output, standard error and exit status.
func kubeNode(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return kubeNodeCtx(t, testenv.Context(t), env, args...)
}

// kubeNodeCtx is kubeNode under ctx (a cleanup's).
func kubeNodeCtx(t *testing.T, ctx context.Context, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.CommandContext(ctx, "scripts/kube-node.sh", args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("kube-node.sh %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// hostState is what the node changes on the host and must give back: the
// sysctls the kubelet and the bridge plugin write, the bridge and veth
// links, the mounts of the node's kind (other work on the machine may
// mount and link what it likes meanwhile), and whether its ports listen.
func hostState(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, k := range []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
		"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes", "net/ipv4/ip_forward",
		"net/ipv4/conf/all/forwarding", "net/ipv4/conf/all/accept_redirects", "net/ipv4/conf/default/forwarding"} {
		v, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(k + "=" + strings.TrimSpace(string(v)) + "\n")
	}
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ifs {
		if i.Name == "cni0" || strings.HasPrefix(i.Name, "veth") {
			b.WriteString("link " + i.Name + "\n")
		}
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(l); len(f) > 4 && (strings.Contains(f[4], "agentpen-k8s") || strings.Contains(f[4], "kubelet") || strings.Contains(f[4], "netns/cni-")) {
			b.WriteString("mount " + f[4] + "\n")
		}
	}
	for _, p := range []int{6443, 23790, 23800, 10248, 10250, 10257} {
		if ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p)); err != nil {
			b.WriteString("port " + strconv.Itoa(p) + " taken\n")
		} else {
			ln.Close()
		}
	}
	return b.String()
}

// TestKubeNodeScript checks scripts/kube-node.sh itself (make kube-test
// runs it before the cluster tests, as it starts and stops a node of its
// own): start refuses a taken port (4), waits for the lock (3), stops
// what it started when it fails midway (1), starts the node once and
// finds it the second time, and stop gives the host
// back as it was; a host change stop cannot undo (a process left in a
// kubepods cgroup) makes it exit 5 naming what is left, and the next stop,
// with the process gone, finishes.
func TestKubeNodeScript(t *testing.T) {
	testenv.RequireRoot(t)
	if _, _, code := kubeNode(t, nil, "status"); code != 6 {
		t.Fatalf("kube-node.sh status exits %d: a node is recorded already (scripts/kube-node.sh stop)", code)
	}
	before := hostState(t)
	t.Cleanup(func() {
		ctx, cancel := testenv.CleanupContext(t)
		defer cancel()
		if _, stderr, code := kubeNodeCtx(t, ctx, nil, "stop"); code != 0 {
			t.Errorf("cleanup: kube-node.sh stop exits %d:\n%s", code, stderr)
		}
	})

	ln, err := net.Listen("tcp", "127.0.0.1:10257")
	if err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := kubeNode(t, nil, "start"); code != 4 || !strings.Contains(stderr, "port 10257 is taken") {
		t.Errorf("start with port 10257 taken: exit %d, want 4 naming the port:\n%s", code, stderr)
	}
	ln.Close()

	lock, err := os.OpenFile("/run/agentpen-k8s.lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := kubeNode(t, []string{"KUBE_NODE_LOCK_WAIT=1"}, "start"); code != 3 {
		t.Errorf("start while the lock is held: exit %d, want 3:\n%s", code, stderr)
	}
	lock.Close()

	// A start that fails midway (an image the daemon lacks) stops what it
	// started.
	if out, stderr, code := kubeNode(t, []string{"WORKBENCH_IMAGE=agentpen/workbench:no-such-tag"}, "start"); code != 1 || out != "" || !strings.Contains(stderr, "no-such-tag is missing") {
		t.Errorf("start without the workbench image: exit %d, stdout %q, want 1 naming the image:\n%s", code, out, stderr)
	}
	if _, _, code := kubeNode(t, nil, "status"); code != 6 {
		t.Errorf("status after a failed start: exit %d, want 6 (nothing recorded)", code)
	}
	if after := hostState(t); after != before {
		t.Errorf("the host after a failed start differs from before:\n--- before\n%s--- after\n%s", before, after)
	}

	const line = "export KUBECONFIG=/run/agentpen-k8s/kubeconfig\n"
	out, stderr, code := kubeNode(t, nil, "start")
	if code != 0 || out != line {
		t.Fatalf("start: exit %d, stdout %q, want 0 and %q:\n%s", code, out, line, stderr)
	}
	if out, stderr, code := kubeNode(t, nil, "start"); code != 0 || out != line || !strings.Contains(stderr, "running and Ready") {
		t.Errorf("a second start: exit %d, stdout %q, want 0, %q and the running node found:\n%s", code, out, line, stderr)
	}
	if out, _, code := kubeNode(t, nil, "status"); code != 0 || out != line {
		t.Errorf("status of a running node: exit %d, stdout %q", code, out)
	}

	// A process in a cgroup under kubepods: its cgroup cannot be removed.
	dir := "/sys/fs/cgroup/pids/kubepods/agentpen-test-stuck"
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sleeper := exec.Command("sleep", "3600")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { sleeper.Wait(); close(done) }()
	defer func() { sleeper.Process.Kill(); <-done }()
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(sleeper.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := kubeNode(t, nil, "stop"); code != 5 || !strings.Contains(stderr, "left: cgroups") || !strings.Contains(stderr, "agentpen-test-stuck") {
		t.Errorf("stop with a process left in a kubepods cgroup: exit %d, want 5 naming the cgroup:\n%s", code, stderr)
	}
	sleeper.Process.Kill()
	<-done
	if _, stderr, code := kubeNode(t, nil, "stop"); code != 0 || !strings.Contains(stderr, "host restored") {
		t.Errorf("stop once the process is gone: exit %d, want 0 and the host restored:\n%s", code, stderr)
	}
	if _, stderr, code := kubeNode(t, nil, "stop"); code != 0 || !strings.Contains(stderr, "nothing to stop") {
		t.Errorf("a second stop: exit %d, want 0 and nothing to stop:\n%s", code, stderr)
	}
	if _, _, code := kubeNode(t, nil, "status"); code != 6 {
		t.Errorf("status after stop: exit %d, want 6", code)
	}
	if after := hostState(t); after != before {
		t.Errorf("the host after start and stop differs from before:\n--- before\n%s--- after\n%s", before, after)
	}
}
