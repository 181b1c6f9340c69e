package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"

	"github.com/agentpen/agentpen/workbench/grader"
	"github.com/agentpen/agentpen/workbench/sandbox"
	"github.com/agentpen/agentpen/workbench/server"
)

const graderSynopsis = `Usage: workbench grader [flags]

Serves the grader: it holds the task catalogue's answer keys and grades
for episode servers started with "workbench serve --grader URL", so no key
enters the agent's container. GET /health and GET /docs are public;
POST /v1/score, /v1/cases and /v1/judge need the API key in the X-API-Key
header. The key is read from the environment variable --key-env names; it
is never logged. Connections are capped per peer and in all (--max-conns*);
as root, connections from sandbox uids on this host are closed at accept.
SIGTERM or SIGINT stops it (exit 0).

Flags:
`

// envName is what an environment variable name must look like.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// defaultKeyEnv is the variable the key is read from by default: the name
// in AGENTPEN_API_KEY_ENV (which the adapter sets in the server
// container), else grader.DefaultKeyEnv.
func defaultKeyEnv() string {
	if n := os.Getenv("AGENTPEN_API_KEY_ENV"); envName.MatchString(n) {
		return n
	}
	return grader.DefaultKeyEnv
}

func runGrader(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("grader", flag.ContinueOnError)
	var listen listFlag
	fs.Var(&listen, "listen", "address to serve on, repeatable: host:port, tcp://host:port or unix:///abs/path.sock (default :8080)")
	keyEnv := fs.String("key-env", defaultKeyEnv(), "name of the environment variable that holds the API key (default $AGENTPEN_API_KEY_ENV, else "+grader.DefaultKeyEnv+")")
	insecure := fs.Bool("insecure-no-key", false, "serve without a key when the variable is empty: every route is open (local tests only)")
	logFormat := fs.String("log-format", "text", "log format on stderr: text or json")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	maxConns := fs.Int("max-conns", 0, "most connections open at once; more are closed at accept (0: 1024, or half the open-file limit when less)")
	debugListen := fs.String("debug-listen", "", "serve net/http/pprof at /debug/pprof/ on this loopback address (127.0.0.1:6061); off by default")
	maxPerPeer := fs.Int("max-conns-per-peer", 0, "most connections open at once from one peer, a remote address or a local uid (0: 64)")
	if err := parseFlags(fs, args, stdout, stderr, graderSynopsis); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: grader takes no arguments, got %q", errUsage, fs.Args())
	}
	if *maxConns < 0 || *maxPerPeer < 0 {
		return fmt.Errorf("%w: --max-conns %d, --max-conns-per-peer %d: must not be negative", errUsage, *maxConns, *maxPerPeer)
	}
	if *debugListen != "" {
		if err := checkDebugAddr(*debugListen); err != nil {
			return err
		}
	}
	if !envName.MatchString(*keyEnv) {
		return fmt.Errorf("%w: --key-env %q: must name an environment variable", errUsage, *keyEnv)
	}
	log, err := newLogger(stderr, *logFormat, *logLevel)
	if err != nil {
		return err
	}
	key := os.Getenv(*keyEnv)
	if key == "" && !*insecure {
		return fmt.Errorf("grader: the API key variable %s is unset or empty; set it (or pass --insecure-no-key for local tests)", *keyEnv)
	}
	cfg := grader.ServerConfig{Key: key, InsecureNoKey: *insecure, MaxConns: *maxConns, MaxConnsPerPeer: *maxPerPeer, Logger: log}
	if sandbox.Available() {
		// On a host that runs episodes too, their code is refused at
		// accept; in a campaign the workspaces are remote peers.
		cfg.EpisodeUID = func(uid uint32) bool { return sandbox.IsSandboxUID(int(uid)) }
	}
	srv, err := grader.NewServer(cfg)
	if err != nil {
		return err
	}
	if len(listen) == 0 {
		listen = listFlag{":8080"}
	}
	var lns []net.Listener
	for _, addr := range listen {
		ln, err := server.Listen(ctx, addr)
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return err
		}
		lns = append(lns, ln)
	}
	log.Info("grader starting", "key_env", *keyEnv, "key_set", key != "")
	return serveWithDebug(ctx, *debugListen, cfg.EpisodeUID, log, lns, srv.Serve)
}
