package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Mode is how a Sandbox contains episode code.
type Mode int

const (
	// Namespaces (the zero Mode) runs each episode's code as its own uid
	// in namespaces of its own (see the package doc). It needs root and a
	// kernel (and, in a container, a seccomp profile) that allows user
	// namespaces.
	Namespaces Mode = iota
	// UIDOnly runs each episode's code as its own uid, with the filter and
	// the rlimits, in the server's namespaces: weaker (see the package
	// doc), for hosts without user namespaces, and only when asked for.
	UIDOnly
	// Unsandboxed runs code as the server's own user, as the seed does
	// without root: a session, the filter and the rlimits but the process
	// count, and nothing else.
	Unsandboxed
)

// String is the mode's name in metadata and reports: "namespaces",
// "uid-only" or "unsandboxed".
func (m Mode) String() string {
	switch m {
	case Namespaces:
		return "namespaces"
	case UIDOnly:
		return "uid-only"
	case Unsandboxed:
		return "unsandboxed"
	}
	return "mode " + strconv.Itoa(int(m))
}

// ParseMode reads Mode.String's names back.
func ParseMode(s string) (Mode, error) {
	for _, m := range []Mode{Namespaces, UIDOnly, Unsandboxed} {
		if s == m.String() {
			return m, nil
		}
	}
	return 0, fmt.Errorf("sandbox mode %q: want namespaces, uid-only or unsandboxed", s)
}

// Defaults of a Config.
const (
	// DefaultLockDir is the uid lock directory.
	DefaultLockDir = "/run/agent-workbench/uids"
	// DefaultWorkspaceDir is where each episode's code sees its workspace.
	DefaultWorkspaceDir = "/run/agent-workbench/ws"
	// DefaultHomeDir is where the uid-only mode makes episode homes.
	DefaultHomeDir = "/run/agent-workbench/homes"
	// DefaultEpisodeBytes bounds an episode's tmpfs: its workspace, /tmp
	// and /dev/shm together. Tasks bring files of kilobytes; a run's file
	// is at most DefaultLimits.FileSize.
	DefaultEpisodeBytes = 64 << 20
	// DefaultEpisodeInodes bounds the files and directories of an
	// episode's tmpfs.
	DefaultEpisodeInodes = 32768
)

// Config configures a Sandbox. The zero value is the namespaces sandbox
// with DefaultRange, DefaultLockDir, DefaultWorkspaceDir and the default
// tmpfs size.
type Config struct {
	// Mode is how episodes are contained; zero is Namespaces.
	Mode Mode
	// Range is the uids episodes get; zero means DefaultRange.
	Range Range
	// LockDir is the uid lock directory (only root's, 0700); empty means
	// DefaultLockDir.
	LockDir string
	// WorkspaceDir (Namespaces) is where each episode's code sees its own
	// workspace: an empty directory New makes, on which every episode
	// mounts its tmpfs in its own mount namespace. Empty means
	// DefaultWorkspaceDir.
	WorkspaceDir string
	// HomeDir (UIDOnly, Unsandboxed) is where episode homes are made;
	// empty means DefaultHomeDir with UIDOnly, os.TempDir() unsandboxed.
	HomeDir string
	// EpisodeBytes and EpisodeInodes (Namespaces) bound an episode's
	// tmpfs; zero means DefaultEpisodeBytes and DefaultEpisodeInodes.
	EpisodeBytes  int64
	EpisodeInodes int
}

// Sandbox runs episodes. Its methods are safe for concurrent use.
type Sandbox struct {
	cfg  Config
	pool *Pool // nil unsandboxed
	// starts are its fork server templates' start times.
	starts startStats
	// compiledCode are the fork server's programs compiled (compiled),
	// by interpreter and source.
	compileMu    sync.Mutex
	compiledCode map[string]*compiledCode
	// testCompileArgv, when set (tests), is the compile's command instead
	// of python's.
	testCompileArgv func(python string) []string
}

// ErrNoUserNamespaces is returned (wrapped) by New when the namespaces
// sandbox cannot make an episode's namespaces here.
var ErrNoUserNamespaces = errors.New("user namespaces are not available")

