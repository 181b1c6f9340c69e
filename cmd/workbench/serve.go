package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/agentpen/agentpen/internal/cli"
	"github.com/agentpen/agentpen/workbench/bind"
	"github.com/agentpen/agentpen/workbench/episode"
	"github.com/agentpen/agentpen/workbench/grader"
	"github.com/agentpen/agentpen/workbench/results"
	"github.com/agentpen/agentpen/workbench/sandbox"
	"github.com/agentpen/agentpen/workbench/server"
	"github.com/agentpen/agentpen/workbench/tasks"
)

const serveHelp = `Serves workbench episodes with OpenEnv's protocol: POST /reset, POST /step,
GET /state, GET /schema, GET /metadata, GET /health and WS /ws (one episode
per WebSocket connection); the tools over MCP on /mcp: the standard
protocol (initialize; one MCP session is one episode) and OpenEnv's
dialect (JSON-RPC tools/list and tools/call, WebSocket /mcp); and a play
page in a browser at /web/ (OpenEnv's web routes, one shared episode).
As root, every episode's code runs as its own sandbox uid in user, PID,
network, IPC and mount namespaces of its own (--sandbox namespaces, the
default: the server refuses to start where user namespaces are not
available), or, with --sandbox uid-only, as its own uid in the server's
namespaces (weaker: the attestation says so). Connections opened by a
sandbox uid are closed at accept, and the server refuses to start from a
binary episode code could read or run.
Connections are capped per peer and in all (--max-conns*).
SIGTERM or SIGINT closes every session, cleans every episode and exits 0.
With --grader URL, answers are graded by a "workbench grader" there (the
key in the variable --grader-key-env names); a grader that fails refuses
that step, and no answer key is kept in this process.
Each reset and step served sets the modification time of the unix sockets
it serves on (at most once a second, never through a link): agentpen reads
it as the workspace's last activity (a campaign's idle timeout).
A workbench serves any task a reset names unless it is bound: --task ID
binds it at start; --task-file PATH (a campaign workspace's
/run/workbench/task, written by agentpen) binds it at the first reset
that finds the file (mode 0400, owned by this user, not a link), and
refuses every reset until then. Once bound it serves only that task: a
reset naming another is refused, and the binding never changes.
With --results-file PATH, every episode that ends (graded, out of steps,
finished, replaced by a reset, closed) appends one JSON line (package
workbench/results) to the file, created 0600 and never through a link.`

// serveOptions are `workbench serve`'s flags.
type serveOptions struct {
	listen      cli.StringList
	maxSessions int
	idleTimeout time.Duration
	logFormat   string
	logLevel    string
	python      string
	homeDir     string
	sandbox     string
	// graderURL selects the remote grader; empty grades in-process.
	graderURL     string
	graderKeyEnv  string
	graderTimeout time.Duration
	maxConns      int
	maxPerPeer    int
	debugListen   string
	// task and taskFile bind the server to one task (package bind).
	task     string
	taskFile string
	// resultsFile is where each ended episode's record is appended.
	resultsFile string
}

