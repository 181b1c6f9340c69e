package sandbox

import (
	"context"
	_ "embed"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// A ForkServer is an episode's fork server (see "Fork server" in the
// package doc): one Python interpreter started through the launcher like a
// run, the template, which imports what runs need and then only forks
// servers; each server (a Forker) forks one child per run, which makes the
// run's PID and IPC namespaces and forks the run's program from the
// interpreter's pristine state. Its methods are safe for concurrent use;
// runs through one Forker are one at a time, as an Episode's are.
type ForkServer struct {
	ep      *Episode
	cfg     ForkServerConfig
	program string

	mu   sync.Mutex
	tmpl *template
	// failed counts the templates in a row that ended (or failed a run)
	// before any run started through them; at maxTemplateFailures the
	// server is broken.
	failed int
	// broken, once set, is why every run falls back to a fresh spawn.
	broken  error
	forkers map[*Forker]bool
	closed  bool
	// forked counts the runs its servers started.
	forked atomic.Int64
}

// ForkServerConfig is what a fork server runs: one interpreter, one
// environment and one set of limits, those of the runs it serves.
type ForkServerConfig struct {
	// Python is the interpreter (an absolute path); runs whose Argv[0]
	// is another are spawned.
	Python string
	// Env is the runs' environment: the server starts with it, and runs
	// with another are spawned.
	Env []string
	// Limits are the runs' limits; runs with others are spawned.
	Limits Limits
	// Preload are modules the template imports once; a run finds them in
	// sys.modules unless its script's directory holds a name one of them
	// (or a module they imported) starts with, when it imports them itself
	// as a fresh interpreter would.
	Preload []string
}

// ErrNoForkServer is returned (wrapped) by ForkServer.Err when the episode
// cannot have a fork server (it is not in namespaces, or the launcher has
// no code for this architecture): every run is spawned.
var ErrNoForkServer = errors.New("no fork server")

// maxTemplateFailures is how many templates in a row may end before any
// run started through them until runs are spawned for the rest of the
// episode.
const maxTemplateFailures = 2

// serverProcesses bounds the fork server's own processes of the uid
// beside a run's (the template, its servers, a run's child and init):
// the template's RLIMIT_NPROC is the runs' plus this.
const serverProcesses = 16

// runParents are the processes of the uid a run's program always finds
// counted in its user namespace besides its own: the template, its server,
// its child and its init (the kernel counts a uid's processes per user
// namespace, and the server's is theirs). A run's RLIMIT_NPROC is
// Limits.Processes plus these, so the program may start at most as many
// processes as a spawned one: fewer by the server's other processes
// alive beside it (the next run's child, init and program, made while it
// runs, and another server, the episode's grading server, with its first
// run's three).
const runParents = 4

// forkSteps word a fork server run's failure reports (tableFork), by the
// index forkserver.py's _child and _program give them.
var forkSteps = []string{"parent-death signal", "read the request", "make the run's PID and IPC namespaces",
	"drop capabilities", "install the syscall filter", "fork the PID namespace's init", "fork the program",
	"hand over the run's pipes", "chdir", "setrlimit", "set up the program", "bring the run's loopback interface up"}

// errServerGone and errServerFailed say a fork server's run did not
// start: its server was gone (or went before it forked the program), or
// its child failed a step before the fork (a server that cannot work
// here).
var (
	errServerGone   = errors.New("the fork server is gone")
	errServerFailed = errors.New("the fork server failed")
)

// errServerDied is returned (wrapped, with ErrLaunch) for a run whose
// server died while it ran.
var errServerDied = errors.New("the fork server died during the run")

//go:embed forkserver.py
var forkServerSource string

// forkServerBootstrap is the template's command (-c): it takes the
// working directory (the workspace, the empty string -c puts first) off
// sys.path before any import (_socket is a file of lib-dynload in many
// builds), notes the modules the interpreter started with, says it is up
// (its interpreter started: what a spawned run's start takes,
// startStats), receives the program on its socket (its standard input),
// as source or, after a NUL byte, compiled (Sandbox.compiled), and runs
// it.
const forkServerBootstrap = "import sys; del sys.path[0]; _pristine = frozenset(sys.modules); import _socket; " +
	"_s = _socket.socket(fileno=0); _s.send(b'up'); _p = _s.recv(1 << 18); _s.detach(); del _s; " +
	"exec(_p if _p[:1] != b'\\x00' else sys.modules['marshal'].loads(_p[1:]))"

// forkServerProgram is forkserver.py with this architecture's numbers.
var forkServerProgram = sync.OnceValue(func() string {
	n := func(v int) string { return strconv.Itoa(v) }
	return strings.NewReplacer(
		"@@SYS_PRCTL@@", n(unix.SYS_PRCTL),
		"@@SYS_UNSHARE@@", n(unix.SYS_UNSHARE),
		"@@SYS_CAPSET@@", n(unix.SYS_CAPSET),
		"@@SYS_SECCOMP@@", n(unix.SYS_SECCOMP),
		"@@SYS_PRLIMIT64@@", n(unix.SYS_PRLIMIT64),
		"@@CAP_VERSION@@", n(unix.LINUX_CAPABILITY_VERSION_3),
		"@@PR_SET_DUMPABLE@@", n(unix.PR_SET_DUMPABLE),
		"@@PR_SET_PDEATHSIG@@", n(unix.PR_SET_PDEATHSIG),
		"@@CLONE_NEWUSER@@", n(unix.CLONE_NEWUSER),
		"@@CLONE_NEWPID@@", n(unix.CLONE_NEWPID),
		"@@CLONE_NEWIPC@@", n(unix.CLONE_NEWIPC),
		"@@CLONE_NEWNET@@", n(unix.CLONE_NEWNET),
		"@@SIOCSIFFLAGS@@", n(unix.SIOCSIFFLAGS),
		"@@IFF_UP@@", n(unix.IFF_UP),
		"@@SECCOMP_SET_MODE_FILTER@@", n(unix.SECCOMP_SET_MODE_FILTER),
		"@@SIGKILL@@", n(int(unix.SIGKILL)),
		"@@SIGSTOP@@", n(int(unix.SIGSTOP)),
		"@@SIGCHLD@@", n(int(unix.SIGCHLD)),
		"@@SIGINT@@", n(int(unix.SIGINT)),
		"@@TABLE_FORK@@", n(tableFork),
	).Replace(forkServerSource)
})

// template is one started template: its launcher's run, the server's end
// of its socket, and its end.
type template struct {
	p   *proc
	ctl *os.File
	// done is closed once the launcher is gone (with every process of
	// the template's PID namespace); res and err are how it ended.
	done chan struct{}
	res  Result
	err  error
	// started is set once a run started through one of its servers.
	started bool
	// begun is when its launcher started; up is closed once its
	// interpreter runs the bootstrap (at upAt), ready once the template
	// said it is (it reads its socket).
	begun time.Time
	upAt  time.Time
	up    chan struct{}
	ready chan struct{}
}

// isReady says whether the template has started (imported what it
// imports and reads its socket).
func (t *template) isReady() bool {
	select {
	case <-t.ready:
		return true
	default:
		return false
	}
}

// alive says whether the template still serves: its end is not done,
// and its socket has not hung up. The socket hangs up as the template
// process exits (it alone holds the other end), before the rest of its
// namespace (its servers, the next runs' programs) has died and the
// launcher's end closes done: a run sent in between could be taken by a
// program about to die with its parent, and reported as interrupted.
func (t *template) alive() bool {
	select {
	case <-t.done:
		return false
	default:
	}
	// A socket that cannot be polled is closed: its end has begun.
	hup := true
	if rc, err := t.ctl.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) {
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
			n, err := unix.Poll(pfd, 0)
			hup = err == nil && n > 0 && pfd[0].Revents&(unix.POLLHUP|unix.POLLRDHUP) != 0
		})
	}
	return !hup
}

