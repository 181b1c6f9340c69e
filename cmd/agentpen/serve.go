package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/apikey"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/cli"
	"github.com/agentpen/agentpen/internal/debugserve"
	"github.com/agentpen/agentpen/launcher"
)

// defaultListen is agentpen serve's address when --listen is not given.
const defaultListen = "127.0.0.1:8700"

// defaultTokenEnv names the variable the token is read from by default.
const defaultTokenEnv = "AGENTPEN_SERVE_TOKEN"

const serveHelp = `Runs the launcher API: campaigns over HTTP (create, list, get, attest, delete, workspaces),
/healthz, /metrics and the OpenAPI document (/v1/openapi.json), and the episode proxy that
gives each workspace a base_url an unmodified OpenEnv client uses as it is.

Listens on 127.0.0.1:8700 or on a unix socket (--listen unix:///path/api.sock, mode 0600). A
non-loopback address is refused unless TLS is on (--tls-cert and --tls-key) or
--insecure-listen is given. Every route but /healthz and the proxy's needs the bearer token,
read from the file --token-file names (this user's, mode 0600) or from the environment variable
--token-env names (default AGENTPEN_SERVE_TOKEN); never from the command line. A token has at
least 32 characters, 10 distinct ones and 128 bits estimated from its length and the kinds of
characters it uses (openssl rand -hex 32 makes one); a weaker one is refused. The proxy's credential is
the capability in each base_url, derived from a server key kept in <state root>/keys/server.key
(0600), so base_urls survive a restart.

SIGINT or SIGTERM stops it gracefully: proxy sessions are closed (1001), operations in flight
get --shutdown-timeout to finish (then a bring-up is cancelled and rolls back), and every
campaign stays up and journalled, unless --cleanup-on-exit removes them (verified). One
serve per state root: it holds <state root>/api/serve.lock while it runs. The API key of the
campaigns' grader comes from agentpen's environment, as for agentpen up.
Exit status: 0 stopped cleanly, 1 failure (with --cleanup-on-exit: a cleanup not verified,
even after SIGINT/SIGTERM), 2 bad input (flags, the token, TLS files, the server key), 3 daemon
unreachable, 4 conflict (another agentpen serve holds the state root, or the address is in
use), 130/143 interrupted while starting.`

type serveFlags struct {
	listen, publicURL       string
	tokenFile, tokenEnv     string
	tlsCert, tlsKey         string
	debugListen             string
	insecure, cleanupOnExit bool
	shutdown, readyTimeout  time.Duration
	parallel                int
	allowEnv                cli.StringList
}

