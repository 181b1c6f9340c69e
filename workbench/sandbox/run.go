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
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultOutputBytes is how much of each output stream Run keeps when
// Command.OutputBytes is zero.
const DefaultOutputBytes = 1 << 20

// DefaultOutputLimit is the most a run may print (stdout and stderr
// together) when Command.OutputLimit is zero: past it the run is ended,
// as at its timeout (Result.OutputLimited). It is 16 times what is kept
// of each stream, and the largest file a run may write.
const DefaultOutputLimit = 16 << 20

// pipeDrain bounds how long a run waits for the output pipes to close once
// its processes were killed. In namespaces every holder is dead by then;
// without them a process the kill did not reach (another uid's, in the
// unsandboxed mode) may still hold one.
const pipeDrain = 2 * time.Second

// Command is one program to run in an episode.
type Command struct {
	// Argv is the program and its arguments; Argv[0] must be an absolute path.
	Argv []string
	// Env is the program's whole environment.
	Env []string
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
	// OutputLimit bounds what the run may print, stdout and stderr
	// together: once it has printed more, it is ended as at its timeout
	// and every process of it killed (Result.OutputLimited). Zero means
	// DefaultOutputLimit, negative no bound.
	OutputLimit int64
	// OwnNetwork runs the program in a network namespace of its own (its
	// loopback interface up) instead of the episode's; in namespaces only.
	// What earlier runs left in the episode's (a port in TIME_WAIT, a
	// socket bound and kept alive by descriptors in flight) is not there,
	// and nothing of the run outlives it. Graded cases run so.
	OwnNetwork bool
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
	// and all its processes were killed. Cancelled says it was ctx.
	TimedOut  bool
	Cancelled bool
	// OutputLimited is set when the run printed more than
	// Command.OutputLimit and was ended for it; the program and all its
	// processes were killed.
	OutputLimited bool
}

// ErrLaunch is returned (wrapped) by Run when the program could not be
// started: a namespace could not be entered, the fork, the credential
// switch, the directory, the syscall filter, a limit or the exec failed.
// The wrapped errno says why.
var ErrLaunch = errors.New("sandbox launch failed")

// Run runs c in the episode (see the package doc) and returns once it
// ended and none of its processes is left: start, wait, reap.
func (e *Episode) Run(ctx context.Context, c Command) (Result, error) {
	p, err := e.start(c)
	if err != nil {
		return Result{}, err
	}
	stopped, waitErr := p.wait(ctx, c.Timeout)
	return p.reap(stopped, waitErr)
}

// stopCause is why the server ended a run (none: it ended by itself).
type stopCause int

const (
	notStopped stopCause = iota
	stoppedDeadline
	stoppedContext
	stoppedOutput
)

// proc is one started program: its launcher process, the pipes it was
// given and the goroutines reading them.
//
// It does not use exec.Cmd's Cancel and WaitDelay: a run ends when every
// one of its processes is gone, not when the first one exits. In
// namespaces the launcher itself waits for that (the PID namespace's init
// dies and the kernel kills the rest) and is told to by closing the
// cancel pipe, not by a signal; without them the process group and the
// uid are killed after the program exits. The output pipes are files made
// here, not os/exec's, so that what a run prints beyond OutputBytes is
// read and counted, and the launcher has its report pipe besides.
type proc struct {
	ep *Episode
	// l is the launcher (nil for a fork server's run); cmd its process.
	l       *launcher
	cmd     *exec.Cmd
	program string
	// forked: a fork server's run, whose end is its report pipe's.
	forked bool
	// cancel is the write end of the cancel pipe (namespaces): closing it
	// ends the run.
	cancel *os.File
	// readEnds are closed to stop the readers when a drain times out.
	readEnds         []*os.File
	outR, errR, repR *os.File
	stdinW           *os.File
	readers          sync.WaitGroup
	waited           chan error
	// reported is closed when the report pipe reached its end.
	reported chan struct{}
	stdout   capped
	stderr   capped
	reports  []byte
	// printed counts what the run printed on stdout and stderr; past
	// limit (0: none), overflow is closed, once.
	printed  atomic.Int64
	limit    int64
	overflow chan struct{}
	overOnce sync.Once
}