// end ends the template, if it has not ended, and waits until every
// process of its namespace is gone.
func (t *template) end() {
	t.ctl.Close()
	t.p.stop()
	<-t.done
}

// startStats are how long a sandbox's fork server templates took to
// start: from their launcher's start until the interpreter runs the
// bootstrap (up: all a spawned run's start takes) and until the template
// is ready to fork (ready: its imports and warming besides), each an
// average weighted to the recent ones. Runs that come while a template
// starts use them to tell whether waiting for it wins (awaitTemplate).
type startStats struct {
	mu        sync.Mutex
	n         int
	up, ready time.Duration
}

// add adds a template's figures.
func (s *startStats) add(up, ready time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == 0 {
		s.up, s.ready = up, ready
	} else {
		s.up += (up - s.up) / 4
		s.ready += (ready - s.ready) / 4
	}
	s.n++
}

// get returns the averages; ok is false before any template was ready.
func (s *startStats) get() (up, ready time.Duration, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.up, s.ready, s.n > 0
}

// ForkServer returns a fork server for the episode's runs of cfg and
// starts its template (in the background: nothing waits for it). It is
// closed with the episode. In an episode that cannot have one (see
// ErrNoForkServer), and whenever the server cannot serve, its Forkers
// spawn every run instead.
func (e *Episode) ForkServer(cfg ForkServerConfig) *ForkServer {
	return newForkServer(e, cfg, "")
}