func serve(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs := cli.NewFlagSet("agentpen", "serve", "[flags]", serveHelp, stdout)
	var cf campaignFlags
	cf.register(fs, getenv)
	var af attestFlags
	af.register(fs)
	var sf serveFlags
	fs.StringVar(&sf.listen, "listen", defaultListen, "address to listen on: host:port, or unix:///path/to/api.sock")
	fs.StringVar(&sf.publicURL, "public-url", "", "the URL clients reach the service at, the prefix of every base_url (default: from --listen; with a unix socket, base_urls are paths)")
	fs.StringVar(&sf.tokenFile, "token-file", "", "file holding the bearer token (mode 0600); overrides --token-env")
	fs.StringVar(&sf.tokenEnv, "token-env", defaultTokenEnv, "environment variable holding the bearer token")
	fs.StringVar(&sf.tlsCert, "tls-cert", "", "TLS certificate file (with --tls-key: serve HTTPS)")
	fs.StringVar(&sf.tlsKey, "tls-key", "", "TLS private key file")
	fs.StringVar(&sf.debugListen, "debug-listen", "", "serve net/http/pprof at /debug/pprof/ on this loopback address (127.0.0.1:6060); off by default")
	fs.BoolVar(&sf.insecure, "insecure-listen", false, "allow a non-loopback address without TLS (the token and capabilities then travel in clear)")
	fs.BoolVar(&sf.cleanupOnExit, "cleanup-on-exit", false, "when it stops, remove every campaign of the state root that is not removed (by exact id, verified)")
	fs.DurationVar(&sf.shutdown, "shutdown-timeout", launcher.DefaultShutdownGrace, "how long operations in flight may take to finish when stopping")
	fs.DurationVar(&sf.readyTimeout, "ready-timeout", adapter.DefaultReadyTimeout, "how long each container may take to become ready")
	fs.IntVar(&sf.parallel, "parallel", adapter.DefaultParallelism, "workspaces created at once, per campaign")
	fs.Var(&sf.allowEnv, "allow-env", "a variable of agentpen's environment campaigns may copy into their grader (server.secret_env, server.api_key_env), repeatable; "+campaign.DefaultAPIKeyEnv+" is always allowed; AGENTPEN_* and the token's variable never")
	if _, err := fs.Parse(args, 0, 0); err != nil {
		return err
	}
	if sf.debugListen != "" {
		if err := debugserve.CheckAddr(sf.debugListen); err != nil {
			return err
		}
	}
	opts, err := af.options()
	if err != nil {
		return err
	}
	if err := sf.checkListen(); err != nil {
		return err
	}
	// The service's token never reaches a container, whatever a spec or
	// the allow-list says.
	envPolicy := campaign.EnvPolicy{Allowed: sf.allowEnv, Forbidden: []string{sf.tokenEnv}}
	if err := campaign.CheckEnvPolicy(envPolicy); err != nil {
		return cli.Usagef("%v", err)
	}
	token, err := sf.token(getenv)
	if err != nil {
		return err
	}
	tlsConfig, err := sf.tlsConfig()
	if err != nil {
		return err
	}
	// The state root is checked before anything in it is opened, made
	// or read; then one service per state root, taken before the server
	// key can be made and before anything listens: a second one would
	// answer from its own memory for campaigns the first changes.
	root, err := cf.root(true)
	if err != nil {
		return err
	}
	defer root.Close()
	lock, err := root.LockServe()
	if err != nil {
		return err
	}
	defer lock.Unlock()
	ln, publicURL, err := sf.listener()
	if err != nil {
		return err
	}
	defer ln.Close()
	a, err := cf.adapter(ctx, stderr, getenv)
	if err != nil {
		return err
	}
	defer a.Docker.Close()
	a.ReadyTimeout, a.Parallelism, a.EnvPolicy = sf.readyTimeout, sf.parallel, envPolicy
	key, err := root.Secret(launcher.KeyFile, launcher.KeyBytes)
	if err != nil {
		return err
	}
	srv, err := launcher.New(launcher.Config{Adapter: a, Root: root, Token: token, Key: key, PublicURL: publicURL, Logger: a.Logger,
		Attest: opts, Version: cli.Stamp, ShutdownGrace: sf.shutdown})
	if err != nil {
		return err
	}
	if err := srv.Load(); err != nil {
		return err
	}
	hs := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(a.Logger.Handler(), slog.LevelWarn),
	}
	if sf.debugListen != "" {
		dctx, stopDebug := context.WithCancel(ctx)
		wait, err := debugserve.Serve(dctx, sf.debugListen, nil, a.Logger)
		if err != nil {
			stopDebug()
			return err
		}
		defer wait()
		defer stopDebug()
	}
	served := make(chan error, 1)
	go func() {
		if tlsConfig != nil {
			hs.TLSConfig = tlsConfig
			served <- hs.ServeTLS(ln, "", "")
			return
		}
		served <- hs.Serve(ln)
	}()
	a.Logger.Info("serving", "listen", ln.Addr().String(), "public_url", publicURL, "state_root", cf.stateRoot, "tls", sf.tlsCert != "")
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	a.Logger.Info("stopping: campaigns stay up unless --cleanup-on-exit", "cleanup_on_exit", sf.cleanupOnExit)
	// Stop accepting, end the proxy's sessions, give operations their
	// grace, then cancel them; the two run together because an operation
	// in flight holds its request open.
	sctx, cancel := context.WithTimeout(context.Background(), sf.shutdown+adapter.DefaultCleanupTimeout)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- hs.Shutdown(sctx) }()
	cerr := srv.Close(sctx)
	serr := <-shut
	<-served
	if err := errors.Join(cerr, serr); err != nil {
		a.Logger.Warn("shutdown", "err", err)
	}
	if sf.cleanupOnExit {
		cctx, cancel := context.WithTimeout(context.Background(), 2*adapter.DefaultCleanupTimeout)
		defer cancel()
		if err := srv.CleanupAll(cctx); err != nil {
			// The signal was serve's normal end: the status is the
			// cleanup's (1, not verified), not 130/143.
			return &stoppedError{fmt.Errorf("--cleanup-on-exit: %w", err)}
		}
	}
	a.Logger.Info("stopped")
	return nil
}

