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

// workspace is one episode's home and workspace, and the uid that owns the
// workspace (-1 when unsandboxed).
type workspace struct {
	cfg  Config
	pool *sandbox.Pool
	uid  int
	home string
	dir  string
	// ran is set once code ran as the uid: only then can anything of the
	// uid exist outside the workspace (processes, shared-tmp files, IPC).
	ran bool
	// mayRun is set while a process of the uid may be alive: from the
	// start of a Run until a kill proved none is.
	mayRun bool
}

// newWorkspace claims a uid, clears anything a previous holder of it left,
// and makes the home (root's, 0711) and the workspace (the uid's, 0700)
// with the task's files.
func newWorkspace(cfg Config, pool *sandbox.Pool, files []tasks.File) (_ *workspace, err error) {
	w := &workspace{cfg: cfg, pool: pool, uid: -1}
	defer func() {
		if err != nil {
			// A half-built episode holds a uid and a directory nothing else
			// would release.
			err = errors.Join(err, w.destroy(nil))
		}
	}()
	if pool != nil {
		uid, err := claimClean(pool)
		if err != nil {
			return nil, err
		}
		w.uid = uid
		// A previous holder that died may have left files, IPC objects and
		// its home behind (its processes claimClean killed).
		if !pool.Clean(uid) {
			if err := sandbox.Sweep(uid); err != nil {
				return nil, fmt.Errorf("clear the shared places of uid %d: %w", uid, err)
			}
			if err := removeStaleHomes(cfg.HomeDir, uid); err != nil {
				return nil, fmt.Errorf("remove homes a previous holder of uid %d left: %w", uid, err)
			}
		}
		// From here the uid gets a home; a crash leaves the mark dirty.
		if err := pool.SetClean(uid, false); err != nil {
			return nil, err
		}
	}
	base := cfg.HomeDir
	if err := os.MkdirAll(base, 0o711); err != nil {
		return nil, fmt.Errorf("home dir %s: %w", base, err)
	}
	home, err := os.MkdirTemp(base, "wb-")
	if err != nil {
		return nil, fmt.Errorf("home dir %s: %w", base, err)
	}
	w.home = home
	w.dir = filepath.Join(home, "ws")
	if err := unix.Mkdir(w.dir, 0o700); err != nil {
		return nil, fmt.Errorf("mkdir %s: %w", w.dir, err)
	}
	if w.uid >= 0 {
		// The uid may pass through its home, not write it; the home's
		// parents must let it pass too.
		if err := unix.Chmod(home, 0o711); err != nil {
			return nil, fmt.Errorf("chmod %s: %w", home, err)
		}
		if err := checkSearchable(base); err != nil {
			return nil, err
		}
		if err := unix.Chmod(w.dir, 0o700); err != nil {
			return nil, fmt.Errorf("chmod %s: %w", w.dir, err)
		}
		if err := unix.Lchown(w.dir, w.uid, w.uid); err != nil {
			return nil, fmt.Errorf("chown %s to %d: %w", w.dir, w.uid, err)
		}
	}
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
		return nil, err
	}
	return w, nil
}

// claimAttempts bounds how many uids claimClean tries.
const claimAttempts = 4

// claimClean claims a uid none of whose processes is alive: a holder that
// died may have left processes behind, and a uid whose processes are
// still exiting after the kill is retired (not handed out) and another
// one tried.
func claimClean(pool *sandbox.Pool) (int, error) {
	var errs []error
	for range claimAttempts {
		uid, err := pool.Claim()
		if err != nil {
			return 0, errors.Join(append(errs, err)...)
		}
		if pool.Clean(uid) {
			return uid, nil // released with no process left, and none ran since
		}
		err = sandbox.KillUntilNone(uid)
		if err == nil {
			return uid, nil
		}
		pool.Retire(uid)
		errs = append(errs, err)
	}
	return 0, fmt.Errorf("claim a uid: %w", errors.Join(errs...))
}