// New checks cfg, makes the directories it names, and, for Namespaces,
// sets up and tears down one episode's namespaces to prove they work here
// (an error wrapping ErrNoUserNamespaces says what to do when not).
func New(cfg Config) (*Sandbox, error) {
	if cfg.Range == (Range{}) {
		cfg.Range = DefaultRange
	}
	if cfg.LockDir == "" {
		cfg.LockDir = DefaultLockDir
	}
	if cfg.WorkspaceDir == "" {
		cfg.WorkspaceDir = DefaultWorkspaceDir
	}
	if cfg.HomeDir == "" {
		cfg.HomeDir = DefaultHomeDir
		if cfg.Mode == Unsandboxed {
			cfg.HomeDir = os.TempDir()
		}
	}
	if cfg.EpisodeBytes == 0 {
		cfg.EpisodeBytes = DefaultEpisodeBytes
	}
	if cfg.EpisodeInodes == 0 {
		cfg.EpisodeInodes = DefaultEpisodeInodes
	}
	for _, d := range []string{cfg.LockDir, cfg.WorkspaceDir, cfg.HomeDir} {
		if !filepath.IsAbs(d) || filepath.Clean(d) != d {
			return nil, fmt.Errorf("sandbox: %q: want an absolute, clean path", d)
		}
	}
	if cfg.EpisodeBytes < 1<<20 || cfg.EpisodeInodes < 64 {
		return nil, fmt.Errorf("sandbox: an episode's tmpfs of %d bytes and %d inodes is too small", cfg.EpisodeBytes, cfg.EpisodeInodes)
	}
	s := &Sandbox{cfg: cfg}
	if cfg.Mode == Unsandboxed {
		return s, nil
	}
	if cfg.Mode != Namespaces && cfg.Mode != UIDOnly {
		return nil, fmt.Errorf("sandbox: unknown %v", cfg.Mode)
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("sandbox: the %v sandbox needs root (run unsandboxed otherwise)", cfg.Mode)
	}
	if err := cfg.Range.Validate(); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	s.pool = NewPool(cfg.LockDir, cfg.Range)
	if cfg.Mode == UIDOnly {
		if err := os.MkdirAll(cfg.HomeDir, 0o711); err != nil {
			return nil, fmt.Errorf("sandbox: home dir: %w", err)
		}
		if err := checkSearchable(cfg.HomeDir); err != nil {
			return nil, fmt.Errorf("sandbox: %w", err)
		}
		return s, nil
	}
	if err := ensureDir(cfg.WorkspaceDir, 0o755); err != nil {
		return nil, fmt.Errorf("sandbox: workspace dir: %w", err)
	}
	if err := checkSearchable(cfg.WorkspaceDir); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	ep, err := s.NewEpisode()
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	if err := ep.Close(); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	return s, nil
}

// Mode is the sandbox's mode.
func (s *Sandbox) Mode() Mode { return s.cfg.Mode }

// Range is the uids the sandbox gives episodes.
func (s *Sandbox) Range() Range { return s.cfg.Range }

// Pool is the uid pool (nil unsandboxed).
func (s *Sandbox) Pool() *Pool { return s.pool }

// Config is the sandbox's configuration, defaults filled in.
func (s *Sandbox) Config() Config { return s.cfg }

// Episode is one episode's uid, workspace and (Namespaces) namespaces. Its
// methods are not safe for concurrent use.
type Episode struct {
	sb  *Sandbox
	uid int // -1 unsandboxed
	// dir is the workspace as the server reaches it; codeDir as the
	// episode's code sees it.
	dir, codeDir string
	// home (UIDOnly, Unsandboxed) holds the workspace, in the server's
	// tree; ns (Namespaces) are the episode's namespaces and tmpfs.
	home string
	ns   *namespaces

	// BeforeRelease, when set, runs in Close once nothing of the episode
	// is left, just before its uid is released (tests check containment
	// there: the uid may go to another episode right after).
	BeforeRelease func()

	mu          sync.Mutex
	launchers   map[string]*launcher // by the limits they set
	forkServers []*ForkServer
	closed      bool
}

