package sandbox

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// seccompData is struct seccomp_data as the kernel hands it to a filter,
// laid out for the BPF interpreter of x/net/bpf, which loads 32-bit words
// big-endian where the kernel loads them in native order: each word is
// stored big-endian where the native layout puts it.
func seccompData(nr int, auditArch uint32, args ...uint64) []byte {
	b := make([]byte, 64)
	be := binary.BigEndian
	be.PutUint32(b[0:], uint32(nr))
	be.PutUint32(b[4:], auditArch)
	little := binary.NativeEndian.Uint16([]byte{1, 0}) == 1
	for i, a := range args {
		lo, hi := 16+8*i, 16+8*i+4
		if !little {
			lo, hi = hi, lo
		}
		be.PutUint32(b[lo:], uint32(a))
		be.PutUint32(b[hi:], uint32(a>>32))
	}
	return b
}

// filterVerdict runs the assembled filter in a BPF interpreter.
func filterVerdict(t *testing.T, data []byte) uint32 {
	t.Helper()
	return progVerdict(t, filterProg, data)
}

// progVerdict runs a filter in a BPF interpreter.
func progVerdict(t *testing.T, filter func() ([]unix.SockFilter, error), data []byte) uint32 {
	t.Helper()
	prog, err := filter()
	if err != nil {
		t.Fatal(err)
	}
	insts := make([]bpf.Instruction, len(prog))
	for i, f := range prog {
		insts[i] = bpf.RawInstruction{Op: f.Code, Jt: f.Jt, Jf: f.Jf, K: f.K}.Disassemble()
	}
	vm, err := bpf.NewVM(insts)
	if err != nil {
		t.Fatal(err)
	}
	v, err := vm.Run(data)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(v)
}

const (
	retAllow  = uint32(unix.SECCOMP_RET_ALLOW)
	retEPERM  = uint32(unix.SECCOMP_RET_ERRNO) | uint32(unix.EPERM)
	retENOSYS = uint32(unix.SECCOMP_RET_ERRNO) | uint32(unix.ENOSYS)
	retNoAF   = uint32(unix.SECCOMP_RET_ERRNO) | uint32(unix.EAFNOSUPPORT)
	retNoProt = uint32(unix.SECCOMP_RET_ERRNO) | uint32(unix.EPROTONOSUPPORT)
)

