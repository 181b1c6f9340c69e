package sandbox

import "golang.org/x/sys/unix"

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

// rlimits lists the limits to set: negative fields are left alone, the
// process count is set only with a uid, and the POSIX message queue bytes
// are always 0 (a queue outlives its processes, and nothing of the
// standard library needs one).
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
	add("MSGQUEUE", unix.RLIMIT_MSGQUEUE, 0)
	return out
}