// NewEpisode claims a uid (none unsandboxed) and makes the episode's
// workspace: in Namespaces, its namespaces and tmpfs (the set-up a reset
// pays for); otherwise a home (root's, 0711) holding the workspace (the
// uid's, 0700) in HomeDir, after killing what a previous holder of the
// uid left running and removing the homes it left.
func (s *Sandbox) NewEpisode() (_ *Episode, err error) {
	e := &Episode{sb: s, uid: -1, launchers: map[string]*launcher{}}
	defer func() {
		if err != nil {
			err = errors.Join(err, e.Close())
		}
	}()
	if s.pool != nil {
		uid, err := s.pool.Claim()
		if err != nil {
			return nil, err
		}
		e.uid = uid
	}
	if e.uid >= 0 {
		// A holder that died may have left processes (uid-only), and
		// nothing else should be running as the uid: a second wall.
		if err := KillAllOfUID(s.cfg.Range, e.uid); err != nil {
			return nil, err
		}
	}
	if s.cfg.Mode == Namespaces {
		if e.ns, err = setupNamespaces(s.cfg, e.uid); err != nil {
			return nil, err
		}
		e.dir = e.ns.path(e.ns.ws)
		e.codeDir = s.cfg.WorkspaceDir
		return e, nil
	}
	if e.uid >= 0 {
		// A holder that died may have left homes.
		if err := removeStaleHomes(s.cfg.HomeDir, e.uid); err != nil {
			return nil, fmt.Errorf("remove homes a previous holder of uid %d left: %w", e.uid, err)
		}
	}
	if e.home, err = makeHome(s.cfg.HomeDir, e.uid); err != nil {
		return nil, err
	}
	e.dir = filepath.Join(e.home, "ws")
	e.codeDir = e.dir
	return e, nil
}

// UID is the episode's uid; -1 unsandboxed.
func (e *Episode) UID() int { return e.uid }

// Dir is the workspace as the server reaches it (in Namespaces a path
// through a descriptor of this process, /proc/self/fd/N/.). Work in it as
// the uid (AsUID).
func (e *Episode) Dir() string { return e.dir }

// CodeDir is the workspace as the episode's code sees it: its working
// directory and HOME.
func (e *Episode) CodeDir() string { return e.codeDir }

// StatDir returns the workspace directory's own stat (never through a
// symlink; in namespaces through the descriptor, which needs no
// permission on the directory) and a path that reaches it for chmod.
// Agent code can take every permission away from its workspace, and in
// the uid-only mode replace it with something else.
func (e *Episode) StatDir() (st unix.Stat_t, chmodPath string, err error) {
	if e.ns != nil {
		err = unix.Fstat(int(e.ns.ws.Fd()), &st)
		return st, "/proc/self/fd/" + strconv.Itoa(int(e.ns.ws.Fd())), err
	}
	err = unix.Lstat(e.dir, &st)
	return st, e.dir, err
}

// ClearScratch empties the episode's /tmp and /dev/shm (Namespaces; there
// is nothing of the episode's own elsewhere), as the uid.
func (e *Episode) ClearScratch() error {
	if e.ns == nil {
		return nil
	}
	return AsUID(e.uid, func() error {
		var errs []error
		for _, f := range []*os.File{e.ns.tmp, e.ns.shm} {
			// Through the descriptor's link, which needs no permission on
			// the directory: agent code may have taken them all away.
			if err := unix.Chmod("/proc/self/fd/"+strconv.Itoa(int(f.Fd())), 0o700); err != nil {
				errs = append(errs, fmt.Errorf("chmod the episode's %s: %w", f.Name(), err))
				continue
			}
			errs = append(errs, EmptyDir(e.ns.path(f)))
		}
		return errors.Join(errs...)
	})
}

// Close ends the episode: nothing of it is left (in Namespaces its tmpfs
// goes with the last descriptor; otherwise the uid's processes are killed
// and the home removed) and the uid is released. It is idempotent.
func (e *Episode) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	forkServers := e.forkServers
	e.mu.Unlock()
	// Without e.mu: a fork server starting a template holds its own lock
	// and takes e.mu (launcherFor), which refuses it now.
	var errs []error
	for _, f := range forkServers {
		errs = append(errs, f.Close())
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, l := range e.launchers {
		errs = append(errs, l.close())
	}
	if e.ns != nil {
		errs = append(errs, e.ns.close())
	}
	if e.uid >= 0 && e.ns == nil {
		errs = append(errs, KillAllOfUID(e.sb.cfg.Range, e.uid))
	}
	if e.home != "" {
		errs = append(errs, removeHome(e.uid, e.home))
	}
	if e.BeforeRelease != nil {
		e.BeforeRelease()
	}
	if e.uid >= 0 {
		e.sb.pool.Release(e.uid)
	}
	return errors.Join(errs...)
}