// TestFilterProgram evaluates the filter on every denied call, on calls
// Python needs, on the argument-dependent rules and on other ABIs.
func TestFilterProgram(t *testing.T) {
	t.Parallel()
	info, err := arch.GetInfo("")
	if err != nil {
		t.Fatal(err)
	}
	nr := func(name string) int {
		n, ok := info.SyscallNames[name]
		if !ok {
			t.Fatalf("no syscall %s on %s", name, info.Name)
		}
		return n
	}
	native := uint32(info.ID)
	// The list must all be there.
	must := []string{"add_key", "request_key", "keyctl", "ptrace", "bpf", "perf_event_open", "userfaultfd",
		"io_uring_setup", "io_uring_enter", "io_uring_register", "mount", "umount2", "fsopen", "fsmount",
		"move_mount", "open_tree", "unshare", "setns", "kexec_load"}
	if info.Name == "x86_64" {
		must = append(must, "kexec_file_load")
	}
	denied := DeniedSyscalls()
	for _, name := range must {
		if !slices.Contains(denied, name) {
			t.Errorf("%s is not in the filter", name)
		}
	}
	for _, name := range slices.Compact(slices.Sorted(slices.Values(denied))) {
		if name == "socket" {
			continue // by family, below
		}
		want := retEPERM
		if slices.Contains(enosysCalls, name) {
			want = retENOSYS
		}
		var args []uint64
		switch name {
		case "clone":
			args = []uint64{unix.CLONE_NEWUSER}
		case "personality":
			args = []uint64{0x0040000} // ADDR_NO_RANDOMIZE
		}
		if got := filterVerdict(t, seccompData(nr(name), native, args...)); got != want {
			t.Errorf("%s: verdict %#x, want %#x", name, got, want)
		}
	}
	allowed := []struct {
		name string
		args []uint64
	}{
		{"read", nil}, {"write", nil}, {"openat", nil}, {"mmap", nil}, {"execve", nil}, {"wait4", nil},
		{"setuid", nil}, {"setgid", nil}, {"setgroups", nil}, {"setsid", nil}, {"chdir", nil}, {"seccomp", nil},
		{"futex", nil}, {"prlimit64", nil}, {"kill", nil},
		{"socket", []uint64{unix.AF_UNIX, unix.SOCK_STREAM}}, {"socket", []uint64{unix.AF_INET, unix.SOCK_DGRAM}},
		{"socket", []uint64{unix.AF_INET6, unix.SOCK_STREAM}}, {"socket", []uint64{unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE}},
		// glibc's fork and pthread_create (after clone3's ENOSYS).
		{"clone", []uint64{unix.CLONE_CHILD_SETTID | unix.CLONE_CHILD_CLEARTID | uint64(unix.SIGCHLD)}},
		{"clone", []uint64{unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND | unix.CLONE_THREAD | unix.CLONE_SYSVSEM | unix.CLONE_SETTLS | unix.CLONE_PARENT_SETTID | unix.CLONE_CHILD_CLEARTID}},
		{"personality", []uint64{0xffffffff}},
		{"personality", []uint64{0}},
	}
	for _, a := range allowed {
		if got := filterVerdict(t, seccompData(nr(a.name), native, a.args...)); got != retAllow {
			t.Errorf("%s%v: verdict %#x, want allow", a.name, a.args, got)
		}
	}
	for _, ns := range []uint64{unix.CLONE_NEWNS, unix.CLONE_NEWCGROUP, unix.CLONE_NEWUTS, unix.CLONE_NEWIPC, unix.CLONE_NEWUSER, unix.CLONE_NEWPID, unix.CLONE_NEWNET} {
		if got := filterVerdict(t, seccompData(nr("clone"), native, ns|uint64(unix.SIGCHLD))); got != retEPERM {
			t.Errorf("clone(%#x): verdict %#x, want EPERM", ns, got)
		}
	}
	// Every socket family but four (docs/sandbox-filter.md), whatever the
	// upper bits of the argument, and netlink but its routing protocol.
	for _, a := range []struct {
		args []uint64
		want uint32
	}{
		{[]uint64{unix.AF_VSOCK, unix.SOCK_STREAM}, retNoAF},
		{[]uint64{unix.AF_PACKET, unix.SOCK_RAW}, retNoAF},
		{[]uint64{unix.AF_ALG, unix.SOCK_SEQPACKET}, retNoAF},
		{[]uint64{unix.AF_BLUETOOTH, unix.SOCK_STREAM}, retNoAF},
		{[]uint64{0, unix.SOCK_STREAM}, retNoAF},
		{[]uint64{1<<32 | unix.AF_INET, unix.SOCK_STREAM}, retNoAF},
		{[]uint64{unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_AUDIT}, retNoProt},
		{[]uint64{unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_KOBJECT_UEVENT}, retNoProt},
	} {
		if got := filterVerdict(t, seccompData(nr("socket"), native, a.args...)); got != a.want {
			t.Errorf("socket%v: verdict %#x, want %#x", a.args, got, a.want)
		}
	}
	// Another ABI: keyctl's i386 number through int 0x80 from an x86-64
	// process, and the x32 bit.
	if info.Name == "x86_64" {
		if got := filterVerdict(t, seccompData(288, uint32(arch.I386.ID))); got != retENOSYS {
			t.Errorf("i386 ABI: verdict %#x, want ENOSYS", got)
		}
		if got := filterVerdict(t, seccompData(nr("read")|0x40000000, native)); got != retENOSYS {
			t.Errorf("x32 ABI: verdict %#x, want ENOSYS", got)
		}
	}
}

// TestServerFilterProgram: the fork server's filter is the episode's but
// for unshare, which it allows exactly with CLONE_NEWPID|CLONE_NEWIPC, or
// that and CLONE_NEWNET (a graded case's); every other namespace call
// stays denied.
func TestServerFilterProgram(t *testing.T) {
	t.Parallel()
	info, err := arch.GetInfo("")
	if err != nil {
		t.Fatal(err)
	}
	native := uint32(info.ID)
	unshare, setns, clone, keyctl := info.SyscallNames["unshare"], info.SyscallNames["setns"], info.SyscallNames["clone"], info.SyscallNames["keyctl"]
	for _, tc := range []struct {
		nr   int
		args []uint64
		want uint32
	}{
		{unshare, []uint64{unix.CLONE_NEWPID | unix.CLONE_NEWIPC}, retAllow},
		{unshare, []uint64{unix.CLONE_NEWPID}, retEPERM},
		{unshare, []uint64{unix.CLONE_NEWUSER}, retEPERM},
		{unshare, []uint64{unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWIPC}, retEPERM},
		{unshare, []uint64{unix.CLONE_NEWNS}, retEPERM},
		{unshare, []uint64{unix.CLONE_NEWNET}, retEPERM},
		{unshare, []uint64{unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWNET}, retAllow},
		{unshare, []uint64{unix.CLONE_NEWPID | unix.CLONE_NEWNET}, retEPERM},
		{unshare, []uint64{unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWNET}, retEPERM},
		{unshare, []uint64{1<<32 | unix.CLONE_NEWPID | unix.CLONE_NEWIPC}, retEPERM},
		{unshare, []uint64{1<<32 | unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWNET}, retEPERM},
		{setns, []uint64{3, 0}, retEPERM},
		{clone, []uint64{unix.CLONE_NEWPID | uint64(unix.SIGCHLD)}, retEPERM},
		{keyctl, nil, retEPERM},
	} {
		if got := progVerdict(t, serverFilterProg, seccompData(tc.nr, native, tc.args...)); got != tc.want {
			t.Errorf("server filter, %d%v: verdict %#x, want %#x", tc.nr, tc.args, got, tc.want)
		}
		// The episode's filter, which every run's process installs over
		// the server's, denies them all.
		if got := filterVerdict(t, seccompData(tc.nr, native, tc.args...)); got == retAllow {
			t.Errorf("episode filter, %d%v: allowed", tc.nr, tc.args)
		}
	}
}

