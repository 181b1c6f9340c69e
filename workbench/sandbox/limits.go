package sandbox

import (
	"fmt"
	"strconv"
	"strings"
)

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
	name  string // RLIMIT_<name> in Python's resource module
	value uint64
}

// rlimits lists the limits to set: negative fields are left alone, the
// process count is set only with a uid, and the POSIX message queue bytes
// are always 0 (a queue outlives its processes, and nothing of the
// standard library needs one).
func (l Limits) rlimits(withUID bool) []rlimit {
	var out []rlimit
	add := func(name string, v int64) {
		if v >= 0 {
			out = append(out, rlimit{name, uint64(v)})
		}
	}
	if withUID {
		add("NPROC", int64(l.Processes))
	}
	add("FSIZE", l.FileSize)
	add("NOFILE", int64(l.OpenFiles))
	add("CPU", int64(l.CPUSeconds))
	add("AS", l.AddressSpace)
	add("MSGQUEUE", 0)
	return out
}

// preludeErrFD is the descriptor the prelude reports a failure on; it
// closes it before any code of the caller's runs.
const preludeErrFD = 3

// preludeFunc is the name of the prelude's function; it deletes itself
// from __main__ before the caller's code runs.
const preludeFunc = "_agentpen_sandbox"

// preludeSource is the Python the interpreter runs first (python -c),
// before any code of the caller's: it sets the run's rlimits and umask
// 077, closes preludeErrFD, then runs the script (or code) as __main__ as
// `python FLAGS script args` (or `python FLAGS -c code args`) would:
// sys.argv, sys.path[0], __file__ absolute, tracebacks without the
// prelude's frames, exit status 1 on an uncaught exception.
//
// Until it sets the limits only the interpreter's start-up and this code
// run, both root's files: resource is imported with the working directory
// (the workspace, the uid's) off sys.path, so no file of the uid's stands
// in for it. %[1]s is the limits as a tuple of (name, value), %[2]s is
// "script" or "code", %[3]d is preludeErrFD.
const preludeSource = `def ` + preludeFunc + `():
    import os, sys
    me = sys._getframe().f_code
    g = sys.modules["__main__"].__dict__
    del g["` + preludeFunc + `"]
    saved = sys.path[:]
    try:
        sys.path[:] = [p for p in saved if p]
        import resource
        for name, value in %[1]s:
            resource.setrlimit(getattr(resource, "RLIMIT_" + name), (value, value))
        os.umask(0o077)
    except BaseException as e:
        os.write(%[3]d, ("%%s: %%s" %% (type(e).__name__, e)).encode())
        os._exit(127)
    finally:
        sys.path[:] = saved
    os.close(%[3]d)
    args = sys.argv[1:]
    try:
        if "%[2]s" == "code":
            name, src = "<string>", args[0]
            sys.argv[:] = ["-c"] + args[1:]
        else:
            name = os.path.abspath(args[0])
            sys.argv[:] = args
            if saved and saved[0] == "":
                sys.path[0] = os.path.dirname(name)
            try:
                with open(name, "rb") as f:
                    src = f.read()
            except OSError as e:
                sys.stderr.write("%%s: can't open file %%r: [Errno %%d] %%s\n" %% (sys.executable, name, e.errno, e.strerror))
                raise SystemExit(2)
            g["__file__"], g["__cached__"] = name, None
            g["__loader__"] = sys.modules["_frozen_importlib_external"].SourceFileLoader("__main__", name)
        del args
        exec(compile(src, name, "exec", dont_inherit=True), g)
    except SystemExit:
        raise
    except BaseException as e:
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code is me:
            tb = tb.tb_next
        sys.excepthook(type(e), e.with_traceback(tb), tb)
        raise SystemExit(1)
` + preludeFunc + `()
`

// prelude returns the prelude's source for these limits; code says
// whether the program is code text (else a script path).
func prelude(lims []rlimit, code bool) string {
	var t strings.Builder
	t.WriteString("(")
	for _, l := range lims {
		fmt.Fprintf(&t, "(%q, %s), ", l.name, strconv.FormatUint(l.value, 10))
	}
	t.WriteString(")")
	mode := "script"
	if code {
		mode = "code"
	}
	return fmt.Sprintf(preludeSource, t.String(), mode, preludeErrFD)
}