// launcherFor returns the episode's launcher for lims, made on first use:
// a run's, or (server) a fork server's, which starts in / with the
// server's filter; ownNet gives a run a network namespace of its own
// (Command.OwnNetwork).
func (e *Episode) launcherFor(lims Limits, server, ownNet bool) (*launcher, error) {
	rl := lims.WithDefaults().rlimits(e.uid >= 0)
	var key strings.Builder
	fmt.Fprintf(&key, "server=%v,net=%v,", server, ownNet && e.ns != nil)
	for _, l := range rl {
		fmt.Fprintf(&key, "%d=%d,", l.resource, l.value)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, fmt.Errorf("episode closed")
	}
	if l, ok := e.launchers[key.String()]; ok {
		return l, nil
	}
	im := &image{mode: modeExec}
	if e.ns != nil {
		im.mode = modeNamespaces
		namespacedTables(im, ownNet)
	}
	dir := e.codeDir
	if server {
		dir = "/"
	}
	if err := programTable(im, e.uid, dir, rl, server); err != nil {
		return nil, err
	}
	l, err := newLauncher(im)
	if err != nil {
		return nil, err
	}
	e.launchers[key.String()] = l
	return l, nil
}

// makeHome makes a home (root's, 0711) in base holding a workspace "ws"
// (the uid's, 0700), and returns the home.
func makeHome(base string, uid int) (string, error) {
	if err := os.MkdirAll(base, 0o711); err != nil {
		return "", fmt.Errorf("home dir %s: %w", base, err)
	}
	home, err := os.MkdirTemp(base, "wb-")
	if err != nil {
		return "", fmt.Errorf("home dir %s: %w", base, err)
	}
	ws := filepath.Join(home, "ws")
	if err := unix.Mkdir(ws, 0o700); err != nil {
		os.Remove(home)
		return "", fmt.Errorf("mkdir %s: %w", ws, err)
	}
	if uid < 0 {
		return home, nil
	}
	// The uid may pass through its home, not write it.
	err = errors.Join(unix.Chmod(home, 0o711), unix.Chmod(ws, 0o700), unix.Lchown(ws, uid, uid))
	if err != nil {
		return home, errors.Join(fmt.Errorf("workspace %s for uid %d: %w", ws, uid, err), removeHome(uid, home))
	}
	return home, nil
}

// removeHome removes an episode's home: the workspace emptied as the uid,
// then (root owns the home) the workspace entry, whatever it now is, and
// the home with unlink/rmdir in directories root owns.
func removeHome(uid int, home string) error {
	dir := filepath.Join(home, "ws")
	var errs []error
	errs = append(errs, AsUID(uid, func() error { return EmptyDir(dir) }))
	var st unix.Stat_t
	if unix.Lstat(dir, &st) == nil {
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			errs = append(errs, ignoreMissing(unix.Rmdir(dir)))
		} else {
			errs = append(errs, ignoreMissing(unix.Unlink(dir)))
		}
	}
	if err := unix.Rmdir(home); err != nil && !errors.Is(err, unix.ENOENT) {
		errs = append(errs, RemoveTree(home))
	}
	return errors.Join(errs...)
}

// removeStaleHomes removes the homes under base whose workspace belongs to
// uid. The caller holds uid's lock, so no live episode uses them: they were
// left by a holder that crashed.
func removeStaleHomes(base string, uid int) error {
	entries, err := os.ReadDir(base)
	if err != nil {
		return ignoreMissing(err)
	}
	var errs []error
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "wb-") || !e.IsDir() {
			continue
		}
		home := filepath.Join(base, e.Name())
		var st unix.Stat_t
		if unix.Lstat(filepath.Join(home, "ws"), &st) != nil || int(st.Uid) != uid {
			continue
		}
		errs = append(errs, removeHome(uid, home))
	}
	return errors.Join(errs...)
}

func ignoreMissing(err error) error {
	if errors.Is(err, unix.ENOENT) || errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// checkSearchable returns an error unless dir and every directory above it
// let others pass (mode o+x): the sandbox uids must reach their
// workspaces.
func checkSearchable(dir string) error {
	for d := dir; ; d = filepath.Dir(d) {
		var st unix.Stat_t
		if err := unix.Stat(d, &st); err != nil {
			return fmt.Errorf("%s: %w", d, err)
		}
		if st.Mode&0o001 == 0 {
			return fmt.Errorf("%s: mode %#o does not let the sandbox uids pass (needs o+x)", d, st.Mode&0o7777)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}