func (o *serveOptions) register(fs *cli.FlagSet) {
	fs.Var(&o.listen, "listen", "address to serve on, repeatable: host:port, tcp://host:port or unix:///abs/path.sock (the socket is made 0600 in a 0700 directory) (default "+server.DefaultListen+")")
	fs.IntVar(&o.maxSessions, "max-sessions", server.DefaultMaxSessions, "most concurrent WebSocket sessions; one more gets CAPACITY_REACHED")
	fs.DurationVar(&o.idleTimeout, "idle-timeout", 30*time.Minute, "close a WebSocket session with no reset or step for this long (0: never)")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format on stderr: text or json")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&o.python, "python", "", "interpreter for agent code; must be runnable by the sandbox uids (default $WORKBENCH_SANDBOX_PYTHON, else /usr/bin/python3)")
	fs.StringVar(&o.homeDir, "home-dir", "", "where the uid-only and unsandboxed modes make episode homes (default "+sandbox.DefaultHomeDir+" as root, else the temp directory)")
	fs.StringVar(&o.sandbox, "sandbox", "", "as root: namespaces (each episode in user, PID, network, IPC and mount namespaces of its own; needs user namespaces) or uid-only (weaker: a uid per episode in the server's namespaces) (default namespaces)")
	fs.StringVar(&o.graderURL, "grader", "", "grade with the workbench grader at this URL (http://alias:8080), so no answer key enters this process; default: grade in-process")
	fs.StringVar(&o.graderKeyEnv, "grader-key-env", grader.DefaultKeyEnv, "name of the environment variable holding the grader's API key")
	fs.DurationVar(&o.graderTimeout, "grader-timeout", grader.DefaultTimeout, "bound on each call to the grader; a call that fails refuses that step")
	fs.IntVar(&o.maxConns, "max-conns", 0, "most connections open at once; more are closed at accept (0: 1024, or half the open-file limit when less)")
	fs.IntVar(&o.maxPerPeer, "max-conns-per-peer", 0, "most connections open at once from one peer, a local uid or a remote address (0: 2*max-sessions+32, at least 64)")
	fs.StringVar(&o.task, "task", "", "serve only this task: a reset naming no task plays it, one naming another is refused")
	fs.StringVar(&o.taskFile, "task-file", "", "serve only the task named in this file (absolute path; mode 0400, owned by this user), read at the first reset that finds it; every reset is refused until then")
	fs.StringVar(&o.resultsFile, "results-file", "", "append one JSON line per ended episode to this file (absolute path; created 0600, never through a link); default: none")
	fs.StringVar(&o.debugListen, "debug-listen", "", "serve net/http/pprof at /debug/pprof/ on this loopback address (127.0.0.1:6060); off by default")
}

// validate checks the flags alone, before anything is built.
func (o *serveOptions) validate() error {
	switch {
	case o.graderTimeout <= 0:
		return cli.Usagef("--grader-timeout %v: must be positive", o.graderTimeout)
	case !isEnvName(o.graderKeyEnv):
		return cli.Usagef("--grader-key-env %q: must name an environment variable", o.graderKeyEnv)
	case o.maxSessions < 1:
		return cli.Usagef("--max-sessions %d: must be at least 1", o.maxSessions)
	case o.idleTimeout < 0:
		return cli.Usagef("--idle-timeout %v: must not be negative", o.idleTimeout)
	case o.maxConns < 0 || o.maxPerPeer < 0:
		return cli.Usagef("--max-conns %d, --max-conns-per-peer %d: must not be negative", o.maxConns, o.maxPerPeer)
	case o.sandbox != "" && o.sandbox != sandbox.Namespaces.String() && o.sandbox != sandbox.UIDOnly.String():
		return cli.Usagef("--sandbox %q: want namespaces or uid-only", o.sandbox)
	}
	if o.task != "" && o.taskFile != "" {
		return cli.Usagef("--task and --task-file: give one, not both")
	}
	if o.task != "" {
		if _, err := tasks.Lookup(o.task); err != nil {
			return cli.Usagef("--task %q: %v (workbench tasks lists the catalogue)", o.task, err)
		}
	}
	if o.taskFile != "" {
		if _, err := bind.File(o.taskFile); err != nil {
			return cli.Usagef("--task-file: %v", err)
		}
	}
	if o.resultsFile != "" && !filepath.IsAbs(o.resultsFile) {
		return cli.Usagef("--results-file %q: must be an absolute path", o.resultsFile)
	}
	if o.debugListen != "" {
		if err := checkDebugAddr(o.debugListen); err != nil {
			return err
		}
	}
	if len(o.listen) == 0 {
		o.listen = cli.StringList{server.DefaultListen}
	}
	return nil
}