// capped is what a reader kept of a stream and how much it dropped.
type capped struct {
	kept    []byte
	dropped int64
}

// start starts c's launcher with its pipes and the readers draining them.
func (e *Episode) start(c Command) (_ *proc, err error) {
	if len(c.Argv) == 0 || !filepath.IsAbs(c.Argv[0]) {
		return nil, fmt.Errorf("run: argv %q: want an absolute program path: %w", c.Argv, ErrLaunch)
	}
	l, err := e.launcherFor(c.Limits, false, c.OwnNetwork)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w: %w", c.Argv[0], ErrLaunch, err)
	}
	return e.startWith(c, l, nil, nil)
}

// startWith starts c through l; stdin, when set, is the program's standard
// input (the fork server's socket) instead of c.Stdin, and proc, when set,
// the launcher's launcherProcFD (a fork server's template).
func (e *Episode) startWith(c Command, l *launcher, stdin, proc *os.File) (_ *proc, err error) {
	p, ends, err := newProc(e, c, e.ns != nil)
	if err != nil {
		return nil, err
	}
	defer func() {
		ends.close()
		if err != nil {
			p.abandon()
		}
	}()
	p.l = l
	files := []*os.File{ends.report} // launcherReportFD
	if e.ns != nil {
		files = append(files, ends.cancel, e.ns.user, e.ns.mnt, e.ns.net) // launcherCancelFD..launcherNetNSFD
		if proc != nil {
			files = append(files, proc) // launcherProcFD
		}
	}
	p.cmd = &exec.Cmd{
		Path:        l.path(),
		Args:        append([]string{launcherArg0}, c.Argv...),
		Env:         c.Env,
		Stdout:      ends.stdout,
		Stderr:      ends.stderr,
		ExtraFiles:  files,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if stdin != nil {
		p.cmd.Stdin = stdin
	} else if ends.stdin != nil {
		p.cmd.Stdin = ends.stdin
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("run %s: %w: %w", c.Argv[0], ErrLaunch, err)
	}
	p.read(c)
	go func() { p.waited <- p.cmd.Wait() }()
	return p, nil
}

// childEnds are a started run's ends of its pipes, which the server closes
// once the run has them.
type childEnds struct {
	stdin, stdout, stderr, report, cancel *os.File
}

func (c *childEnds) close() {
	for _, f := range []*os.File{c.stdin, c.stdout, c.stderr, c.report, c.cancel} {
		if f != nil {
			f.Close()
		}
	}
}

// newProc makes a run's pipes: output, report, a cancel pipe when asked
// for, and standard input when c has some.
func newProc(e *Episode, c Command, cancel bool) (_ *proc, ends *childEnds, err error) {
	p := &proc{ep: e, program: c.Argv[0], waited: make(chan error, 1), reported: make(chan struct{}), overflow: make(chan struct{})}
	ends = &childEnds{}
	defer func() {
		if err != nil {
			ends.close()
			p.abandon()
		}
	}()
	pipe := func(child **os.File) (*os.File, error) {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, fmt.Errorf("run: %w", err)
		}
		p.readEnds = append(p.readEnds, r)
		*child = w
		return r, nil
	}
	if p.outR, err = pipe(&ends.stdout); err != nil {
		return nil, nil, err
	}
	if p.errR, err = pipe(&ends.stderr); err != nil {
		return nil, nil, err
	}
	if p.repR, err = pipe(&ends.report); err != nil {
		return nil, nil, err
	}
	if cancel {
		if ends.cancel, p.cancel, err = os.Pipe(); err != nil {
			return nil, nil, fmt.Errorf("run: %w", err)
		}
	}
	if c.Stdin != nil {
		if ends.stdin, p.stdinW, err = os.Pipe(); err != nil {
			return nil, nil, fmt.Errorf("run: %w", err)
		}
	}
	return p, ends, nil
}

// abandon closes what the server holds of a run that did not start.
func (p *proc) abandon() {
	for _, f := range p.readEnds {
		f.Close()
	}
	if p.cancel != nil {
		p.cancel.Close()
	}
	if p.stdinW != nil {
		p.stdinW.Close()
	}
}