// newForkServer is ForkServer with the template's program (empty: the
// fork server's; tests give others).
func newForkServer(e *Episode, cfg ForkServerConfig, program string) *ForkServer {
	cfg.Limits = cfg.Limits.WithDefaults()
	cfg.Env = slices.Clone(cfg.Env)
	if program == "" {
		program = forkServerProgram()
	}
	f := &ForkServer{ep: e, cfg: cfg, program: program, forkers: map[*Forker]bool{}}
	e.mu.Lock()
	closed := e.closed
	if !closed {
		e.forkServers = append(e.forkServers, f)
	}
	e.mu.Unlock()
	switch {
	case closed:
		f.broken = fmt.Errorf("%w: episode closed", ErrNoForkServer)
	case e.ns == nil || len(launcherCode) == 0:
		f.broken = fmt.Errorf("%w: the episode is not in namespaces of its own", ErrNoForkServer)
	case !strings.HasPrefix(cfg.Python, "/"):
		f.broken = fmt.Errorf("%w: python %q is not an absolute path", ErrNoForkServer, cfg.Python)
	default:
		f.mu.Lock()
		f.template()
		f.mu.Unlock()
	}
	return f
}

// Forked is how many runs the server has started (the rest were spawned).
func (f *ForkServer) Forked() int64 { return f.forked.Load() }

// WaitReady waits until the running template is ready to serve, or ctx
// ends; false when it is not (it ended, or the server is broken). Runs
// never wait for it: one that comes before is spawned.
func (f *ForkServer) WaitReady(ctx context.Context) bool {
	f.mu.Lock()
	t := f.template()
	f.mu.Unlock()
	if t == nil {
		return false
	}
	select {
	case <-t.ready:
		return true
	case <-t.done:
	case <-ctx.Done():
	}
	return false
}

// Err is why runs are spawned instead of forked (nil while the server
// serves, or may serve once its template is up).
func (f *ForkServer) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.broken
}

// template returns the running template, starting one when there is none
// or it ended; nil (with f.broken set) when the server is broken. Call it
// with f.mu held.
func (f *ForkServer) template() *template {
	if f.broken != nil || f.closed {
		return nil
	}
	if f.tmpl != nil && f.tmpl.alive() {
		return f.tmpl
	}
	if f.tmpl != nil {
		// Gone, its namespace perhaps still dying: that ends first.
		f.tmpl.end()
	}
	if f.tmpl != nil && !f.tmpl.started {
		f.failed++
	}
	if f.failed >= maxTemplateFailures {
		f.broken = fmt.Errorf("the fork server ended %d times before serving a run (last: %v)", f.failed, f.tmpl.describe())
		return nil
	}
	t, err := f.startTemplate()
	if err != nil {
		f.broken = err
		return nil
	}
	f.tmpl = t
	return t
}

// describe says how a template ended, for an error.
func (t *template) describe() string {
	msg := fmt.Sprintf("exit %d", t.res.ExitCode)
	if t.err != nil {
		msg = t.err.Error()
	}
	if s := strings.TrimSpace(string(t.res.Stderr)); s != "" {
		if len(s) > 400 {
			s = "..." + s[len(s)-400:]
		}
		msg += ": " + s
	}
	return msg
}

