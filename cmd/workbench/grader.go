package main

import (
	"context"
	"errors"
	"io"

	"github.com/agentpen/agentpen/apikey"
	"github.com/agentpen/agentpen/internal/cli"
	"github.com/agentpen/agentpen/workbench/grader"
	"github.com/agentpen/agentpen/workbench/sandbox"
)

const graderHelp = `Serves the grader: it holds the task catalogue's answer keys and grades
for episode servers started with "workbench serve --grader URL", so no key
enters the agent's container. GET /health and GET /docs are public;
POST /v1/score, /v1/cases and /v1/judge need the API key in the X-API-Key
header. The key is read from the environment variable --key-env names; it
is never logged, and one shorter than 24 characters or a known placeholder
is refused (make one: openssl rand -hex 32). Connections are capped per peer and in all (--max-conns*);
as root, connections from sandbox uids on this host are closed at accept.
SIGTERM or SIGINT stops it (exit 0).`

// graderOptions are `workbench grader`'s flags.
type graderOptions struct {
	listen      cli.StringList
	keyEnv      string
	insecure    bool
	logFormat   string
	logLevel    string
	maxConns    int
	maxPerPeer  int
	debugListen string
}

func (o *graderOptions) register(fs *cli.FlagSet) {
	fs.Var(&o.listen, "listen", "address to serve on, repeatable: host:port, tcp://host:port or unix:///abs/path.sock (default :8080)")
	fs.StringVar(&o.keyEnv, "key-env", "", "name of the environment variable that holds the API key (default $AGENTPEN_API_KEY_ENV, else "+grader.DefaultKeyEnv+")")
	fs.BoolVar(&o.insecure, "insecure-no-key", false, "serve without a key when the variable is empty: every route is open (local tests only)")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format on stderr: text or json")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.IntVar(&o.maxConns, "max-conns", 0, "most connections open at once; more are closed at accept (0: 1024, or half the open-file limit when less)")
	fs.IntVar(&o.maxPerPeer, "max-conns-per-peer", 0, "most connections open at once from one peer, a remote address or a local uid (0: 64)")
	fs.StringVar(&o.debugListen, "debug-listen", "", "serve net/http/pprof at /debug/pprof/ on this loopback address (127.0.0.1:6061); off by default")
}

// checkGraderKey refuses a key the policy agentpen up and the attestation
// apply refuses (apikey.Default: unset, a placeholder, or short), with the
// command that makes one. An unset key is allowed with --insecure-no-key;
// a bad key never is.
func checkGraderKey(variable, key string, insecure bool) error {
	if key == "" && insecure {
		return nil
	}
	p := apikey.Default()
	if msg := p.Refusal(variable, p.Check(key)); msg != "" {
		if key == "" {
			msg += " (or pass --insecure-no-key for local tests)"
		}
		return errors.New(msg)
	}
	return nil
}

// validate checks the flags and fills the defaults: the key variable is
// the name in AGENTPEN_API_KEY_ENV (which the adapter sets in the server
// container), else grader.DefaultKeyEnv.
func (o *graderOptions) validate(getenv func(string) string) error {
	if o.keyEnv == "" {
		o.keyEnv = grader.DefaultKeyEnv
		if n := getenv("AGENTPEN_API_KEY_ENV"); isEnvName(n) {
			o.keyEnv = n
		}
	}
	if !isEnvName(o.keyEnv) {
		return cli.Usagef("--key-env %q: must name an environment variable", o.keyEnv)
	}
	if o.maxConns < 0 || o.maxPerPeer < 0 {
		return cli.Usagef("--max-conns %d, --max-conns-per-peer %d: must not be negative", o.maxConns, o.maxPerPeer)
	}
	if o.debugListen != "" {
		if err := checkDebugAddr(o.debugListen); err != nil {
			return err
		}
	}
	if len(o.listen) == 0 {
		o.listen = cli.StringList{":8080"}
	}
	return nil
}

func runGrader(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	var o graderOptions
	fs := cli.NewFlagSet(prog, "grader", "[flags]", graderHelp, stdout)
	o.register(fs)
	if _, err := fs.Parse(args, 0, 0); err != nil {
		return err
	}
	if err := o.validate(getenv); err != nil {
		return err
	}
	log, err := newLogger(stderr, o.logFormat, o.logLevel)
	if err != nil {
		return err
	}
	key := getenv(o.keyEnv)
	if err := checkGraderKey(o.keyEnv, key, o.insecure); err != nil {
		return err
	}
	cfg := grader.ServerConfig{Key: key, InsecureNoKey: o.insecure, MaxConns: o.maxConns, MaxConnsPerPeer: o.maxPerPeer, Logger: log}
	if sandbox.Available() {
		// On a host that runs episodes too, their code is refused at
		// accept; in a campaign the workspaces are remote peers.
		cfg.EpisodeUID = func(uid uint32) bool { return sandbox.IsSandboxUID(int(uid)) }
	}
	srv, err := grader.NewServer(cfg)
	if err != nil {
		return err
	}
	lns, err := listenAll(ctx, o.listen)
	if err != nil {
		return err
	}
	log.Info("grader starting", "key_env", o.keyEnv, "key_set", key != "")
	return serveWithDebug(ctx, o.debugListen, cfg.EpisodeUID, log, lns, srv.Serve)
}
