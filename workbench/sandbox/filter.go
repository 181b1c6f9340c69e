package sandbox

import (
	"errors"
	"fmt"
	"sync"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// A denial is one entry of the syscall filter: system calls episode code
// gets EPERM for, and why. The list is Docker's default profile's denials
// that Python's standard library does not need, plus the keyring calls
// Docker denies too but a bare host would not; docs/sandbox-filter.md
// explains each entry.
type denial struct {
	names []string
	// args, when set, denies the call only when every condition holds.
	args seccomp.ArgumentConditions
	// errno is what the call fails with; zero means EPERM.
	errno unix.Errno
	why   string
}

// cloneNamespaceFlags are the clone(2) flags that make a namespace:
// CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER,
// CLONE_NEWPID and CLONE_NEWNET (Docker's mask 0x7E020000).
const cloneNamespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// denials is the filter. Names an architecture lacks are left out there.
var denials = []denial{
	{names: []string{"add_key", "request_key", "keyctl"},
		why: "kernel keyrings outlive every process of the uid: keys passed graded cases' inputs to later cases and to other uids' episodes (issue 14)"},
	{names: []string{"ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd"},
		why: "reading or steering another process; Docker denies them without CAP_SYS_PTRACE"},
	{names: []string{"bpf", "perf_event_open", "userfaultfd"},
		why: "large kernel attack surface (eBPF, perf, userfaultfd's exploit-friendly page-fault stalls); Docker denies them"},
	{names: []string{"io_uring_setup", "io_uring_enter", "io_uring_register"},
		why: "io_uring runs operations no syscall filter sees and is a frequent source of kernel exploits; Docker denies it"},
	{names: []string{"mount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount", "fspick", "open_tree", "move_mount", "mount_setattr"},
		why: "the mount family (old and new API); Docker denies it without CAP_SYS_ADMIN"},
	unshareDenial,
	{names: []string{"setns"},
		why: "joining other namespaces; Docker denies it. A run spawned beside a fork server holds every capability in the server's user namespace (it owns it from the parent): with setns it joined that one and the next run's IPC namespace (TestForkServerOwnerReachesNothing)"},
	{names: []string{"clone"}, args: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.BitsSet, Value: cloneNamespaceFlags}},
		why: "clone that makes a namespace, as unshare does; plain fork and threads stay allowed; Docker's rule"},
	{names: []string{"kexec_load", "kexec_file_load", "reboot", "init_module", "finit_module", "delete_module"},
		why: "loading kernels and modules, rebooting; Docker denies them"},
	{names: []string{"acct", "swapon", "swapoff", "quotactl", "quotactl_fd", "syslog", "vhangup", "lookup_dcookie", "nfsservctl", "uselib", "ustat", "sysfs", "_sysctl", "iopl", "ioperm"},
		why: "host administration and obsolete calls; Docker denies them"},
	{names: []string{"settimeofday", "clock_settime", "clock_adjtime"},
		why: "setting the clock; Docker denies it without CAP_SYS_TIME"},
	{names: []string{"name_to_handle_at", "open_by_handle_at"},
		why: "file handles open files by inode, past every directory permission (the 'shocker' escape); Docker denies them"},
	{names: []string{"mbind", "set_mempolicy", "get_mempolicy", "move_pages", "migrate_pages"},
		why: "NUMA memory placement; Docker denies it without CAP_SYS_NICE"},
	{names: []string{"fanotify_init"},
		why: "filesystem-wide event monitoring; Docker denies it without CAP_SYS_ADMIN"},
	{names: []string{"socket"},
		args: seccomp.ArgumentConditions{
			{Argument: 0, Operation: seccomp.NotEqual, Value: unix.AF_UNIX},
			{Argument: 0, Operation: seccomp.NotEqual, Value: unix.AF_INET},
			{Argument: 0, Operation: seccomp.NotEqual, Value: unix.AF_INET6},
			{Argument: 0, Operation: seccomp.NotEqual, Value: unix.AF_NETLINK},
		},
		errno: unix.EAFNOSUPPORT,
		why:   "every socket family but AF_UNIX, AF_INET, AF_INET6 and AF_NETLINK: AF_VSOCK's ports are one table for the whole machine (two episodes passed data through it), and the rest (packet, crypto, bluetooth, ...) is kernel attack surface no task needs; docs/sandbox-filter.md"},
	{names: []string{"socket"},
		args: seccomp.ArgumentConditions{
			{Argument: 0, Operation: seccomp.Equal, Value: unix.AF_NETLINK},
			{Argument: 2, Operation: seccomp.NotEqual, Value: unix.NETLINK_ROUTE},
		},
		errno: unix.EPROTONOSUPPORT,
		why:   "netlink other than NETLINK_ROUTE (which if_nameindex and getaddrinfo use): audit, netfilter, uevents and the rest"},
	{names: []string{"shmget", "msgget", "semget"},
		why: "System V IPC: each run has an IPC namespace of its own, whose limits are the kernel's defaults (shmmax unbounded), not the workspace container's sysctls, so a segment pins memory no rlimit counts for as long as the run lasts; Python's standard library uses none of it (multiprocessing uses POSIX semaphores and shared memory, on the episode's /dev/shm)"},
	{names: []string{"personality"},
		args: seccomp.ArgumentConditions{
			{Argument: 0, Operation: seccomp.NotEqual, Value: 0x0},
			{Argument: 0, Operation: seccomp.NotEqual, Value: 0x8},
			{Argument: 0, Operation: seccomp.NotEqual, Value: 0x20000},
			{Argument: 0, Operation: seccomp.NotEqual, Value: 0x20008},
			{Argument: 0, Operation: seccomp.NotEqual, Value: 0xffffffff},
		},
		why: "personality other than Docker's allowed values (e.g. ADDR_NO_RANDOMIZE turns off ASLR for what it execs)"},
}