// serverLimits are the template's rlimits: the runs', without the CPU
// bound (it lives as long as the episode), and serverProcesses more
// processes.
func serverLimits(l Limits) Limits {
	l.CPUSeconds = -1
	if l.Processes > 0 {
		l.Processes += serverProcesses
	}
	return l
}

// startTemplate starts a template through the launcher: the interpreter
// with the server's filter, limits and socket (its standard input).
func (f *ForkServer) startTemplate() (*template, error) {
	program, err := templateProgram(f.cfg, f.program)
	if err != nil {
		return nil, err
	}
	lims := serverLimits(f.cfg.Limits)
	l, err := f.ep.launcherFor(lims, true, false)
	if err != nil {
		return nil, fmt.Errorf("fork server: %w", err)
	}
	procFD, err := unix.Open("/proc", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("fork server: %w", err)
	}
	procDir := os.NewFile(uintptr(procFD), "/proc")
	defer procDir.Close()
	ours, theirs, err := socketPair()
	if err != nil {
		return nil, fmt.Errorf("fork server: %w", err)
	}
	defer theirs.Close()
	c := Command{
		Argv:        []string{f.cfg.Python, "-E", "-s", "-c", forkServerBootstrap},
		Env:         f.cfg.Env,
		Limits:      lims,
		OutputBytes: 64 << 10,
		// It lives as long as the episode; no run prints on its pipes.
		OutputLimit: -1,
	}
	// The program is the first message, compiled when it can be (ahead,
	// by CompileAhead, or here by the sandbox's first template).
	msg := []byte(program)
	if code := f.ep.sb.compiled(f.cfg.Python, program); code != nil {
		msg = append([]byte{0}, code...)
	}
	begun := time.Now()
	p, err := f.ep.startWith(c, l, theirs, procDir)
	if err != nil {
		ours.Close()
		return nil, fmt.Errorf("fork server: %w", err)
	}
	if err := send(ours, msg); err != nil {
		p.stop()
		ours.Close()
		return nil, fmt.Errorf("fork server: %w", err)
	}
	t := &template{p: p, ctl: ours, done: make(chan struct{}), begun: begun, up: make(chan struct{}), ready: make(chan struct{})}
	go func() {
		// Its words are "up" and "ready"; nothing else comes but its end.
		var b [8]byte
		if n, _ := ours.Read(b[:]); string(b[:n]) != "up" {
			return
		}
		t.upAt = time.Now()
		close(t.up)
		if n, _ := ours.Read(b[:]); string(b[:n]) == "ready" {
			f.ep.sb.starts.add(t.upAt.Sub(begun), time.Since(begun))
			close(t.ready)
		}
	}()
	go func() {
		stopped, waitErr := p.wait(context.Background(), 0)
		t.res, t.err = p.reap(stopped, waitErr)
		ours.Close()
		close(t.done)
	}()
	return t, nil
}

// templateProgram is what a template of cfg running program is sent: the
// program with what it is given (Python literals: the server's filter's
// bytes and the modules to preload).
func templateProgram(cfg ForkServerConfig, program string) (string, error) {
	prog, err := filterProg()
	if err != nil {
		return "", err
	}
	var filter []byte
	for _, in := range prog {
		filter = append(filter, byte(in.Code), byte(in.Code>>8), in.Jt, in.Jf, byte(in.K), byte(in.K>>8), byte(in.K>>16), byte(in.K>>24))
	}
	preload := make([]string, len(cfg.Preload))
	for i, m := range cfg.Preload {
		preload[i] = strconv.Quote(m)
	}
	return fmt.Sprintf("_filter = bytes.fromhex(%q)\n_preload = [%s]\n%s", hex.EncodeToString(filter), strings.Join(preload, ", "), program), nil
}