// read starts the readers draining the output and report pipes, and the
// writer of c.Stdin.
func (p *proc) read(c Command) {
	keep := c.OutputBytes
	if keep <= 0 {
		keep = DefaultOutputBytes
	}
	switch {
	case c.OutputLimit == 0:
		p.limit = DefaultOutputLimit
	case c.OutputLimit > 0:
		p.limit = c.OutputLimit
	}
	p.readers.Add(3)
	go func() { defer p.readers.Done(); p.stdout.kept, p.stdout.dropped = readCapped(p.outR, keep, p.count) }()
	go func() { defer p.readers.Done(); p.stderr.kept, p.stderr.dropped = readCapped(p.errR, keep, p.count) }()
	go func() {
		defer p.readers.Done()
		p.reports, _ = readCapped(p.repR, 4096, nil)
		close(p.reported)
	}()
	if p.stdinW != nil {
		p.readers.Add(1)
		go func() {
			defer p.readers.Done()
			p.stdinW.Write(c.Stdin) // EPIPE when the program does not read it
			p.stdinW.Close()
		}()
		p.readEnds = append(p.readEnds, p.stdinW)
	}
}

// count adds n bytes to what the run printed, and closes overflow once
// that passes the limit.
func (p *proc) count(n int) {
	if p.printed.Add(int64(n)) > p.limit && p.limit > 0 {
		p.overOnce.Do(func() { close(p.overflow) })
	}
}

// wait waits for the run to end, or for timeout, ctx or its output
// passing the limit, which stop it (and it is waited for all the same).
// It reports why it was stopped.
func (p *proc) wait(ctx context.Context, timeout time.Duration) (stopCause, error) {
	var timer <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timer = t.C
	}
	var cause stopCause
	select {
	case err := <-p.waited:
		return notStopped, err
	case <-timer:
		cause = stoppedDeadline
	case <-ctx.Done():
		cause = stoppedContext
	case <-p.overflow:
		cause = stoppedOutput
	}
	p.stop()
	return cause, <-p.waited
}

// stop ends the run: in namespaces by closing the cancel pipe (the
// launcher kills the PID namespace's init, and the kernel every process
// in it); without them by killing the session and the uid.
func (p *proc) stop() error {
	if p.cancel != nil {
		p.cancel.Close()
		return nil
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	if p.ep.uid >= 0 {
		return KillAllOfUID(p.ep.sb.cfg.Range, p.ep.uid)
	}
	return nil
}

// reap makes sure nothing of the run is left (stop; a no-op in namespaces,
// where the launcher is gone only once the PID namespace is empty),
// drains the output and says how the program ended.
func (p *proc) reap(stopped stopCause, waitErr error) (Result, error) {
	killErr := p.stop()
	drained := make(chan struct{})
	go func() { p.readers.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(pipeDrain):
		// A process out of the kill's reach holds a pipe: stop reading.
		for _, f := range p.readEnds {
			f.Close()
		}
		<-drained
	}
	for _, f := range p.readEnds {
		f.Close()
	}
	res := Result{Stdout: p.stdout.kept, Stderr: p.stderr.kept, StdoutDropped: p.stdout.dropped, StderrDropped: p.stderr.dropped,
		TimedOut: stopped == stoppedDeadline || stopped == stoppedContext, Cancelled: stopped == stoppedContext, OutputLimited: stopped == stoppedOutput}
	reports, err := parseReports(p.reports)
	if err != nil {
		return res, fmt.Errorf("run %s: %w: %w", p.program, ErrLaunch, err)
	}
	status, exited, started := syscall.WaitStatus(0), false, false
	var im *image
	if p.l != nil {
		im = p.l.im
	}
	for _, r := range reports {
		switch r.tag {
		case 'X':
			status, exited = syscall.WaitStatus(r.value), true
		case 'S':
			started = true
		default:
			if p.forked && !started {
				return res, fmt.Errorf("run %s: %w: %w", p.program, errServerFailed, im.failure(r, p.program))
			}
			return res, fmt.Errorf("run %s: %w: %w", p.program, ErrLaunch, im.failure(r, p.program))
		}
	}
	if p.forked {
		switch {
		case exited:
			res.ExitCode = exitCode(status)
			return res, nil
		case started:
			return res, fmt.Errorf("run %s: %w: %w", p.program, ErrLaunch, errServerDied)
		}
		return res, fmt.Errorf("run %s: %w", p.program, errServerGone)
	}
	if killErr != nil {
		return res, fmt.Errorf("run %s: %w", p.program, killErr)
	}
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) {
		return res, fmt.Errorf("run %s: wait: %w", p.program, waitErr)
	}
	if p.ep.ns != nil {
		// The launcher reports the program's status; it exits 0 itself.
		if !exited {
			return res, fmt.Errorf("run %s: %w: the launcher ended (%v) without the program's status", p.program, ErrLaunch, p.cmd.ProcessState)
		}
		res.ExitCode = exitCode(status)
		return res, nil
	}
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
		res.ExitCode = exitCode(ws)
	}
	return res, nil
}

func exitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return -int(ws.Signal())
	}
	return ws.ExitStatus()
}

// readCapped reads r to its end, keeping the first keep bytes and counting
// the rest; count, when set, is told of every read.
func readCapped(r io.Reader, keep int, count func(int)) ([]byte, int64) {
	var kept []byte
	var dropped int64
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 && count != nil {
			count(n)
		}
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

// programTable is what the program's process does between the fork and the
// exec (tableProgram): in namespaces, a session of its own; with a uid,
// drop every group and become the uid (a fork server's template then
// makes its user namespace: forkServerTable);
// enter dir; set the rlimits, umask 077, no_new_privs and the syscall
// filter; make the report pipe close-on-exec and close everything above
// it (a server started with stray descriptors hands none to agent code).
func programTable(im *image, uid int, dir string, lims []rlimit, server bool) error {
	filterOf := filterProg
	if server {
		filterOf = serverFilterProg
	}
	prog, err := filterOf()
	if err != nil {
		return err
	}
	if im.mode == modeNamespaces {
		// The launcher is the session's leader (os/exec's Setsid); the
		// program leads a session of its own inside its PID namespace.
		im.add(tableProgram, sys(unix.SYS_SETSID, "setsid"))
	}
	if uid >= 0 {
		u := uint64(uid)
		im.add(tableProgram,
			sys(unix.SYS_SETGROUPS, "setgroups []", 0, 0),
			sys(unix.SYS_SETRESGID, fmt.Sprintf("setgid %d", uid), u, u, u),
			sys(unix.SYS_SETRESUID, fmt.Sprintf("setuid %d", uid), u, u, u))
		if server {
			forkServerTable(im, uid)
		}
	}
	im.add(tableProgram, sys(unix.SYS_CHDIR, "chdir "+dir, im.str(dir)))
	for _, l := range lims {
		im.add(tableProgram, sys(unix.SYS_PRLIMIT64, fmt.Sprintf("setrlimit %s %d", l.name, l.value), 0, uint64(l.resource), im.words(l.value, l.value), 0))
	}
	var filter []byte
	for _, f := range prog {
		filter = append(filter, byte(f.Code), byte(f.Code>>8), f.Jt, f.Jf, byte(f.K), byte(f.K>>8), byte(f.K>>16), byte(f.K>>24))
	}
	fprog := im.words(uint64(len(prog)), im.put(filter))
	im.add(tableProgram,
		sys(unix.SYS_UMASK, "umask 077", 0o77),
		sys(unix.SYS_PRCTL, "no_new_privs", unix.PR_SET_NO_NEW_PRIVS, 1),
		sys(unix.SYS_SECCOMP, "install the syscall filter", unix.SECCOMP_SET_MODE_FILTER, 0, fprog),
		sys(unix.SYS_FCNTL, "close-on-exec of the report pipe", launcherReportFD, unix.F_SETFD, unix.FD_CLOEXEC))
	closeAbove := sys(unix.SYS_CLOSE_RANGE, "close the descriptors above 3", launcherReportFD+1, 0xffffffff, 0)
	closeAbove.ignore = true // Linux 5.9; os/exec's descriptors are close-on-exec anyway
	im.add(tableProgram, closeAbove)
	return nil
}
