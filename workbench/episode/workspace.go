package episode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/agentpen/agentpen/workbench/sandbox"
	"github.com/agentpen/agentpen/workbench/tasks"
	"golang.org/x/sys/unix"
)

// serverFiles are the files the server writes into a workspace to run the
// agent's code and to grade it.
var serverFiles = []string{".run.py", ".grade.py", ".grade_tests.py"}

// maxReadBytes bounds what read_file reads of one file.
const maxReadBytes = 64 << 20

// workspace is one episode's sandbox.Episode (its uid, -1 unsandboxed,
// its workspace and namespaces) as the tools use it.
type workspace struct {
	cfg Config
	ep  *sandbox.Episode
	uid int
	// dir is the workspace as the server reaches it.
	dir string
	// fs is the episode's fork server (nil with Config.NoForkServer);
	// runs forks the agent's runs, grading the graded cases of one
	// sequence (runCases, each in a network namespace of its own) and is
	// replaced after each, so that every sequence forks from a server
	// nothing of the agent's ran from.
	fs            *sandbox.ForkServer
	runs, grading *sandbox.Forker
}

// prepareWorkspace starts a sandbox episode and its fork server (with a
// server for the agent's runs): all of an episode that does not depend on
// its task, so that it can be made ahead (Environment.retire). For one
// call (Environment.OneCall), which runs the agent's code once at most,
// the fork server waits for a graded sequence: a template started for
// one run costs the run's own start again, beside it.
func prepareWorkspace(cfg Config, oneCall bool) (*workspace, error) {
	ep, err := cfg.Sandbox.NewEpisode()
	if err != nil {
		return nil, err
	}
	w := &workspace{cfg: cfg, ep: ep, uid: ep.UID(), dir: ep.Dir()}
	// For one call the fork server is started by the first graded case
	// (runGraded), and the agent's runs are spawned.
	if !cfg.NoForkServer && !oneCall {
		w.fs = ep.ForkServer(cfg.forkServer(w.env()))
		w.runs = w.fs.Forker()
	}
	return w, nil
}

// forkServer is the configuration of every episode's fork server, its
// runs' environment env.
func (c Config) forkServer(env []string) sandbox.ForkServerConfig {
	// test_solution.py imports json; the probe imports nothing.
	return sandbox.ForkServerConfig{Python: c.Python, Env: env, Limits: c.RunLimits, Preload: []string{"json"}}
}

// CompileAhead does ahead, once per sandbox, what the first episode's
// reset would otherwise do on its path and no later one does: it
// compiles the program of the episodes' fork servers
// (sandbox.Sandbox.CompileAhead; nothing with NoForkServer, or without a
// Sandbox: false). A server calls it once at start, in the background: a
// reset that comes during the compile waits for it rather than compiling
// again. It reports whether the program is compiled.
func (c Config) CompileAhead() bool {
	r := c.resolved()
	if r.NoForkServer || r.Sandbox == nil {
		return false
	}
	return r.Sandbox.CompileAhead(r.forkServer(nil))
}