// CompileAhead compiles, once, the program the fork servers of cfg (its
// Python and Preload; the rest does not change the program) send their
// templates, which the sandbox's first template would otherwise compile
// on its episode's path: an interpreter's start and a compile, 13 ms
// (median, at a load of 6 on 2 cores) of a pooled workspace's first
// reset. A server calls it at start, off every reset's path; a template
// that comes first waits for the compile under way rather than running
// another. It does nothing where no fork server would start (not
// Namespaces, no launcher for this architecture, python not an absolute
// path), and compiles as compiled does: as the overflow user, in /, with
// no environment, outside any episode. It reports whether the program is
// compiled (false: templates are sent its source, as when their own
// compile fails).
func (s *Sandbox) CompileAhead(cfg ForkServerConfig) bool {
	if s.cfg.Mode != Namespaces || len(launcherCode) == 0 || !strings.HasPrefix(cfg.Python, "/") {
		return false
	}
	program, err := templateProgram(cfg, forkServerProgram())
	if err != nil {
		// The first template fails the same way, and says so.
		return false
	}
	return s.compiled(cfg.Python, program) != nil
}

// forkServerTable is a fork server template's part of its program's table
// (programTable), once it is the episode's uid: it makes a user namespace
// of its own (unprivileged: the kernel lets any process make one), maps
// the uid (and gid) to itself and nothing else, through the server's
// /proc (launcherProcFD: the episode's is read-only), and keeps of the
// capabilities it has there only CAP_SYS_ADMIN and CAP_NET_ADMIN, made
// ambient so that the interpreter keeps them across the exec: what its
// runs' children need to make their PID and IPC namespaces (and a graded
// case's network namespace, and bring its loopback interface up), which
// the user namespace owns (it owns nothing else: the mount and network
// namespaces stay the episode's). Its /proc entry is its own only while
// it writes the maps.
func forkServerTable(im *image, uid int) {
	// The lowest free descriptor: the program has 0..launcherProcFD.
	const mapFD = launcherProcFD + 1
	writeProc := func(name, text string) {
		im.add(tableProgram,
			sys(unix.SYS_OPENAT, "open /proc/self/"+name, launcherProcFD, im.str("self/"+name), unix.O_WRONLY|unix.O_CLOEXEC),
			sys(unix.SYS_WRITE, "write /proc/self/"+name, mapFD, im.put([]byte(text)), uint64(len(text))),
			sys(unix.SYS_CLOSE, "close /proc/self/"+name, mapFD))
	}
	im.add(tableProgram,
		sys(unix.SYS_PRCTL, "dumpable", unix.PR_SET_DUMPABLE, 1),
		sys(unix.SYS_UNSHARE, "make the fork server's user namespace", unix.CLONE_NEWUSER))
	writeProc("setgroups", "deny")
	writeProc("uid_map", fmt.Sprintf("%d %d 1", uid, uid))
	writeProc("gid_map", fmt.Sprintf("%d %d 1", uid, uid))
	caps := make([]byte, 24) // effective, permitted, inheritable; twice (64 bits)
	for i := range 3 {
		binary.LittleEndian.PutUint32(caps[4*i:], serverCaps)
	}
	im.add(tableProgram,
		sys(unix.SYS_PRCTL, "not dumpable", unix.PR_SET_DUMPABLE, 0),
		sys(unix.SYS_CAPSET, "keep only CAP_SYS_ADMIN and CAP_NET_ADMIN", im.words(unix.LINUX_CAPABILITY_VERSION_3), im.put(caps)),
		sys(unix.SYS_PRCTL, "make CAP_SYS_ADMIN ambient", unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_RAISE, unix.CAP_SYS_ADMIN),
		sys(unix.SYS_PRCTL, "make CAP_NET_ADMIN ambient", unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_RAISE, unix.CAP_NET_ADMIN))
}

// serverCaps are the capabilities the fork server keeps in its user
// namespace (see forkServerTable).
const serverCaps = 1<<unix.CAP_SYS_ADMIN | 1<<unix.CAP_NET_ADMIN

// socketPair is a pair of connected unix sequenced-packet sockets.
func socketPair() (*os.File, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "fork-server"), os.NewFile(uintptr(fds[1]), "fork-server"), nil
}

