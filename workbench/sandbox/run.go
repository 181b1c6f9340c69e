package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// DefaultOutputBytes is how much of each output stream Run keeps when
// Command.OutputBytes is zero.
const DefaultOutputBytes = 1 << 20

// pipeDrain bounds how long Run waits for the output pipes to close once
// the program ended and its processes were killed; without a uid a
// process that left the session may still hold them.
const pipeDrain = 2 * time.Second

// Command is one program to run in the sandbox.
type Command struct {
	// Argv is the program and its arguments; Argv[0] must be an absolute path.
	Argv []string
	// Dir is the directory to run in, entered as the uid.
	Dir string
	// Env is the program's whole environment.
	Env []string
	// UID is the uid (and gid) to run as; negative runs as the server's
	// user, unsandboxed.
	UID int
	// Limits are the rlimits; zero fields take DefaultLimits.
	Limits Limits
	// Stdin is written to the program's standard input; nil gives it
	// /dev/null.
	Stdin []byte
	// Timeout bounds the run; zero means no bound but ctx.
	Timeout time.Duration
	// OutputBytes is how much of each of stdout and stderr is kept; zero
	// means DefaultOutputBytes. The rest is read and counted, not kept.
	OutputBytes int
}

// Result is what a run printed and how it ended.
type Result struct {
	Stdout, Stderr []byte
	// StdoutDropped and StderrDropped count the bytes read beyond OutputBytes.
	StdoutDropped, StderrDropped int64
	// ExitCode is the exit status, or minus the signal that ended the
	// program (Python's convention).
	ExitCode int
	// TimedOut is set when the run hit Timeout or ctx ended; the program
	// and all its processes were killed.
	TimedOut bool
}

// ErrLaunch is returned (wrapped) by Run when the program could not be
// started: the fork, the credential switch, the directory, the syscall
// filter, a limit or the exec failed.
var ErrLaunch = errors.New("sandbox launch failed")

// Run runs c (see the package doc) and returns once it ended and, with a
// uid, no process of the uid is left.
func Run(ctx context.Context, c Command) (Result, error) {
	if len(c.Argv) == 0 || !filepath.IsAbs(c.Argv[0]) {
		return Result{}, fmt.Errorf("run: argv %q: want an absolute program path: %w", c.Argv, ErrLaunch)
	}
	lims := c.Limits.WithDefaults().rlimits(c.UID >= 0)
	launcher, err := launcherPath(lims)
	if err != nil {
		return Result{}, fmt.Errorf("run %s: %w: %w", c.Argv[0], ErrLaunch, err)
	}
	keep := c.OutputBytes
	if keep <= 0 {
		keep = DefaultOutputBytes
	}

	var closers []*os.File
	defer func() {
		for _, f := range closers {
			f.Close()
		}
	}()
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			closers = append(closers, r, w)
		}
		return r, w, err
	}
	outR, outW, err := pipe()
	if err != nil {
		return Result{}, fmt.Errorf("run: %w", err)
	}
	errR, errW, err := pipe()
	if err != nil {
		return Result{}, fmt.Errorf("run: %w", err)
	}
	launchR, launchW, err := pipe()
	if err != nil {
		return Result{}, fmt.Errorf("run: %w", err)
	}
	attr := &syscall.SysProcAttr{Setsid: true}
	if c.UID >= 0 {
		attr.Credential = &syscall.Credential{Uid: uint32(c.UID), Gid: uint32(c.UID), Groups: []uint32{}}
	}
	cmd := &exec.Cmd{
		Path:        launcher,
		Args:        append([]string{launcherArg0}, c.Argv...),
		Env:         c.Env,
		Dir:         c.Dir,
		Stdout:      outW,
		Stderr:      errW,
		ExtraFiles:  []*os.File{launcherErrFD - 3: launchW}, // ExtraFiles[i] is the child's fd 3+i
		SysProcAttr: attr,
	}
	var inW *os.File
	if c.Stdin != nil {
		var inR *os.File
		if inR, inW, err = pipe(); err != nil {
			return Result{}, fmt.Errorf("run: %w", err)
		}
		cmd.Stdin = inR
	}
	if err := startFiltered(cmd); err != nil {
		return Result{}, fmt.Errorf("run %s in %s: %w: %w", c.Argv[0], c.Dir, ErrLaunch, err)
	}
	// Only the child holds the write ends now.
	outW.Close()
	errW.Close()
	launchW.Close()

	var wg sync.WaitGroup
	var res Result
	var launchMsg []byte
	wg.Add(3)
	go func() { defer wg.Done(); res.Stdout, res.StdoutDropped = readCapped(outR, keep) }()
	go func() { defer wg.Done(); res.Stderr, res.StderrDropped = readCapped(errR, keep) }()
	go func() { defer wg.Done(); launchMsg, _ = readCapped(launchR, 4096) }()
	if inW != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			inW.Write(c.Stdin) // EPIPE when the program does not read it
			inW.Close()
		}()
	}

	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var timeout <-chan time.Time
	if c.Timeout > 0 {
		timer := time.NewTimer(c.Timeout)
		defer timer.Stop()
		timeout = timer.C
	}
	var waitErr error
	select {
	case waitErr = <-waited:
	case <-timeout:
		res.TimedOut = true
	case <-ctx.Done():
		res.TimedOut = true
	}
	// Nothing the program started may outlive the run: a leftover process
	// could hold the output pipes or race the server's next step.
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	var killErr error
	if c.UID >= 0 {
		// Processes that are only exiting run nothing more of the program:
		// the run is over (whoever releases the uid checks again).
		if killErr = KillUntilNone(c.UID); errors.Is(killErr, ErrStillExiting) {
			killErr = nil
		}
	}
	if res.TimedOut {
		waitErr = <-waited
	}
	drained := make(chan struct{})
	go func() { wg.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(pipeDrain):
		// A process outside the uid's reach holds a pipe; stop reading.
		outR.Close()
		errR.Close()
		launchR.Close()
		if inW != nil {
			inW.Close()
		}
		<-drained
	}
	if len(launchMsg) > 0 {
		return res, fmt.Errorf("run %s: %s: %w", c.Argv[0], launchFailure(launchMsg, lims, c.Argv[0]), ErrLaunch)
	}
	if killErr != nil {
		return res, fmt.Errorf("run %s: %w", c.Argv[0], killErr)
	}
	res.ExitCode = exitCode(cmd.ProcessState)
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) {
		return res, fmt.Errorf("run %s: wait: %w", c.Argv[0], waitErr)
	}
	return res, nil
}

func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -int(ws.Signal())
	}
	return ps.ExitCode()
}

// readCapped reads r to its end, keeping the first keep bytes and counting
// the rest.
func readCapped(r io.Reader, keep int) ([]byte, int64) {
	var kept []byte
	var dropped int64
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			room := keep - len(kept)
			if room > n {
				room = n
			}
			if room > 0 {
				kept = append(kept, buf[:room]...)
			}
			dropped += int64(n - max(room, 0))
		}
		if err != nil {
			return kept, dropped
		}
	}
}