// fill writes the task's files into the workspace as the uid, and asks
// the fork server for a grading server for a code task. On an error the
// workspace is destroyed.
func (w *workspace) fill(files []tasks.File, code bool) (err error) {
	defer func() {
		if err != nil {
			// A half-built episode holds a uid and namespaces nothing else
			// would release.
			err = errors.Join(err, w.destroy(nil))
		}
	}()
	err = sandbox.AsUID(w.uid, func() error {
		for _, f := range files {
			parts, err := sandbox.SplitPath(f.Path)
			if err != nil {
				return fmt.Errorf("task file %q: %w", f.Path, err)
			}
			fh, err := sandbox.OpenFile(w.dir, parts, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o644, true)
			if err != nil {
				return fmt.Errorf("task file %q: %w", f.Path, err)
			}
			_, err = io.WriteString(fh, f.Content)
			if cerr := fh.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("task file %q: %w", f.Path, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if code && w.fs != nil {
		w.grading = w.fs.NetworkForker()
	}
	return nil
}

// destroy ends the sandbox episode: nothing of it is left and its uid is
// released (sandbox.Episode.Close); beforeRelease (tests) runs just
// before the release.
func (w *workspace) destroy(beforeRelease func(uid int)) error {
	if beforeRelease != nil {
		uid := w.uid
		w.ep.BeforeRelease = func() { beforeRelease(uid) }
	}
	return w.ep.Close()
}

// check returns a refusal when agent code removed the workspace or made it
// something else, and gives it back mode 0700 when agent code took it away.
// Call it as the uid.
func (w *workspace) check() error {
	st, chmodPath, err := w.ep.StatDir()
	if err != nil {
		return refusef("the workspace directory is gone; nothing can run in it")
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return refusef("the workspace is no longer a directory; nothing can run in it")
	}
	if st.Mode&0o7777 != 0o700 {
		if err := unix.Chmod(chmodPath, 0o700); err != nil {
			return refusef("the workspace cannot be used: %s", strerror(err))
		}
	}
	return nil
}

// as runs fn as the workspace's uid after checking the workspace.
func (w *workspace) as(fn func() error) error {
	return sandbox.AsUID(w.uid, func() error {
		if err := w.check(); err != nil {
			return err
		}
		return fn()
	})
}

// listing lists the regular files, without symlinks and names starting
// with "."; what cannot be read, under a directory the agent locked, is
// left out.
func (w *workspace) listing(limit int) (string, error) {
	var rows []string
	err := w.as(func() error {
		return sandbox.Walk(w.dir, func(*sandbox.Entry) bool { return true }, false, func(e *sandbox.Entry) error {
			if !e.Left && e.Stat.Mode&unix.S_IFMT == unix.S_IFREG && !strings.HasPrefix(e.Name, ".") {
				rows = append(rows, fmt.Sprintf("%s (%d bytes)", e.Rel, e.Stat.Size))
			}
			return nil
		})
	})
	if err != nil {
		return "", err
	}
	sort.Strings(rows)
	text := strings.Join(rows, "\n")
	if text == "" {
		text = "(empty)"
	}
	return clip(decodeReplace([]byte(text)), limit, 0), nil
}

// open opens a regular file of the workspace as the uid; errors are
// refusals worded as the seed's.
func (w *workspace) open(parts []string, shown string, flags int, mkdirs bool) (*os.File, error) {
	f, err := sandbox.OpenFile(w.dir, parts, flags, 0o644, mkdirs)
	if err == nil {
		return f, nil
	}
	var pe *os.PathError
	switch {
	case errors.Is(err, sandbox.ErrSymlink):
		return nil, refusef("paths must stay inside the workspace and may not pass through a symlink")
	case errors.Is(err, sandbox.ErrNotRegular):
		return nil, refusef("%s is not a regular file", pyRepr(shown))
	case errors.As(err, &pe) && pe.Op == "walk":
		return nil, refusef("cannot use the path %s: %s", pyRepr(shown), strerror(pe.Err))
	case errors.As(err, &pe) && pe.Op == "mkdir":
		return nil, refusef("cannot write %s: %s", pyRepr(shown), strerror(pe.Err))
	case errors.Is(err, unix.ENOENT):
		return nil, refusef("no such file: %s", pyRepr(shown))
	case errors.As(err, &pe):
		return nil, refusef("cannot open %s: %s", pyRepr(shown), strerror(pe.Err))
	}
	return nil, err
}

// strerror words an errno as C's strerror (and Python's) does.
func strerror(err error) string {
	var errno unix.Errno
	if errors.As(err, &errno) {
		s := errno.Error()
		if s != "" {
			return strings.ToUpper(s[:1]) + s[1:]
		}
	}
	return err.Error()
}

// readFile returns a file's bytes.
func (w *workspace) readFile(parts []string, shown string) ([]byte, error) {
	var data []byte
	err := w.as(func() error {
		f, err := w.open(parts, shown, unix.O_RDONLY, false)
		if err != nil {
			return err
		}
		defer f.Close()
		data, err = io.ReadAll(io.LimitReader(f, maxReadBytes+1))
		if err != nil {
			return refusef("cannot read %s: %s", pyRepr(shown), strerror(err))
		}
		if len(data) > maxReadBytes {
			return refusef("%s is too large to read (over %d MiB)", pyRepr(shown), maxReadBytes>>20)
		}
		return nil
	})
	return data, err
}

// writeFile creates or replaces a regular file, making missing
// directories; it is truncated only once known to be a regular file.
func (w *workspace) writeFile(parts []string, shown string, data []byte) error {
	return w.as(func() error {
		f, err := w.open(parts, shown, unix.O_WRONLY|unix.O_CREAT, true)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := f.Truncate(0); err != nil {
			return refusef("cannot write %s: %s", pyRepr(shown), strerror(err))
		}
		if _, err := f.Write(data); err != nil {
			return refusef("cannot write %s: %s", pyRepr(shown), strerror(err))
		}
		return nil
	})
}

// writePrivate writes one of the server's files, after removing whatever
// agent code put at its name (a symlink, a locked directory, a FIFO).
func (w *workspace) writePrivate(name, text string) error {
	return w.as(func() error { return w.writePrivateAsUID(name, text) })
}

// writePrivateAsUID is writePrivate's work; call it as the uid.
func (w *workspace) writePrivateAsUID(name, text string) error {
	if err := w.clearPrivate(name); err != nil {
		return err
	}
	f, err := sandbox.OpenFile(w.dir, []string{name}, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o644, false)
	if err != nil {
		return refusef("cannot prepare %s: %s", name, strerror(err))
	}
	_, err = io.WriteString(f, text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return refusef("cannot prepare %s: %s", name, strerror(err))
	}
	return nil
}

// clearPrivate removes what is at a server file's name; as the uid.
func (w *workspace) clearPrivate(name string) error {
	path := filepath.Join(w.dir, name)
	if err := sandbox.RemoveTree(path); err != nil {
		return refusef("cannot prepare %s: %s", name, strerror(err))
	}
	var st unix.Stat_t
	if unix.Lstat(path, &st) == nil {
		return refusef("cannot prepare %s: it could not be removed", name)
	}
	return nil
}

// digest hashes the workspace but the server's files (see
// sandbox.Digest); "" when it cannot be read or is too large.
func (w *workspace) digest() string {
	var sum string
	err := w.as(func() error {
		var err error
		sum, err = sandbox.Digest(w.dir, isServerFile, sandbox.DigestBytes)
		return err
	})
	if err != nil {
		return ""
	}
	return sum
}

func isServerFile(rel string) bool {
	for _, s := range serverFiles {
		if rel == s || strings.HasPrefix(rel, s+"/") {
			return true
		}
	}
	return false
}

// resetDirAsUID clears what agent code can set on the workspace directory
// itself: its user extended attributes and ACLs, and its times. The digest
// leaves that directory out, since the server's own files come and go in
// it, so this keeps it from carrying anything from one graded call to the
// next. Call it as the uid.
func (w *workspace) resetDirAsUID() error {
	buf := make([]byte, 64<<10)
	n, err := unix.Llistxattr(w.dir, buf)
	if err != nil && !errors.Is(err, unix.ENOTSUP) {
		return err
	}
	for _, name := range strings.Split(string(buf[:max(n, 0)]), "\x00") {
		if strings.HasPrefix(name, "user.") || strings.HasPrefix(name, "system.posix_acl_") {
			if err := unix.Lremovexattr(w.dir, name); err != nil {
				return err
			}
		}
	}
	zero := []unix.Timespec{{}, {}}
	return unix.UtimesNanoAt(unix.AT_FDCWD, w.dir, zero, unix.AT_SYMLINK_NOFOLLOW)
}

// clearAgentState leaves nothing of the agent's outside the workspace
// (clearOutside), and none of the server's script files in the workspace,
// so the next run starts from the workspace alone.
func (w *workspace) clearAgentState() error {
	if err := w.clearOutside(); err != nil {
		return err
	}
	return w.as(w.clearScripts)
}

// clearOutside empties the episode's /tmp and /dev/shm: a run left no
// process (Run returns once none is), and its IPC objects went with its
// IPC namespace. In the uid-only sandbox there is nothing of the
// episode's own to empty (the shared places are not swept: weaker).
func (w *workspace) clearOutside() error {
	return w.ep.ClearScratch()
}

// clearScripts removes the server's script files; call it as the uid.
func (w *workspace) clearScripts() error {
	for _, name := range []string{".run.py", ".grade_tests.py"} {
		if err := w.clearPrivate(name); err != nil {
			return err
		}
	}
	return nil
}

// prepareCase readies one graded case: clearAgentState, the probe written
// as name, and the workspace directory reset (resetDirAsUID; reset says whether
// that worked), all file work in one switch to the uid.
func (w *workspace) prepareCase(name, probe string) (reset bool, err error) {
	if err := w.clearOutside(); err != nil {
		return false, err
	}
	err = w.as(func() error {
		if err := w.clearScripts(); err != nil {
			return err
		}
		if err := w.writePrivateAsUID(name, probe); err != nil {
			return err
		}
		reset = w.resetDirAsUID() == nil
		return nil
	})
	return reset, err
}

// env is every run's environment.
func (w *workspace) env() []string {
	return []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=" + w.ep.CodeDir(),
		"PYTHONDONTWRITEBYTECODE=1",
		"LANG=C.UTF-8",
	}
}

// run runs Python with argv (after the interpreter) in the workspace: an
// agent's run. Every caller has just written the script it runs with
// writePrivate, which checked the workspace (w.check) as the uid.
func (w *workspace) run(ctx context.Context, argv []string, stdin []byte) (sandbox.Result, error) {
	return w.runWith(ctx, w.runs, argv, stdin, false)
}

// runGraded runs a graded case, from the grading server, in a network
// namespace of its own: the episode's keeps what earlier runs and cases
// left (a port in TIME_WAIT, a socket kept alive in flight) after their
// processes are gone.
func (w *workspace) runGraded(ctx context.Context, argv []string, stdin []byte) (sandbox.Result, error) {
	if w.fs == nil && !w.cfg.NoForkServer {
		w.fs = w.ep.ForkServer(w.cfg.forkServer(w.env()))
	}
	if w.grading == nil && w.fs != nil {
		w.grading = w.fs.NetworkForker()
	}
	return w.runWith(ctx, w.grading, argv, stdin, true)
}

// gradedDone ends a graded sequence: its server goes, and another is
// asked of the template for the next sequence.
func (w *workspace) gradedDone() {
	if w.grading != nil {
		w.grading.Close()
		w.grading = w.fs.NetworkForker()
	}
}

// runWith runs through k, or spawns when k is nil; ownNet gives the run a
// network namespace of its own (sandbox.Command.OwnNetwork).
func (w *workspace) runWith(ctx context.Context, k *sandbox.Forker, argv []string, stdin []byte, ownNet bool) (sandbox.Result, error) {
	c := sandbox.Command{
		Argv:       append([]string{w.cfg.Python}, argv...),
		Env:        w.env(),
		Limits:     w.cfg.RunLimits,
		Stdin:      stdin,
		Timeout:    w.cfg.Limits.PythonTimeout,
		OwnNetwork: ownNet,
	}
	var res sandbox.Result
	var err error
	if k != nil {
		res, err = k.Run(ctx, c)
	} else {
		res, err = w.ep.Run(ctx, c)
	}
	if errors.Is(err, sandbox.ErrLaunch) {
		return res, refusef("cannot run in the workspace: %v", err)
	}
	return res, err
}