// unshareDenial is the filter's unshare entry; the fork server's filter
// replaces it (serverDenials).
var unshareDenial = denial{names: []string{"unshare"},
	why: "new namespaces (a user namespace gives back every capability inside it); Docker denies it"}

// serverDenials are the fork server's filter (forkserver.go): the
// episode's but for unshare, which it may call to make a PID and an IPC
// namespace together, with or without a network namespace (once per run, in the run's own child, which then
// drops its capabilities and installs the episode's filter over this one
// before it forks anything that runs agent code).
var serverDenials = func() []denial {
	out := make([]denial, 0, len(denials))
	for _, d := range denials {
		if d.names[0] == "unshare" {
			d.args = seccomp.ArgumentConditions{
				{Argument: 0, Operation: seccomp.NotEqual, Value: unix.CLONE_NEWPID | unix.CLONE_NEWIPC},
				{Argument: 0, Operation: seccomp.NotEqual, Value: unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWNET},
			}
			d.why = "unshare but of a PID and an IPC namespace together (and a network namespace, for a graded case)"
		}
		out = append(out, d)
	}
	return out
}()

// enosysCalls get ENOSYS instead of EPERM: clone3 passes its flags in
// memory a filter cannot read, and glibc falls back to clone (filtered
// above) on ENOSYS, as under Docker's profile.
var enosysCalls = []string{"clone3"}

// ErrFilter is returned (wrapped) when the syscall filter cannot be
// built; nothing is started then.
var ErrFilter = errors.New("syscall filter")

// filterProg is the filter, built once: every launcher installs it on the
// program's process (no_new_privs first), right before the exec, and every
// fork server run's process before it forks the run.
var filterProg = sync.OnceValues(func() ([]unix.SockFilter, error) { return buildFilter(denials) })

// serverFilterProg is the fork server's filter (serverDenials), built once.
var serverFilterProg = sync.OnceValues(func() ([]unix.SockFilter, error) { return buildFilter(serverDenials) })

// buildFilter assembles the filter for this architecture: first a guard
// that fails every system call made through another architecture's ABI
// (an x86-64 process can use the i386 int 0x80 entry, which a filter
// keyed on x86-64 numbers would let through), then clone3, then the
// library's program for the denials, whose default is allow.
func buildFilter(denials []denial) ([]unix.SockFilter, error) {
	info, err := arch.GetInfo("")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFilter, err)
	}
	// Each denial is assembled on its own and the pieces chained: the
	// library leaves an argument in the accumulator after a conditional
	// rule that did not match, and a rule after it in the same program
	// would compare that with syscall numbers (a socket call of a family
	// the first socket rule let through was then never checked by the
	// second). Every piece loads the number again; its closing "allow"
	// becomes a no-op that falls through to the next piece.
	var body []bpf.Instruction
	for _, d := range denials {
		g := seccomp.SyscallGroup{Action: seccomp.ActionErrno}
		if d.errno != 0 {
			g.Action = seccomp.ActionErrno | seccomp.Action(d.errno)
		}
		for _, name := range d.names {
			if _, ok := info.SyscallNames[name]; !ok {
				continue
			}
			if d.args == nil {
				g.Names = append(g.Names, name)
			} else {
				g.NamesWithCondtions = append(g.NamesWithCondtions, seccomp.NameWithConditions{Name: name, Conditions: d.args})
			}
		}
		if len(g.Names)+len(g.NamesWithCondtions) == 0 {
			continue
		}
		piece, err := (&seccomp.Policy{DefaultAction: seccomp.ActionAllow, Syscalls: []seccomp.SyscallGroup{g}}).Assemble()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrFilter, err)
		}
		last := len(piece) - 1
		if piece[last] != (bpf.RetConstant{Val: uint32(seccomp.ActionAllow)}) {
			return nil, fmt.Errorf("%w: a piece ends with %v, not allow", ErrFilter, piece[last])
		}
		piece[last] = bpf.LoadConstant{Dst: bpf.RegA, Val: 0}
		body = append(body, piece...)
	}
	body = append(body, bpf.RetConstant{Val: uint32(seccomp.ActionAllow)})
	const (
		archOff = 4 // offsetof(struct seccomp_data, arch)
		nrOff   = 0 // offsetof(struct seccomp_data, nr)
	)
	enosys := bpf.RetConstant{Val: uint32(unix.SECCOMP_RET_ERRNO) | uint32(unix.ENOSYS)}
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: archOff, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.ID), SkipTrue: 1},
		enosys,
		bpf.LoadAbsolute{Off: nrOff, Size: 4},
	}
	for _, name := range enosysCalls {
		nr, ok := info.SyscallNames[name]
		if !ok {
			continue
		}
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(nr | info.SeccompMask), SkipFalse: 1}, enosys)
	}
	raw, err := bpf.Assemble(append(prog, body...))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFilter, err)
	}
	out := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		out[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	return out, nil
}

// DeniedSyscalls returns the names of the system calls the filter denies
// on this architecture (those denied only for some arguments included),
// for documentation and tests.
func DeniedSyscalls() []string {
	info, err := arch.GetInfo("")
	if err != nil {
		return nil
	}
	var out []string
	for _, d := range denials {
		for _, name := range d.names {
			if _, ok := info.SyscallNames[name]; ok {
				out = append(out, name)
			}
		}
	}
	for _, name := range enosysCalls {
		if _, ok := info.SyscallNames[name]; ok {
			out = append(out, name)
		}
	}
	return out
}