// syscallProbe calls system calls with harmless arguments and prints
// "name errno" (0 on success) for each: a call the filter let through
// fails on its own or leaves nothing behind (a key in the probe's own
// process keyring, a user namespace of its own). %s is a dict of syscall
// numbers.
const syscallProbe = `import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
NR = %s
L = ctypes.c_long
def call(name, *args):
    ctypes.set_errno(0)
    r = libc.syscall(NR[name], *args)
    print(name, 0 if r >= 0 else ctypes.get_errno(), flush=True)
call("add_key", b"user", b"agentpen-probe", b"x", L(1), L(-2))
call("keyctl", L(0), L(-4), L(0))
call("request_key", b"user", b"agentpen-probe", None, L(0))
call("io_uring_setup", L(1), None)
call("perf_event_open", None, L(0), L(-1), L(-1), L(0))
call("unshare", L(0x10000000))
call("personality", L(0xffffffff))
call("socket", L(40), L(1), L(0))
`

// TestFilterDeniesInKernel: code run in an episode gets EPERM for the
// listed calls the kernel would otherwise have served (or failed
// differently for), and EAFNOSUPPORT for a vsock socket, while the same
// probe started without the filter does not; the query form of
// personality stays allowed.
func TestFilterDeniesInKernel(t *testing.T) {
	ep := testEpisode(t, testSandbox(t, Namespaces))
	uid := claimUID(t)
	ws := uidDir(t, uid)
	info, err := arch.GetInfo("")
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"add_key", "keyctl", "request_key", "io_uring_setup", "perf_event_open", "unshare", "personality", "socket"}
	var nr strings.Builder
	nr.WriteString("{")
	for _, n := range names {
		fmt.Fprintf(&nr, "%q: %d, ", n, info.SyscallNames[n])
	}
	nr.WriteString("}")
	probe := fmt.Sprintf(syscallProbe, nr.String())

	filtered, err := ep.Run(context.Background(), Command{Argv: []string{python, "-E", "-s", "-c", probe}, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctl := exec.Command(python, "-E", "-s", "-c", probe)
	ctl.Dir = ws
	ctl.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}}}
	unfiltered, err := ctl.Output()
	if err != nil {
		t.Fatalf("control probe: %v", err)
	}
	got, ctlGot := parseProbe(string(filtered.Stdout)), parseProbe(string(unfiltered))
	// Under a filter of its own (Docker's profile in a container) the
	// control is filtered too, and proves nothing either way.
	status, _ := os.ReadFile("/proc/self/status")
	stacked := !strings.Contains(string(status), "Seccomp:\t0")
	eperm := fmt.Sprint(int(unix.EPERM))
	for _, n := range names {
		want := eperm
		if n == "socket" {
			want = fmt.Sprint(int(unix.EAFNOSUPPORT))
		}
		if n == "personality" {
			if got[n] != "0" {
				t.Errorf("personality(0xffffffff): errno %q, want success", got[n])
			}
			continue
		}
		if got[n] != want {
			t.Errorf("%s: errno %q under the filter, want %s; stderr %s", n, got[n], want, filtered.Stderr)
		}
		if stacked {
			continue // the container's own filter denies them too
		}
		if ctlGot[n] == want || ctlGot[n] == "" {
			t.Errorf("control: %s gave errno %q without the filter, so this case proves nothing", n, ctlGot[n])
		}
	}
}

func parseProbe(out string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			m[f[0]] = f[1]
		}
	}
	return m
}

// TestFilterStaysOffServerThreads: after runs, every thread of this
// process has the main thread's seccomp filters and no_new_privs: the
// filter is installed in the program's process only.
func TestFilterStaysOffServerThreads(t *testing.T) {
	ep := testEpisode(t, testSandbox(t, Unsandboxed))
	for range 5 {
		if _, err := ep.Run(context.Background(), Command{Argv: []string{python, "-c", "pass"}, Timeout: 10 * time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	read := func(path string) (filters, nnp string) {
		b, _ := os.ReadFile(path)
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "Seccomp_filters:"); ok {
				filters = strings.TrimSpace(v)
			}
			if v, ok := strings.CutPrefix(l, "NoNewPrivs:"); ok {
				nnp = strings.TrimSpace(v)
			}
		}
		return
	}
	wantF, wantN := read("/proc/self/status")
	var bad []string
	tasks, _ := filepath.Glob("/proc/self/task/*/status")
	for _, p := range tasks {
		if f, n := read(p); f != "" && (f != wantF || n != wantN) {
			bad = append(bad, fmt.Sprintf("%s: filters %s nnp %s", p, f, n))
		}
	}
	if len(bad) > 0 {
		t.Fatalf("threads with the filter (main: filters %s nnp %s): %v", wantF, wantN, bad)
	}
}