// build makes the episode server's configuration: the sandbox (its uid
// block from getenv, checked before anything uses it), the episode
// factory, the remote grader client when --grader is set (its key read
// through getenv), and the refusal of episode clients when the sandbox is
// on; and the episodes' configuration, for the work done ahead of them.
func (o *serveOptions) build(getenv func(string) string, log *slog.Logger) (server.Config, episode.Config, error) {
	// The grader's flags and key come first: a mistake in them is the
	// caller's, whatever the host's sandbox checks would say.
	var ecfg episode.Config
	if o.graderURL != "" {
		key := getenv(o.graderKeyEnv)
		if key == "" {
			return server.Config{}, episode.Config{}, fmt.Errorf("--grader: the key variable %s is unset or empty", o.graderKeyEnv)
		}
		c, err := grader.NewClient(grader.ClientConfig{URL: o.graderURL, Key: key, Timeout: o.graderTimeout, Logger: log})
		if err != nil {
			return server.Config{}, episode.Config{}, fmt.Errorf("--grader: %w", err)
		}
		ecfg.Grader = c
		log.Info("grading remotely: answer keys stay with the grader", "grader", o.graderURL, "key_env", o.graderKeyEnv)
	}
	sb, err := o.sandboxFor(getenv, log)
	if err != nil {
		return server.Config{}, episode.Config{}, err
	}
	ecfg.Python, ecfg.Sandbox, ecfg.Logger = o.python, sb, log
	switch {
	case o.task != "":
		b, err := bind.Fixed(o.task)
		if err != nil {
			return server.Config{}, episode.Config{}, err
		}
		ecfg.Binding = b
		log.Info("bound to one task (--task): a reset naming another is refused")
	case o.taskFile != "":
		b, err := bind.File(o.taskFile)
		if err != nil {
			return server.Config{}, episode.Config{}, err
		}
		ecfg.Binding = b
		log.Info("bound to the task of the bind file, read at the first reset that finds it; every reset is refused until then", "file", o.taskFile)
	}
	if ecfg.Python == "" {
		ecfg.Python = getenv("WORKBENCH_SANDBOX_PYTHON")
	}
	if o.resultsFile != "" {
		path := o.resultsFile
		ecfg.OnEnd = func(r results.Record) {
			if err := results.Append(path, r); err != nil {
				log.Error("results file: a record was not written", "episode_id", r.EpisodeID, "err", err)
			}
		}
		log.Info("episode results appended to a file", "file", o.resultsFile)
	}
	metadata := ecfg.Metadata()
	metadata["name"] = "AgentWorkbenchEnvironment"
	metadata["description"] = "Agent Workbench: tool-using tasks across eight work domains, one task per episode in a private workspace."
	metadata["version"] = "1.0.0"
	cfg := server.Config{
		Factory: func() (server.Env, error) {
			env, err := episode.New(ecfg)
			if err != nil {
				return nil, err
			}
			return env, nil
		},
		FactoryName:     "AgentWorkbenchEnvironment",
		MaxSessions:     o.maxSessions,
		IdleTimeout:     o.idleTimeout,
		MaxConns:        o.maxConns,
		MaxConnsPerPeer: o.maxPerPeer,
		Metadata:        metadata,
		Logger:          log,
		Tools:           ecfg.Tools(),
		Version:         cli.ReadVersion().Version,
		// Each reset and step touches the unix sockets served on, where
		// agentpen reads a workspace's last activity (its idle timeout).
		Activity: server.SocketActivity(unixPaths(o.listen), time.Now),
	}
	if sb.Mode() != sandbox.Unsandboxed {
		if o.maxSessions > sb.Range().Slots() {
			return server.Config{}, episode.Config{}, cli.Usagef("--max-sessions %d: the uid range %v has %d episode uids", o.maxSessions, sb.Range(), sb.Range().Slots())
		}
		// Needed in the uid-only sandbox, whose episode code shares the
		// server's network; a second wall in namespaces, where it has only
		// its own loopback.
		cfg.EpisodeUID = func(uid uint32) bool { return sandbox.IsSandboxUID(int(uid)) }
	}
	return cfg, ecfg, nil
}

