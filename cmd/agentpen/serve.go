package main

import (
	"context"
	"crypto/ed25519"
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
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentpen/agentpen/adapter/docker"
	"github.com/agentpen/agentpen/internal/httpserve"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/apikey"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/custody"
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
--insecure-listen is given. Every route but /healthz and the proxy's needs a bearer token, read
from the file --token-file names (this user's, mode 0600) or from the environment variable
--token-env names (default AGENTPEN_SERVE_TOKEN); never from the command line. A token has at
least 32 characters, 10 distinct ones and 128 bits estimated from its length and the kinds of
characters it uses (openssl rand -hex 32 makes one); a weaker one is refused. The proxy's credential is
the capability in each base_url, derived from a server key kept in <state root>/keys/server.key
(0600), so base_urls survive a restart.

Tokens per launcher: the file (or the variable) holds one name:token per line; a line starting
with # is a comment, blank lines are ignored. A name is a lower-case letter or digit, then up to
63 of lower-case letters, digits, - and _. Each launcher's token sees and acts only on the
campaigns it created (another's is a 404, as an unknown id; a create of its id is a 409 saying
the id is taken); the token named operator sees and acts on every campaign, those agentpen up
made included, and alone reads /metrics. A file holding one bare token (no name) is the operator's.
A name or a token given twice, a bare token among named ones, or a token that fails the rule above
is refused (exit 2) naming the line and the name, never the token. Names, never tokens, are in the
log (caller), the events and the journal (a campaign's owner):

  # /etc/agentpen/tokens (mode 0600)
  operator:<openssl rand -hex 32>
  team-a:<openssl rand -hex 32>
  team-b:<openssl rand -hex 32>

Campaigns have lifetimes: a spec's ttl_seconds (counted from its create's acceptance) and
idle_timeout_seconds (no reset or step, through the proxy or a workspace's socket), or --ttl and
--idle-timeout for a spec that gives none, at most --max-ttl and --max-idle-timeout; PATCH
/v1/campaigns/{id} changes them. A campaign whose lifetime is over is removed as DELETE removes
it (reason ttl or idle), within seconds of its deadline; so is one agentpen up made with a
lifetime in its spec. Its events warn (expiring) --expiry-warning before. A spec's
launcher_timeout_seconds ties the campaign to the launcher that creates it: once that token has
held no event stream of it and sent no keepalive (POST /v1/campaigns/{id}/keepalive) for that
long, it is removed (reason launcher_gone); a restart gives every launcher that long to return. At start every campaign of the state root is reconciled with its journal,
as agentpen reconcile does: a bring-up that did not finish (a serve killed mid-create) is rolled
back, a removal that did not finish is finished, an expired campaign removed, the rest served.

SIGINT or SIGTERM stops it gracefully: proxy sessions are closed (1001), operations in flight
get --shutdown-timeout to finish (then a bring-up is cancelled and rolls back), and every
campaign stays up and journalled, unless --cleanup-on-exit removes them (verified). One
serve per state root: it holds <state root>/api/serve.lock while it runs.

At start it checks what every create needs: the grader's API key in the variable --api-key-env
names (default AGENTPEN_API_KEY; the key of every spec that names no server.api_key_env), set,
not a placeholder and long enough; the key the reports are signed with (--signing-key, this
user's alone, or else the state root's, made then if it has none); and the daemon, which must
answer and be rootless.

It logs (slog, --log-format text or json, on stderr) its start (address, state root, version,
the signing key's id, the tokens' names), every create, delete, attestation (campaign, outcome,
duration, caller), every request (its route, never its path; its caller's name; a refused one
with its class: invalid, unauthorized, not_found, conflict, ...), and its stop. No line holds a
token, a key, a capability or a task id.

Exit status: 0 stopped cleanly, 1 failure (with --cleanup-on-exit: a cleanup not verified,
even after SIGINT/SIGTERM), 2 bad input (flags, the token, TLS files, the server key, the
signing key, the grader's key unset or unfit, a daemon that is not rootless), 3 daemon
unreachable, 4 conflict (another agentpen serve holds the state root, or the address is in
use), 130/143 interrupted while starting.`

type serveFlags struct {
	apiKeyEnv               string
	lifetime                campaign.LifetimePolicy
	listen, publicURL       string
	tokenFile, tokenEnv     string
	tlsCert, tlsKey         string
	debugListen             string
	insecure, cleanupOnExit bool
	shutdown, readyTimeout  time.Duration
	expiryWarning           time.Duration
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
	fs.StringVar(&sf.apiKeyEnv, "api-key-env", campaign.DefaultAPIKeyEnv, "the variable of this environment that holds the grader's API key for a spec that names none (its server.api_key_env); checked at start")
	fs.StringVar(&sf.listen, "listen", defaultListen, "address to listen on: host:port, or unix:///path/to/api.sock")
	fs.StringVar(&sf.publicURL, "public-url", "", "the URL clients reach the service at, the prefix of every base_url (default: from --listen; with a unix socket, base_urls are paths)")
	fs.StringVar(&sf.tokenFile, "token-file", "", "file holding the bearer tokens, name:token per line, or one bare token, the operator's (mode 0600); overrides --token-env")
	fs.StringVar(&sf.tokenEnv, "token-env", defaultTokenEnv, "environment variable holding the bearer tokens (as --token-file's content)")
	fs.StringVar(&sf.tlsCert, "tls-cert", "", "TLS certificate file (with --tls-key: serve HTTPS)")
	fs.StringVar(&sf.tlsKey, "tls-key", "", "TLS private key file")
	fs.StringVar(&sf.debugListen, "debug-listen", "", "serve net/http/pprof at /debug/pprof/ on this loopback address (127.0.0.1:6060); off by default")
	fs.BoolVar(&sf.insecure, "insecure-listen", false, "allow a non-loopback address without TLS (the token and capabilities then travel in clear)")
	fs.BoolVar(&sf.cleanupOnExit, "cleanup-on-exit", false, "when it stops, remove every campaign of the state root that is not removed (by exact id, verified)")
	fs.DurationVar(&sf.shutdown, "shutdown-timeout", launcher.DefaultShutdownGrace, "how long operations in flight may take to finish when stopping")
	fs.DurationVar(&sf.readyTimeout, "ready-timeout", adapter.DefaultReadyTimeout, "how long each container may take to become ready")
	fs.IntVar(&sf.parallel, "parallel", 0, "workspaces created at once, per campaign (0: the runtime's: 8 on a daemon, 32 on a cluster)")
	fs.DurationVar(&sf.lifetime.DefaultTTL, "ttl", defaultTTL, "the lifetime of a campaign whose spec gives no ttl_seconds, counted from its create's acceptance (0: none)")
	fs.DurationVar(&sf.lifetime.MaxTTL, "max-ttl", defaultMaxTTL, "the most a spec's ttl_seconds (or a PATCH) may ask for (0: no maximum, and a campaign may have none)")
	fs.DurationVar(&sf.lifetime.DefaultIdle, "idle-timeout", defaultIdle, "remove a campaign whose spec gives no idle_timeout_seconds once no reset or step reached it for this long (0: never)")
	fs.DurationVar(&sf.lifetime.MaxIdle, "max-idle-timeout", defaultMaxIdle, "the most a spec's idle_timeout_seconds (or a PATCH) may ask for (0: no maximum, and a campaign may have none)")
	fs.DurationVar(&sf.expiryWarning, "expiry-warning", launcher.DefaultExpiryWarning, "how long before a ttl or idle removal a campaign's events warn that it is expiring (at most half its limit before; 0: never)")
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
	if err := sf.checkLifetime(); err != nil {
		return err
	}
	if sf.expiryWarning < 0 {
		return cli.Usagef("--expiry-warning %v: must not be negative (0: never)", sf.expiryWarning)
	}
	if sf.expiryWarning == 0 {
		sf.expiryWarning = -1 // never: the service's zero is its default
	}
	if err := campaign.CheckEnvName("--api-key-env", sf.apiKeyEnv); err != nil {
		return &cli.ExitError{Code: exitBadInput, Err: err}
	}
	// The service's token never reaches a container, whatever a spec or
	// the allow-list says; the grader's key variable serve is told to use
	// is allowed with the rest.
	allowed := sf.allowEnv
	if sf.apiKeyEnv != campaign.DefaultAPIKeyEnv {
		allowed = append(slices.Clone(allowed), sf.apiKeyEnv)
	}
	envPolicy := campaign.EnvPolicy{Allowed: allowed, Forbidden: []string{sf.tokenEnv}}
	if err := campaign.CheckEnvPolicy(envPolicy); err != nil {
		return cli.Usagef("%v", err)
	}
	tokens, err := sf.tokens(getenv)
	if err != nil {
		return err
	}
	tlsConfig, err := sf.tlsConfig()
	if err != nil {
		return err
	}
	// The operator's signing key, when one is named, is read before
	// anything else of the state: a key others can read is bad input.
	signingKey, err := cf.operatorKey()
	if err != nil {
		return err
	}
	log, err := cf.serveLogger(stderr)
	if err != nil {
		return err
	}
	// The state root is checked before anything in it is opened, made
	// or read; then one service per state root, taken before the server
	// key can be made and before anything listens: a second one would
	// answer from its own memory for campaigns the first changes.
	root, lock, err := cf.rootAlone()
	if err != nil {
		return err
	}
	defer root.Close()
	defer lock.Unlock()
	// What every create needs, checked before anything listens: the
	// grader's key (then the daemon, below). A service that would answer
	// every create with an error does not start.
	if err := checkServeKey(sf.apiKeyEnv, getenv); err != nil {
		return err
	}
	// Every create signs its reports: with the operator's key, else the
	// state root's, made now if it has none.
	if signingKey == nil {
		if signingKey, err = root.SigningKey(); err != nil {
			return err
		}
	}
	ln, publicURL, err := sf.listener()
	if err != nil {
		return err
	}
	defer ln.Close()
	d, err := cf.openRuntime(ctx, getenv, log)
	if errors.Is(err, docker.ErrNotRootless) {
		// A daemon that answers but is not rootless is the wrong daemon:
		// bad input, as a wrong DOCKER_HOST is.
		return &cli.ExitError{Code: exitBadInput, Err: err}
	}
	if err != nil {
		return err
	}
	defer d.Close()
	a := &adapter.Adapter{Driver: d, Logger: log, Getenv: getenv, ReadyTimeout: sf.readyTimeout, Parallelism: sf.parallel, EnvPolicy: envPolicy, SigningKey: signingKey}
	// The service hands out attested campaigns only: on a runtime that
	// cannot attest one, every create would be refused after its
	// bring-up.
	if err := a.CheckAttestable(); err != nil {
		return fmt.Errorf("agentpen serve: %w", err)
	}
	key, err := root.Secret(launcher.KeyFile, launcher.KeyBytes)
	if err != nil {
		return err
	}
	srv, err := launcher.New(launcher.Config{Adapter: a, Root: root, Tokens: tokens, Key: key, PublicURL: publicURL, Logger: log,
		Attest: opts, Version: cli.Stamp, ShutdownGrace: sf.shutdown, APIKeyEnv: sf.apiKeyEnv, Lifetime: sf.lifetime, ExpiryWarning: sf.expiryWarning})
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
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	if sf.debugListen != "" {
		dctx, stopDebug := context.WithCancel(ctx)
		wait, err := debugserve.Serve(dctx, sf.debugListen, nil, log)
		if err != nil {
			stopDebug()
			return err
		}
		defer wait()
		defer stopDebug()
	}
	started := time.Now()
	log.Info("agentpen serve started", "listen", ln.Addr().String(), "public_url", publicURL, "state_root", root.Path(),
		"version", cli.Stamp, "daemon", a.Driver.Info().Runtime.Endpoint, "api_key_env", sf.apiKeyEnv, "tls", sf.tlsCert != "",
		"signing_key_id", custody.KeyID(signingKey.Public().(ed25519.PublicKey)), "tokens", tokens.Names())
	// Stop accepting, end the proxy's sessions, give operations their
	// grace, then cancel them; the two run together because an operation
	// in flight holds its request open.
	err = httpserve.Serve(ctx, hs, []net.Listener{ln}, httpserve.Options{
		Name: "serve", TLS: tlsConfig, ShutdownTimeout: sf.shutdown + adapter.DefaultCleanupTimeout,
		Stop: func(sctx context.Context) error {
			log.Info("agentpen serve stopping: campaigns stay up unless --cleanup-on-exit", "cleanup_on_exit", sf.cleanupOnExit)
			return srv.Close(sctx)
		},
	})
	if ctx.Err() == nil {
		// A listener failed: serving ended before any signal.
		return err
	}
	if err != nil {
		log.Warn("shutdown", "err", err)
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
	log.Info("agentpen serve stopped", "uptime_s", int64(time.Since(started).Seconds()))
	return nil
}

// The operator's lifetime policy by default: a campaign through the API
// lives at most a week, and a day unless it asks; idle for an hour
// (no reset or step), it is removed.
const (
	defaultTTL     = 24 * time.Hour
	defaultMaxTTL  = 7 * 24 * time.Hour
	defaultIdle    = time.Hour
	defaultMaxIdle = 24 * time.Hour
)

// checkLifetime refuses a lifetime policy that cannot be: negative, a
// default over its maximum, or under a spec's own bounds.
func (sf *serveFlags) checkLifetime() error {
	l := sf.lifetime
	for _, c := range []struct {
		name       string
		def, max   time.Duration
		minSeconds int
	}{{"ttl", l.DefaultTTL, l.MaxTTL, campaign.MinTTLSeconds}, {"idle-timeout", l.DefaultIdle, l.MaxIdle, campaign.MinIdleTimeoutSeconds}} {
		switch {
		case c.def < 0 || c.max < 0:
			return cli.Usagef("--%s %v, --max-%s %v: must not be negative", c.name, c.def, c.name, c.max)
		case c.def != 0 && c.def < time.Duration(c.minSeconds)*time.Second, c.max != 0 && c.max < time.Duration(c.minSeconds)*time.Second:
			return cli.Usagef("--%s %v, --max-%s %v: at least %d s each (0: none)", c.name, c.def, c.name, c.max, c.minSeconds)
		case c.max != 0 && (c.def == 0 || c.def > c.max):
			return cli.Usagef("--%s %v is over --max-%s %v (a campaign that asks for nothing gets the default)", c.name, c.def, c.name, c.max)
		case c.max > time.Duration(campaign.MaxTTLSeconds)*time.Second || c.def > time.Duration(campaign.MaxTTLSeconds)*time.Second:
			return cli.Usagef("--%s %v, --max-%s %v: at most %d s", c.name, c.def, c.name, c.max, campaign.MaxTTLSeconds)
		}
	}
	return nil
}

// checkServeKey refuses to serve when the grader's key variable (the
// default one every spec that names none uses) is unset, a placeholder
// or too short: every create would fail. The message names the variable
// and how to make a key, never a value.
func checkServeKey(name string, getenv func(string) string) error {
	policy := apikey.Default()
	if st := policy.Check(getenv(name)); !st.OK() {
		return &cli.ExitError{Code: exitBadInput, Err: fmt.Errorf("the grader's API key: %s (or name another variable with --api-key-env)", policy.Refusal(name, st))}
	}
	return nil
}

// serveLogger is serve's log on stderr: every start, stop, operation and
// request (slog, at info), as text or JSON (--log-format).
func (c *campaignFlags) serveLogger(stderr io.Writer) (*slog.Logger, error) {
	switch c.logFormat {
	case "text":
		return slog.New(slog.NewTextHandler(stderr, nil)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(stderr, nil)), nil
	}
	return nil, cli.Usagef("--log-format %q: want text or json", c.logFormat)
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

// tokens reads the bearer tokens from --token-file or the --token-env
// variable (launcher.ParseTokens: named lines, or one bare token, the
// operator's); they are never taken from argv.
func (sf *serveFlags) tokens(getenv func(string) string) (*launcher.Tokens, error) {
	var text, from string
	if sf.tokenFile != "" {
		b, err := readTokenFile(sf.tokenFile)
		if err != nil {
			return nil, err
		}
		text, from = string(b), "--token-file "+sf.tokenFile
	} else {
		text, from = getenv(sf.tokenEnv), "$"+sf.tokenEnv
	}
	toks, err := launcher.ParseTokens(from, text)
	if err != nil {
		return nil, cli.Usagef("no usable bearer token: %v", err)
	}
	return toks, nil
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
