package probe

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// silentListener is a loopback TCP port whose accept queue is full, so a
// further connect is never answered: a timeout, not a refusal.
func silentListener(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, _ := syscall.Getsockname(fd)
	addr := "127.0.0.1:" + strconv.Itoa(sa.(*syscall.SockaddrInet4).Port)
	// Fill the queue; these connects may themselves hang, so bound them.
	for range 3 {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			t.Cleanup(func() { c.Close() })
		}
	}
	return addr
}

func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestDialTCPOutcomes(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	for _, tt := range []struct {
		name, addr, want string
	}{
		{"connected", ln.Addr().String(), OutcomeConnected},
		{"refused", closedPort(t), OutcomeRefused},
		{"timeout", silentListener(t), OutcomeTimeout},
		{"dns", "no-such-host.invalid:80", OutcomeDNS},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// Only the silent listener's dial is meant to reach its
			// timeout; the others get one load cannot overrun.
			timeout := MaxTimeout
			if tt.want == OutcomeTimeout {
				timeout = 300 * time.Millisecond
			}
			got, msg := DialTCP(context.Background(), tt.addr, timeout)
			if got != tt.want {
				t.Fatalf("DialTCP(%s) = %s (%s), want %s", tt.addr, got, msg, tt.want)
			}
			if (got == OutcomeConnected) != (msg == "") {
				t.Fatalf("error text %q for %s", msg, got)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	bg := context.Background()
	done, cancel := context.WithCancel(bg)
	cancel()
	for _, tt := range []struct {
		name string
		ctx  context.Context
		err  error
		want string
	}{
		{"nil", bg, nil, OutcomeConnected},
		{"refused", bg, &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, OutcomeRefused},
		{"netunreach", bg, &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ENETUNREACH)}, OutcomeUnreachable},
		{"hostunreach", bg, syscall.EHOSTUNREACH, OutcomeUnreachable},
		{"deadline", bg, context.DeadlineExceeded, OutcomeTimeout},
		{"ctx_done", done, errors.New("x"), OutcomeTimeout},
		{"dns", bg, &net.DNSError{Err: "no such host", Name: "x", IsNotFound: true}, OutcomeDNS},
		{"dns_timeout", bg, &net.DNSError{Err: "timeout", Name: "x", IsTimeout: true}, OutcomeTimeout},
		{"other", bg, errors.New("boom"), OutcomeError},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Classify(tt.ctx, tt.err); got != tt.want {
				t.Fatalf("Classify = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestRunBatch(t *testing.T) {
	t.Parallel()
	const secret = "batch-secret-4f1e"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-API-Key") != secret {
			w.WriteHeader(401)
			return
		}
		w.Write([]byte(`{"routes":{"/v1/score":{"authorized":0,"refused":2}}}`))
	}))
	defer srv.Close()
	silent := silentListener(t)
	// The probes that must complete get the longest timeout a batch
	// allows, so that load never turns them into timeouts; the silent
	// ones' 1 s timeouts are what they are there to reach.
	const long = int(MaxTimeout / time.Millisecond)
	b := Batch{Probes: []Request{
		{ID: "keyed", Kind: KindHTTP, URL: srv.URL + "/c", HeaderEnv: map[string]string{"X-API-Key": "WB_KEY"}, Body: true, TimeoutMS: long},
		{ID: "unkeyed", Kind: KindHTTP, URL: srv.URL + "/c", Method: "POST", Expect: []int{401}, TimeoutMS: long},
		{ID: "refused", Kind: KindHTTP, URL: "http://" + closedPort(t) + "/", TimeoutMS: long},
		{ID: "t1", Kind: KindTCP, Addr: silent, TimeoutMS: 1000},
		{ID: "t2", Kind: KindTCP, Addr: silent, TimeoutMS: 1000},
		{ID: "t3", Kind: KindTCP, Addr: silent, TimeoutMS: 1000},
		{ID: "t4", Kind: KindTCP, Addr: silent, TimeoutMS: 1000},
		{ID: "sock", Kind: KindSocket, TimeoutMS: long},
		{ID: "unset_env", Kind: KindHTTP, URL: srv.URL, HeaderEnv: map[string]string{"X-API-Key": "WB_UNSET"}, TimeoutMS: long},
	}}
	getenv := func(k string) string { return map[string]string{"WB_KEY": secret}[k] }
	start := time.Now()
	res, err := RunBatch(context.Background(), b, getenv)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	got := map[string]Outcome{}
	for _, o := range res.Results {
		got[o.ID] = o
	}
	// The four timeouts run together, not one after the other. The
	// control is their own latencies, measured in this run: run one
	// after the other, the batch would take at least their sum; together
	// it takes about the longest, and it fails only if the batch spent
	// more than the other three (about 3 s) outside them.
	var sum time.Duration
	for _, id := range []string{"t1", "t2", "t3", "t4"} {
		sum += time.Duration(got[id].LatencyMS * float64(time.Millisecond))
	}
	if took >= sum {
		t.Errorf("batch took %v, the four timeouts' latencies add up to %v: they did not run concurrently", took, sum)
	}
	if len(res.Results) != len(b.Probes) || res.Results[0].ID != "keyed" {
		t.Fatalf("results %+v", res.Results)
	}
	if o := got["keyed"]; o.Outcome != OutcomeReply || o.Status != 200 || !strings.Contains(string(o.Body), `"refused":2`) {
		t.Errorf("keyed: %+v", o)
	}
	if o := got["unkeyed"]; o.Outcome != OutcomeReply || o.Status != 401 || o.Error != "" || o.Body != nil {
		t.Errorf("unkeyed: %+v", o)
	}
	if o := got["refused"]; o.Outcome != OutcomeRefused {
		t.Errorf("refused: %+v", o)
	}
	for _, id := range []string{"t1", "t2", "t3", "t4"} {
		if o := got[id]; o.Outcome != OutcomeTimeout {
			t.Errorf("%s: %+v", id, o)
		}
	}
	if o := got["unset_env"]; o.Outcome != OutcomeError || !strings.Contains(o.Error, "WB_UNSET") {
		t.Errorf("unset_env: %+v", o)
	}
	line, _ := json.Marshal(res)
	if strings.Contains(string(line), secret) {
		t.Fatalf("the batch output holds the header value: %s", line)
	}
}

