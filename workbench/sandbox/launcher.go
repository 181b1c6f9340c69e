package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// launcherArg0 is argv[0] of a process started as a launcher.
const launcherArg0 = "agentpen-sandbox-launcher"

// launcherErrFD is the descriptor a launcher reports a failure on; it is
// close-on-exec, so the program it starts never sees it.
const launcherErrFD = 3

// launchSpec is what a launcher is told, as JSON in argv[1]. The program's
// argv follows it.
type launchSpec struct {
	// UID is the uid (and gid) to become; negative keeps the current one.
	UID    int    `json:"uid"`
	Dir    string `json:"dir"`
	Limits Limits `json:"limits"`
}

// RunLauncherIfRequested turns the process into a launcher when Run
// started it as one: it sets the limits, drops to the uid, changes into
// the directory and execs the program, and never returns. Otherwise it
// returns at once. Call it first thing in main and in TestMain of every
// package whose tests run sandboxed code.
func RunLauncherIfRequested() {
	if len(os.Args) < 3 || os.Args[0] != launcherArg0 {
		return
	}
	err := launch(os.Args[1], os.Args[2:])
	// Only reached when something failed before or at exec.
	errf := os.NewFile(launcherErrFD, "launcher-errors")
	if errf != nil {
		fmt.Fprintf(errf, "%v", err)
	}
	os.Exit(127)
}

func launch(specJSON string, argv []string) error {
	unix.CloseOnExec(launcherErrFD)
	var spec launchSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		return fmt.Errorf("launcher spec: %w", err)
	}
	// prctl and exec act on the calling thread; keep them on one.
	runtime.LockOSThread()
	if spec.UID >= 0 {
		if err := syscall.Setgroups([]int{}); err != nil {
			return fmt.Errorf("setgroups: %w", err)
		}
		if err := syscall.Setgid(spec.UID); err != nil {
			return fmt.Errorf("setgid %d: %w", spec.UID, err)
		}
		if err := syscall.Setuid(spec.UID); err != nil {
			return fmt.Errorf("setuid %d: %w", spec.UID, err)
		}
		if os.Getuid() != spec.UID || os.Geteuid() != spec.UID || os.Getegid() != spec.UID {
			return fmt.Errorf("still uid %d/%d after setuid %d", os.Getuid(), os.Geteuid(), spec.UID)
		}
	}
	unix.Umask(0o077)
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if err := unix.Chdir(spec.Dir); err != nil {
		return fmt.Errorf("chdir %s: %w", spec.Dir, err)
	}
	// Everything exec needs is built before the limits are set: once the
	// address space and file size are bounded, the Go runtime of this
	// launcher may not be able to allocate, so from here on only raw
	// system calls run. (Lowering a limit needs no privilege, so they can
	// come after the uid is dropped.)
	path, err := syscall.BytePtrFromString(argv[0])
	if err != nil {
		return fmt.Errorf("exec %q: %w", argv[0], err)
	}
	argvp, err := syscall.SlicePtrFromStrings(argv)
	if err != nil {
		return fmt.Errorf("exec %q: %w", argv[0], err)
	}
	envp, err := syscall.SlicePtrFromStrings(os.Environ())
	if err != nil {
		return fmt.Errorf("exec %q: environment: %w", argv[0], err)
	}
	limits := spec.Limits.rlimits(spec.UID >= 0)
	lims := make([]unix.Rlimit, len(limits))
	for i, l := range limits {
		lims[i] = unix.Rlimit{Cur: l.value, Max: l.value}
	}
	for i, l := range limits {
		_, _, errno := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, 0, uintptr(l.resource),
			uintptr(unsafe.Pointer(&lims[i])), 0, 0, 0)
		if errno != 0 {
			return fmt.Errorf("setrlimit %s %d: %w", l.name, l.value, errno)
		}
	}
	_, _, errno := syscall.RawSyscall(syscall.SYS_EXECVE, uintptr(unsafe.Pointer(path)),
		uintptr(unsafe.Pointer(&argvp[0])), uintptr(unsafe.Pointer(&envp[0])))
	return fmt.Errorf("exec %s: %w", argv[0], errno)
}

// Limits are the resource limits of one run; a zero field takes the
// default (see DefaultLimits), a negative one means unlimited.
type Limits struct {
	// Processes bounds the processes of the uid (RLIMIT_NPROC); applied
	// only with a uid, since without one it would count the server's own.
	Processes int `json:"processes"`
	// FileSize bounds the size of any file written, in bytes (RLIMIT_FSIZE).
	FileSize int64 `json:"file_size_bytes"`
	// OpenFiles bounds the open descriptors per process (RLIMIT_NOFILE).
	OpenFiles int `json:"open_files"`
	// CPUSeconds bounds each process's CPU time (RLIMIT_CPU; SIGKILL at the
	// limit).
	CPUSeconds int `json:"cpu_seconds"`
	// AddressSpace bounds each process's virtual memory, in bytes (RLIMIT_AS).
	AddressSpace int64 `json:"address_space_bytes"`
}

// DefaultLimits are the per-run limits used for zero fields.
var DefaultLimits = Limits{
	Processes:    64,
	FileSize:     16 << 20,
	OpenFiles:    256,
	CPUSeconds:   30,
	AddressSpace: 1 << 30,
}

// WithDefaults returns l with every zero field set from DefaultLimits.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits
	if l.Processes == 0 {
		l.Processes = d.Processes
	}
	if l.FileSize == 0 {
		l.FileSize = d.FileSize
	}
	if l.OpenFiles == 0 {
		l.OpenFiles = d.OpenFiles
	}
	if l.CPUSeconds == 0 {
		l.CPUSeconds = d.CPUSeconds
	}
	if l.AddressSpace == 0 {
		l.AddressSpace = d.AddressSpace
	}
	return l
}

type rlimit struct {
	name     string
	resource int
	value    uint64
}

// rlimits lists the limits to set; negative fields are left alone, and
// the process count only with a uid.
func (l Limits) rlimits(withUID bool) []rlimit {
	var out []rlimit
	add := func(name string, res int, v int64) {
		if v >= 0 {
			out = append(out, rlimit{name, res, uint64(v)})
		}
	}
	if withUID {
		add("NPROC", unix.RLIMIT_NPROC, int64(l.Processes))
	}
	add("FSIZE", unix.RLIMIT_FSIZE, l.FileSize)
	add("NOFILE", unix.RLIMIT_NOFILE, int64(l.OpenFiles))
	add("CPU", unix.RLIMIT_CPU, int64(l.CPUSeconds))
	add("AS", unix.RLIMIT_AS, l.AddressSpace)
	return out
}