// send sends msg and fds on sock.
func send(sock *os.File, msg []byte, fds ...int) error {
	raw, err := sock.SyscallConn()
	if err != nil {
		return err
	}
	var sendErr error
	err = raw.Write(func(fd uintptr) bool {
		sendErr = unix.Sendmsg(int(fd), msg, unix.UnixRights(fds...), nil, 0)
		return !errors.Is(sendErr, unix.EAGAIN)
	})
	return errors.Join(err, sendErr)
}

// Close ends the fork server: its template and every server and run of
// it, and waits until none of their processes is left. It is idempotent.
func (f *ForkServer) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	t := f.tmpl
	for k := range f.forkers {
		k.closeSocket()
	}
	f.mu.Unlock()
	if t != nil {
		t.end()
	}
	return nil
}

// A Forker is one server of a fork server: a copy of the template, made
// when asked for, that forks one child per run. Every Forker starts from
// the template's state, whatever the runs of another did.
type Forker struct {
	fs *ForkServer
	// net: each run of it has a network namespace of its own
	// (NetworkForker); it runs only commands with OwnNetwork set.
	net bool
	// tmpl and sock are its template and the server's end of its socket;
	// nil until asked for, and again once the server is gone.
	tmpl *template
	sock *os.File
}

// Forker returns a new server of f. It is asked of the template at once,
// so a run through it seldom waits for it.
func (f *ForkServer) Forker() *Forker { return f.forker(false) }

// NetworkForker is Forker for commands with OwnNetwork: each run's child
// makes a network namespace for the run too (graded cases' server), made
// ahead of the run as the rest of its namespaces are.
func (f *ForkServer) NetworkForker() *Forker { return f.forker(true) }

func (f *ForkServer) forker(net bool) *Forker {
	k := &Forker{fs: f, net: net}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return k
	}
	f.forkers[k] = true
	k.connect()
	return k
}

// connect asks the template for a server; with f.mu held. On failure the
// Forker stays unconnected (its runs are spawned, or it asks again).
func (k *Forker) connect() {
	for range maxTemplateFailures {
		t := k.fs.template()
		if t == nil {
			return
		}
		ours, theirs, err := socketPair()
		if err != nil {
			return
		}
		msg := "serve"
		if k.net {
			msg = "serve-net"
		}
		err = send(t.ctl, []byte(msg), int(theirs.Fd()))
		theirs.Close()
		if err == nil {
			k.tmpl, k.sock = t, ours
			return
		}
		ours.Close()
		// The template is gone: wait for its end, and start another.
		t.end()
	}
}

func (k *Forker) closeSocket() {
	if k.sock != nil {
		k.sock.Close()
		k.sock, k.tmpl = nil, nil
	}
}

// Close ends the server (a run through it is killed). It is idempotent.
func (k *Forker) Close() error {
	k.fs.mu.Lock()
	defer k.fs.mu.Unlock()
	k.closeSocket()
	delete(k.fs.forkers, k)
	return nil
}

// forkable says whether the server runs c: the server's interpreter, with
// the server's -E and -s and at most -B, on a script; the server's
// environment and limits. It returns the flags and the script.
func (f *ForkServer) forkable(c Command) (flags []string, script string, ok bool) {
	if len(c.Argv) < 4 || c.Argv[0] != f.cfg.Python || !slices.Equal(c.Env, f.cfg.Env) || c.Limits.WithDefaults() != f.cfg.Limits {
		return nil, "", false
	}
	flags, script = c.Argv[1:len(c.Argv)-1], c.Argv[len(c.Argv)-1]
	if script == "" || strings.HasPrefix(script, "-") || strings.ContainsRune(script, 0) {
		return nil, "", false
	}
	seen := map[string]bool{}
	for _, fl := range flags {
		if (fl != "-E" && fl != "-s" && fl != "-B") || seen[fl] {
			return nil, "", false
		}
		seen[fl] = true
	}
	return flags, script, seen["-E"] && seen["-s"]
}