// TestRouteSendsNothing: a route probe finds the route to a UDP
// listener on the loopback and sends it nothing (the attestation asks for
// a route to an address it must never send to).
func TestRouteSendsNothing(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	res, err := RunBatch(t.Context(), Batch{Probes: []Request{{ID: "r", Kind: KindRoute, Addr: pc.LocalAddr().String()}}}, os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	if o := res.Results[0]; o.Outcome != OutcomeFound || o.Source != "127.0.0.1" {
		t.Fatalf("route to the loopback: %s %s from %q, want found from 127.0.0.1", o.Outcome, o.Error, o.Source)
	}
	pc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, from, err := pc.ReadFrom(make([]byte, 64)); err == nil {
		t.Fatalf("the listener received %d bytes from %v", n, from)
	}
}

func TestBatchValidate(t *testing.T) {
	for _, tt := range []struct {
		name string
		b    Batch
	}{
		{"empty", Batch{}},
		{"no_id", Batch{Probes: []Request{{Kind: KindSocket}}}},
		{"dup_id", Batch{Probes: []Request{{ID: "a", Kind: KindSocket}, {ID: "a", Kind: KindSocket}}}},
		{"bad_kind", Batch{Probes: []Request{{ID: "a", Kind: "udp"}}}},
		{"bad_url", Batch{Probes: []Request{{ID: "a", Kind: KindHTTP, URL: "file:///x"}}}},
		{"bad_addr", Batch{Probes: []Request{{ID: "a", Kind: KindTCP, Addr: "nohostport"}}}},
		{"route_to_a_name", Batch{Probes: []Request{{ID: "a", Kind: KindRoute, Addr: "metadata.google.internal:80"}}}},
		{"route_as", Batch{Probes: []Request{{ID: "a", Kind: KindRoute, Addr: "169.254.169.254:80", As: 20000}}}},
		{"bad_listen", Batch{Probes: []Request{{ID: "a", Kind: KindProcess, Listen: "udp:53"}}}},
		{"relative_unix", Batch{Probes: []Request{{ID: "a", Kind: KindProcess, Listen: "unix:wb.sock"}}}},
		{"bad_header_env", Batch{Probes: []Request{{ID: "a", Kind: KindHTTP, URL: "http://x/", HeaderEnv: map[string]string{"X-Key": "1BAD"}}}}},
		{"long_timeout", Batch{Probes: []Request{{ID: "a", Kind: KindTCP, Addr: "x:1", TimeoutMS: 60000}}}},
		{"too_many", Batch{Probes: make([]Request, MaxBatch+1)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := RunBatch(context.Background(), tt.b, os.Getenv); !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
		})
	}
}

func TestFindSockets(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	mk := func(p string) string {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		return full
	}
	ln, err := net.Listen("unix", mk("var/run/docker.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// A socket bind-mounted at an odd path, and a directory mount holding one.
	ln2, err := net.Listen("unix", mk("opt/x/sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln2.Close()
	ln3, err := net.Listen("unix", mk("mnt/dir/docker.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln3.Close()
	os.WriteFile(mk("run/user/1001/docker.sock"), nil, 0o600) // a plain file: listed, not a socket
	mountinfo := "22 1 0:21 / / rw - overlay overlay rw\n" +
		"30 22 0:30 / /opt/x/sock rw - tmpfs tmpfs rw\n" +
		"31 22 0:31 / /mnt/dir rw - tmpfs tmpfs rw\n" +
		"32 22 0:32 / /with\\040space rw - tmpfs tmpfs rw\n"
	os.WriteFile(mk("proc/self/mountinfo"), []byte(mountinfo), 0o600)
	getenv := func(k string) string {
		return map[string]string{"DOCKER_HOST": "tcp://10.0.0.1:2375"}[k]
	}
	got := map[string]Socket{}
	for _, s := range findSockets(context.Background(), root, getenv) {
		got[s.Path] = s
	}
	for path, want := range map[string]Socket{
		"/var/run/docker.sock":       {Path: "/var/run/docker.sock", How: "known_path", IsSocket: true, Connectable: true},
		"/opt/x/sock":                {Path: "/opt/x/sock", How: "mount", IsSocket: true, Connectable: true},
		"/mnt/dir/docker.sock":       {Path: "/mnt/dir/docker.sock", How: "mount", IsSocket: true, Connectable: true},
		"/run/user/1001/docker.sock": {Path: "/run/user/1001/docker.sock", How: "glob"},
		"tcp://10.0.0.1:2375":        {Path: "tcp://10.0.0.1:2375", How: "env"},
	} {
		if got[path] != want {
			t.Errorf("%s: got %+v, want %+v", path, got[path], want)
		}
	}
	if len(got) != 5 {
		t.Errorf("found %d, want 5: %+v", len(got), got)
	}
	if s := findSockets(context.Background(), t.TempDir(), func(string) string { return "" }); len(s) != 0 {
		t.Errorf("an empty root: %+v", s)
	}
	if u := unescapeMount(`/a\040b\011c`); u != "/a b\tc" {
		t.Errorf("unescape %q", u)
	}
}

func TestFindProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sock := filepath.Join(dir, "wb.sock")
	ul, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	port := tl.Addr().(*net.TCPAddr).Port
	wd, _ := os.Getwd()
	for _, listen := range []string{"unix:" + sock, "tcp:" + strconv.Itoa(port)} {
		p, err := findProcess("/proc", listen, -1)
		if err != nil {
			t.Fatalf("%s: %v", listen, err)
		}
		if p.Pid != os.Getpid() || p.ArgvDigest != ArgvDigest(os.Args) || p.Argc != len(os.Args) || p.Cwd != wd || p.Serves != listen || p.CapBnd == "" {
			t.Errorf("%s: %+v (pid %d, cwd %s)", listen, p, os.Getpid(), wd)
		}
	}
	// The probe never names itself.
	if _, err := findProcess("/proc", "unix:"+sock, os.Getpid()); err == nil {
		t.Error("found itself as the holder")
	}
	for _, listen := range []string{"unix:" + filepath.Join(dir, "none.sock"), "tcp:" + strconv.Itoa(port+1)} {
		if _, err := findProcess("/proc", listen, -1); err == nil {
			t.Errorf("%s: found a process for nothing listening", listen)
		}
	}
	if ArgvDigest([]string{"a", "b"}) == ArgvDigest([]string{"a\x00b"}) && ArgvDigest([]string{"ab"}) == ArgvDigest([]string{"a", "b"}) {
		t.Error("digest ambiguity")
	}
}

func TestContainerID(t *testing.T) {
	id := strings.Repeat("ab", 32)
	f := filepath.Join(t.TempDir(), "mountinfo")
	os.WriteFile(f, []byte("150 133 254:0 /home/u/.local/share/docker/containers/"+id+"/resolv.conf /etc/resolv.conf rw - ext4 /dev/vda rw\n"+
		"151 133 254:0 /home/u/.local/share/docker/containers/"+id+"/hostname /etc/hostname rw - ext4 /dev/vda rw\n"), 0o600)
	if got := containerID(f); got != id {
		t.Fatalf("containerID = %q, want %q", got, id)
	}
	// A pod's: its UID, in the root of the kubelet's /etc/hosts (the
	// sandbox's /etc/hostname names no pod).
	uid := "2aa87247-2ddd-441f-88a4-6a4a30a62eba"
	os.WriteFile(f, []byte("381 358 254:0 /var/lib/kubelet/pods/"+uid+"/etc-hosts /etc/hosts rw,relatime,idmapped - ext4 /dev/vda rw\n"+
		"383 358 254:0 /var/lib/containerd/io.containerd.grpc.v1.cri/sandboxes/"+id+"/hostname /etc/hostname ro,relatime,idmapped - ext4 /dev/vda rw\n"), 0o600)
	if got := containerID(f); got != uid {
		t.Fatalf("containerID in a pod = %q, want %q", got, uid)
	}
	os.WriteFile(f, []byte("151 133 254:0 /tmp/x/hostname /etc/hostname rw - ext4 /dev/vda rw\n"+
		"152 133 254:0 /tmp/pods/not-a-uid/etc-hosts /etc/hosts rw - ext4 /dev/vda rw\n"), 0o600)
	if got := containerID(f); got != "" {
		t.Fatalf("containerID outside a container = %q", got)
	}
	if got := containerID(filepath.Join(t.TempDir(), "none")); got != "" {
		t.Fatalf("no mountinfo: %q", got)
	}
}

// TestForgedUnixLine: code that binds a unix socket whose path holds a
// newline and a line of its own making (naming the workbench's socket
// and the forger's own socket inode) adds that line to /proc/net/unix;
// the custody probe took the forged inode as a listener of the
// workbench's socket and its holder as a candidate (held off only by pid
// order). Now an inode two lines name is refused, on the kernel's real
// table.
func TestForgedUnixLine(t *testing.T) {
	// Short paths: the forged line must fit in a socket address (108
	// bytes) with the path of the socket it names.
	dir, err := os.MkdirTemp("/tmp", "fu")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	target := filepath.Join(dir, "w")
	real, err := net.Listen("unix", target)
	if err != nil {
		t.Fatal(err)
	}
	defer real.Close()
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	forgedIno := strconv.FormatUint(st.Ino, 10)
	forged := filepath.Join(dir, "x") + "\n0000000000000000: 00000002 00000000 00010000 0001 01 " + forgedIno + " " + target
	// The forger makes the directories its path names (its own, in /tmp).
	if err := os.MkdirAll(filepath.Dir(forged), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: forged}); err != nil {
		t.Fatalf("bind a path with a newline: %v", err)
	}
	if err := syscall.Listen(fd, 1); err != nil {
		t.Fatal(err)
	}
	table, _ := os.ReadFile("/proc/net/unix")
	if !strings.Contains(string(table), "\n0000000000000000: 00000002 00000000 00010000 0001 01 "+forgedIno+" "+target+"\n") {
		t.Fatalf("the forged line is not in the table; the test proves nothing:\n%s", table)
	}
	got := unixListeners("/proc/net/unix", target)
	if got[forgedIno] {
		t.Fatalf("the forged inode %s was taken for a listener of %s", forgedIno, target)
	}
	if len(got) != 1 {
		t.Fatalf("listeners of %s: %v, want the real one alone", target, got)
	}
	p, err := findProcess("/proc", "unix:"+target, -1)
	if err != nil || p.Pid != os.Getpid() {
		t.Fatalf("the real listener: %+v %v", p, err)
	}
}