// checkListen refuses a --listen (and TLS flags) serve cannot use: a
// unix socket path that is not absolute (an empty one would be an
// abstract socket), TLS on a unix socket, a non-loopback address without
// TLS or --insecure-listen.
func (sf *serveFlags) checkListen() error {
	if (sf.tlsCert == "") != (sf.tlsKey == "") {
		return cli.Usagef("--tls-cert and --tls-key go together")
	}
	if path, ok := strings.CutPrefix(sf.listen, "unix://"); ok {
		if !filepath.IsAbs(path) {
			return cli.Usagef("--listen %s: the socket path must be absolute (unix:///path/to/api.sock)", sf.listen)
		}
		if sf.tlsCert != "" {
			return cli.Usagef("--listen %s: TLS is for TCP addresses", sf.listen)
		}
		return nil
	}
	host, port, err := net.SplitHostPort(sf.listen)
	if err != nil {
		return cli.Usagef("--listen %q: want host:port or unix:///path (%v)", sf.listen, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return cli.Usagef("--listen %q: want host:port or unix:///path (port %q is not a number in 0..65535)", sf.listen, port)
	}
	if !loopback(host) && sf.tlsCert == "" && !sf.insecure {
		return cli.Usagef("--listen %s is not a loopback address: give --tls-cert and --tls-key, or --insecure-listen to serve the token and capabilities in clear", sf.listen)
	}
	return nil
}

// tlsConfig loads --tls-cert and --tls-key (nil without them): files
// that cannot be read or do not pair are bad input, found before anything
// listens.
func (sf *serveFlags) tlsConfig() (*tls.Config, error) {
	if sf.tlsCert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(sf.tlsCert, sf.tlsKey)
	if err != nil {
		return nil, &cli.ExitError{Code: exitBadInput, Err: fmt.Errorf("--tls-cert %s, --tls-key %s: %w", sf.tlsCert, sf.tlsKey, err)}
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}, nil
}

// listener opens --listen (checked by checkListen) and returns the public
// URL base_urls use.
func (sf *serveFlags) listener() (net.Listener, string, error) {
	if path, ok := strings.CutPrefix(sf.listen, "unix://"); ok {
		ln, err := listenUnix(path)
		return ln, sf.publicURL, err
	}
	host, port, err := net.SplitHostPort(sf.listen)
	if err != nil {
		return nil, "", cli.Usagef("--listen %q: want host:port or unix:///path (%v)", sf.listen, err)
	}
	ln, err := net.Listen("tcp", sf.listen)
	if err != nil {
		return nil, "", fmt.Errorf("listen %s: %w", sf.listen, err)
	}
	public := sf.publicURL
	if public == "" {
		scheme := "http"
		if sf.tlsCert != "" {
			scheme = "https"
		}
		if host == "" || host == "0.0.0.0" || host == "::" {
			host = "127.0.0.1"
		}
		if p := ln.Addr().(*net.TCPAddr).Port; port == "0" {
			port = fmt.Sprint(p)
		}
		public = scheme + "://" + net.JoinHostPort(host, port)
	}
	return ln, public, nil
}

// loopback reports a loopback literal or localhost; a wildcard is not.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// listenUnix listens on a unix socket (mode 0600), replacing a stale
// socket nobody answers on, never another file.
func listenUnix(path string) (net.Listener, error) {
	if st, err := os.Stat(filepath.Dir(path)); err != nil || !st.IsDir() {
		return nil, &cli.ExitError{Code: exitBadInput, Err: fmt.Errorf("--listen unix://%s: no directory %s", path, filepath.Dir(path))}
	}
	if st, err := os.Lstat(path); err == nil {
		if st.Mode()&os.ModeSocket == 0 {
			return nil, &cli.ExitError{Code: exitBadInput, Err: fmt.Errorf("--listen unix://%s: exists and is not a socket", path)}
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("listen %s: %w: another process serves it", path, syscall.EADDRINUSE)
		}
		os.Remove(path)
	}
	old := syscall.Umask(0o177)
	ln, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	return ln, nil
}

// token reads the bearer token from --token-file or the --token-env
// variable; it is never taken from argv.
func (sf *serveFlags) token(getenv func(string) string) ([]byte, error) {
	var tok string
	var from string
	if sf.tokenFile != "" {
		b, err := readTokenFile(sf.tokenFile)
		if err != nil {
			return nil, err
		}
		tok, from = strings.TrimSpace(string(b)), "--token-file "+sf.tokenFile
	} else {
		tok, from = strings.TrimSpace(getenv(sf.tokenEnv)), "$"+sf.tokenEnv
	}
	pol := apikey.Token()
	if st := pol.Check(tok); !st.OK() {
		return nil, cli.Usagef("no usable bearer token: %s", pol.Refusal(from, st))
	}
	return []byte(tok), nil
}

// readTokenFile reads the token file at path: a regular file owned by
// this user with mode 0600 (a token another user owns, or can read, is
// not this service's secret), at most 64 KiB. Anything else is bad input
// (exit 2) naming the file and the fix.
func readTokenFile(path string) ([]byte, error) { return readPrivateFile("--token-file", path, 64<<10) }

// stoppedError is an error of what serve does after a signal asked it to
// stop (the --cleanup-on-exit removal): the signal is serve's normal end,
// so the error keeps its own exit status instead of 130/143.
type stoppedError struct{ err error }

func (e *stoppedError) Error() string { return e.err.Error() }
func (e *stoppedError) Unwrap() error { return e.err }