// sandboxFor makes the sandbox: as root the mode of --sandbox (namespaces
// by default, refused where user namespaces are not available) with the
// workspace's uid block, recorded in the lock directory for the
// attestation's uid_block probe; unsandboxed otherwise.
func (o *serveOptions) sandboxFor(getenv func(string) string, log *slog.Logger) (*sandbox.Sandbox, error) {
	if !sandbox.Available() {
		if o.sandbox != "" {
			return nil, cli.Usagef("--sandbox %s: needs root", o.sandbox)
		}
		log.Warn("not root: agent code runs as the server's own user, unsandboxed, and episode clients cannot be told apart")
		return sandbox.New(sandbox.Config{Mode: sandbox.Unsandboxed, HomeDir: o.homeDir})
	}
	if err := checkBinaryPrivate(); err != nil {
		return nil, err
	}
	mode := sandbox.Namespaces
	if o.sandbox != "" {
		m, err := sandbox.ParseMode(o.sandbox)
		if err != nil {
			return nil, cli.Usagef("--sandbox: %v", err)
		}
		mode = m
	}
	// The workspace's uid block: a malformed one fails the start rather
	// than falling back to the default range another workspace may be
	// using too.
	r, err := sandbox.RangeFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	sb, err := sandbox.New(sandbox.Config{Mode: mode, Range: r, LockDir: getenv("WORKBENCH_UID_LOCK_DIR"), HomeDir: o.homeDir})
	if errors.Is(err, sandbox.ErrNoUserNamespaces) {
		return nil, fmt.Errorf("%w; give the container a seccomp profile that allows them (agentpen does), or run the weaker uid-only sandbox with --sandbox uid-only", err)
	}
	if err != nil {
		return nil, err
	}
	if err := sandbox.RecordRange(sb.Config().LockDir, r); err != nil {
		return nil, err
	}
	log.Info("episode sandbox", "mode", mode.String(), "range", r.String(), "episode_uids", r.Slots())
	if mode == sandbox.UIDOnly {
		log.Warn("uid-only sandbox: episode code shares the server's network, IPC, PID and mount namespaces, and what it leaves in shared places is not swept")
	}
	return sb, nil
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	var o serveOptions
	fs := cli.NewFlagSet(prog, "serve", "[flags]", serveHelp, stdout)
	o.register(fs)
	if _, err := fs.Parse(args, 0, 0); err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	log, err := newLogger(stderr, o.logFormat, o.logLevel)
	if err != nil {
		return err
	}
	cfg, ecfg, err := o.build(getenv, log)
	if err != nil {
		return err
	}
	srv, err := server.New(cfg)
	if err != nil {
		return err
	}
	lns, err := listenAll(ctx, o.listen)
	if err != nil {
		return err
	}
	// The episodes' fork server program compiles once the sockets are
	// there (what the adapter waits for), while the server waits for its
	// first reset: not on that reset's path (of a pooled workspace, the
	// first session after its claim).
	compiled := make(chan struct{})
	go func() {
		defer close(compiled)
		begun := time.Now()
		if ecfg.CompileAhead() {
			log.Info("fork servers' program compiled ahead of the first reset", "took", time.Since(begun).Round(time.Microsecond))
		}
	}()
	defer func() { <-compiled }()
	return serveWithDebug(ctx, o.debugListen, cfg.EpisodeUID, log, lns, srv.Serve)
}

// checkBinaryPrivate refuses a binary the sandbox uids could read or
// execute: it holds the task generator with every answer key, so episode
// code could run a grader of its own from it.
func checkBinaryPrivate() error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this binary: %w", err)
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	mounts, err := sandbox.ParseMountinfo(b)
	if err != nil {
		return err
	}
	if err := sandbox.CheckUnexposed(exe, mounts); err != nil {
		return fmt.Errorf("refusing to start from a binary episode code could run (it holds every answer key): %w; install it root-only: make build (mode 0700), or chmod 0700 %s", err, exe)
	}
	return nil
}