// Run runs c as a child of the server when it can (see forkable), and
// spawns it (Episode.Run) otherwise: when c is not one the server runs
// (or its OwnNetwork is not the Forker's), its template is not ready yet,
// the server is broken, or it is gone twice before the run starts. A run
// it forks is contained, limited, captured, timed and reported as a
// spawned one.
func (k *Forker) Run(ctx context.Context, c Command) (Result, error) {
	flags, script, ok := k.fs.forkable(c)
	if !ok || c.OwnNetwork != k.net {
		return k.fs.ep.Run(ctx, c)
	}
	for range maxTemplateFailures {
		sock, t := k.server()
		if sock == nil || !t.isReady() && !k.fs.awaitTemplate(ctx, t) {
			// A template still starting (right after the reset) would
			// keep the run waiting longer than a spawn takes.
			break
		}
		res, err := k.fs.ep.runForked(ctx, c, sock, flags, script)
		switch {
		case errors.Is(err, errServerFailed):
			k.fs.mu.Lock()
			k.fs.broken = err
			k.fs.mu.Unlock()
			return k.fs.ep.Run(ctx, c)
		case errors.Is(err, errServerDied):
			// The run's processes are dying with its server; ending the
			// template's PID namespace waits until every one is gone.
			k.fs.mu.Lock()
			k.closeSocket()
			k.fs.mu.Unlock()
			t.end()
			return res, err
		case errors.Is(err, errServerGone):
			k.fs.mu.Lock()
			if k.sock == sock {
				k.closeSocket()
			}
			k.fs.mu.Unlock()
			continue
		}
		k.fs.mu.Lock()
		t.started = true
		k.fs.failed = 0
		k.fs.mu.Unlock()
		k.fs.forked.Add(1)
		return res, err
	}
	return k.fs.ep.Run(ctx, c)
}

// awaitTemplate waits for t, still starting, when it should be ready
// sooner than a spawn would have started the run's interpreter, and says
// whether it is ready. By the sandbox's recent templates (startStats):
// a spawn's start is a template's up; t is ready that long after its
// launcher started (less what of it is gone), and a forked run then costs
// about a quarter of a spawn (BenchmarkForkRunPass), so waiting wins when
// t is ready in less than three quarters of a spawn's start. It waits
// no longer than a spawn's start.
func (f *ForkServer) awaitTemplate(ctx context.Context, t *template) bool {
	up, ready, ok := f.ep.sb.starts.get()
	if !ok {
		return false
	}
	left := ready - time.Since(t.begun)
	select {
	case <-t.up:
		left = ready - up - time.Since(t.upAt)
	default:
	}
	if left >= up*3/4 {
		return false
	}
	timer := time.NewTimer(up)
	defer timer.Stop()
	select {
	case <-t.ready:
		return true
	case <-t.done:
	case <-timer.C:
	case <-ctx.Done():
	}
	return false
}

// server returns the server's socket and template, asking the template for
// a server when it has none; nil when it cannot.
func (k *Forker) server() (*os.File, *template) {
	k.fs.mu.Lock()
	defer k.fs.mu.Unlock()
	if k.fs.closed {
		return nil, nil
	}
	if k.sock != nil && !k.tmpl.alive() {
		k.closeSocket()
	}
	if k.sock == nil {
		k.connect()
	}
	return k.sock, k.tmpl
}

// runForked runs c as a child of the server on sock: start (the request
// and the run's pipes on the socket), wait and reap, as Run.
func (e *Episode) runForked(ctx context.Context, c Command, sock *os.File, flags []string, script string) (Result, error) {
	p, ends, err := newProc(e, c, true)
	if err != nil {
		return Result{}, err
	}
	p.forked = true
	defer ends.close()
	if ends.stdin == nil {
		if ends.stdin, err = os.Open(os.DevNull); err != nil {
			p.abandon()
			return Result{}, fmt.Errorf("run: %w", err)
		}
	}
	var limits []string
	for _, l := range c.Limits.WithDefaults().rlimits(true) {
		if l.resource == unix.RLIMIT_NPROC {
			l.value += runParents
		}
		limits = append(limits, fmt.Sprintf("%d=%d", l.resource, l.value))
	}
	msg := []byte(strings.Join(append([]string{"run", c.Argv[0], strings.Join(flags, " "), script, e.codeDir, strings.Join(limits, ",")}, c.Env...), "\x00"))
	err = send(sock, msg, int(ends.stdin.Fd()), int(ends.stdout.Fd()), int(ends.stderr.Fd()), int(ends.report.Fd()), int(ends.cancel.Fd()))
	if err != nil {
		p.abandon()
		if errors.Is(err, unix.EPIPE) || errors.Is(err, unix.ECONNRESET) || errors.Is(err, unix.ENOTCONN) {
			return Result{}, fmt.Errorf("run %s: %w: %w", c.Argv[0], errServerGone, err)
		}
		return Result{}, fmt.Errorf("run %s: %w: send to the fork server: %w", c.Argv[0], ErrLaunch, err)
	}
	ends.close()
	p.read(c)
	go func() { <-p.reported; p.waited <- nil }()
	stopped, waitErr := p.wait(ctx, c.Timeout)
	return p.reap(stopped, waitErr)
}