// checkSearchable returns an error unless dir and every directory above it
// let others pass (mode o+x) and only their owner write.
func checkSearchable(dir string) error {
	for d := dir; ; d = filepath.Dir(d) {
		var st unix.Stat_t
		if err := unix.Stat(d, &st); err != nil {
			return fmt.Errorf("home dir %s: %w", d, err)
		}
		if st.Mode&0o001 == 0 {
			return fmt.Errorf("home dir %s: mode %#o does not let the sandbox uids pass (needs o+x)", d, st.Mode&0o7777)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// destroy kills the uid's processes and removes what it left in the shared
// places (sandbox.Sweep; both only once code ran as the uid: before that
// nothing can exist), and the workspace and home, then releases the uid,
// marked clean when all of it went. A uid some process of which is still
// alive after the kill's deadline is retired instead (sandbox.Pool.Retire),
// so no episode gets it while they may run. It goes on past errors and
// returns them all.
func (w *workspace) destroy(beforeRelease func(uid int, home string)) error {
	var errs []error
	var killErr error
	if w.uid >= 0 && w.ran {
		// Processes first, so nothing writes into a tree being removed.
		killErr = sandbox.KillUntilNone(w.uid)
		if !errors.Is(killErr, sandbox.ErrStillExiting) {
			errs = append(errs, killErr)
		}
		errs = append(errs, sandbox.Sweep(w.uid))
	}
	if w.home != "" {
		errs = append(errs, removeHome(w.uid, w.home))
	}
	if w.uid >= 0 {
		if killErr != nil {
			w.pool.Retire(w.uid)
			return errors.Join(errs...)
		}
		if beforeRelease != nil {
			beforeRelease(w.uid, w.home)
		}
		if err := errors.Join(errs...); err == nil {
			// Nothing of the uid is left: its next holder need not look.
			errs = append(errs, w.pool.SetClean(w.uid, true))
		}
		w.pool.Release(w.uid)
	}
	return errors.Join(errs...)
}

// removeHome removes an episode's home: the workspace emptied as the uid,
// then (root owns the home) the workspace entry, whatever it now is, and
// the home with unlink/rmdir in directories root owns.
func removeHome(uid int, home string) error {
	dir := filepath.Join(home, "ws")
	var errs []error
	errs = append(errs, sandbox.AsUID(uid, func() error { return sandbox.EmptyDir(dir) }))
	var st unix.Stat_t
	if unix.Lstat(dir, &st) == nil {
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			errs = append(errs, ignoreMissing(unix.Rmdir(dir)))
		} else {
			errs = append(errs, ignoreMissing(unix.Unlink(dir)))
		}
	}
	if err := unix.Rmdir(home); err != nil && !errors.Is(err, unix.ENOENT) {
		errs = append(errs, sandbox.RemoveTree(home))
	}
	return errors.Join(errs...)
}

// removeStaleHomes removes the homes under base whose workspace belongs to
// uid. The caller holds uid's lock, so no live episode uses them: they were
// left by a holder that crashed, and the next holder must not find them.
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
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}

// check returns a refusal when agent code removed the workspace or made it
// something else, and gives it back mode 0700 when agent code took it away.
// Call it as the uid.
func (w *workspace) check() error {
	var st unix.Stat_t
	if err := unix.Lstat(w.dir, &st); err != nil {
		return refusef("the workspace directory is gone; nothing can run in it")
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return refusef("the workspace is no longer a directory; nothing can run in it")
	}
	if st.Mode&0o7777 != 0o700 {
		if err := unix.Chmod(w.dir, 0o700); err != nil {
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

// clearAgentState leaves nothing of the agent's running or in the shared
// places (sandbox.Sweep), and none of the server's script
// files in the workspace, so the next run starts from the workspace alone.
func (w *workspace) clearAgentState() error {
	if err := w.clearOutside(); err != nil {
		return err
	}
	return w.as(w.clearScripts)
}

// clearOutside kills what of the uid may still run and sweeps what it left
// in the shared places; nothing when no code ran since the last time.
func (w *workspace) clearOutside() error {
	if w.uid < 0 || !w.ran {
		return nil
	}
	// A Run that returned left nothing alive (or only processes that are
	// exiting and cannot touch the next case); anything else may have.
	if w.mayRun {
		if err := sandbox.KillUntilNone(w.uid); err != nil && !errors.Is(err, sandbox.ErrStillExiting) {
			return err
		}
		w.mayRun = false
	}
	return sandbox.Sweep(w.uid)
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
// as name, and the workspace directory reset (resetDir; reset says whether
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

// run runs Python with argv (after the interpreter) in the workspace.
// Every caller has just written the script it runs with writePrivate,
// which checked the workspace (w.check) as the uid; nothing of the uid
// ran since.
func (w *workspace) run(ctx context.Context, argv []string, stdin []byte) (sandbox.Result, error) {
	w.ran, w.mayRun = true, true
	res, err := sandbox.Run(ctx, sandbox.Command{
		Argv: append([]string{w.cfg.Python}, argv...),
		Dir:  w.dir,
		Env: []string{
			"PATH=/usr/local/bin:/usr/bin:/bin",
			"HOME=" + w.dir,
			"PYTHONDONTWRITEBYTECODE=1",
			"LANG=C.UTF-8",
		},
		UID:     w.uid,
		Limits:  w.cfg.RunLimits,
		Stdin:   stdin,
		Timeout: w.cfg.Limits.PythonTimeout,
	})
	if err == nil {
		w.mayRun = false // Run returns once none of the uid is alive
	}
	if errors.Is(err, sandbox.ErrLaunch) {
		return res, refusef("cannot run in the workspace: %v", err)
	}
	return res, err
}