// Processes returns the fork server's own live processes (the template,
// its servers and the runs' children; not the runs' inits and programs,
// which are in PID namespaces of their own), for tests. Needs root.
func (f *ForkServer) Processes() ([]int, error) {
	pids, err := Processes(f.ep.uid)
	if err != nil {
		return nil, err
	}
	return f.filter(pids, true)
}

// RunProcesses returns the live processes of the episode's uid that are
// not the fork server's own: those of runs. Needs root.
func (f *ForkServer) RunProcesses() ([]int, error) {
	pids, err := Processes(f.ep.uid)
	if err != nil {
		return nil, err
	}
	return f.filter(pids, false)
}

// filter keeps the pids that are the server's own (own) or the others; a
// process gone meanwhile is dropped.
func (f *ForkServer) filter(pids []int, own bool) ([]int, error) {
	var out []int
	for _, pid := range pids {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil && f.Owns(pid) == own {
			out = append(out, pid)
		}
	}
	return out, nil
}

// Owns reports whether pid is one of the fork server's own processes: in
// its template's PID namespace (below its launcher), the init (pid 1) of
// a PID namespace one of those made (a run's, or the next run's, made
// before its request), or the next run's program before its request
// (pid 2 there, not dumpable yet). It reads only /proc/<pid>/status, which root may
// read of any process (a workspace container's root has no
// CAP_SYS_PTRACE, which the namespace links ask of a process not
// dumpable).
func (f *ForkServer) Owns(pid int) bool {
	f.mu.Lock()
	t := f.tmpl
	f.mu.Unlock()
	if t == nil || !t.alive() {
		return false
	}
	launcher := t.p.cmd.Process.Pid
	depth := len(procStatus(launcher).nsPIDs) + 1 // the template's namespace
	st := procStatus(pid)
	switch {
	case len(st.nsPIDs) == depth:
		return descends(pid, launcher)
	case len(st.nsPIDs) == depth+1 && (st.nsPIDs[depth] == "1" || st.nsPIDs[depth] == "2" && !dumpable(pid)):
		// A run's init, or the next run's program, made before its request
		// (not dumpable until it takes one): a child of a run's child.
		return len(procStatus(st.ppid).nsPIDs) == depth && descends(st.ppid, launcher)
	}
	return false
}

// dumpable reports whether pid's /proc files are its own (they are
// root's, or the overflow uid's, when it is not dumpable).
func dumpable(pid int) bool {
	var dir, environ unix.Stat_t
	return unix.Stat(fmt.Sprintf("/proc/%d", pid), &dir) == nil &&
		unix.Stat(fmt.Sprintf("/proc/%d/environ", pid), &environ) == nil && dir.Uid == environ.Uid
}

// status is what Owns reads of a /proc/<pid>/status.
type status struct {
	nsPIDs []string // NSpid: the pid in each namespace, outermost first
	ppid   int
}

func procStatus(pid int) status {
	var st status
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return st
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) > 1 {
			switch f[0] {
			case "NSpid:":
				st.nsPIDs = f[1:]
			case "PPid:":
				st.ppid, _ = strconv.Atoi(f[1])
			}
		}
	}
	return st
}

// descends reports whether ancestor is pid's parent, or its parent's, and
// so on (a few generations: the server's processes are at most four
// below their launcher).
func descends(pid, ancestor int) bool {
	for range 6 {
		pid = procStatus(pid).ppid
		if pid == ancestor {
			return true
		}
		if pid <= 1 {
			return false
		}
	}
	return false
}
