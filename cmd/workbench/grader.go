package main

import (
	"context"
	"fmt"
	"io"

	"github.com/agentpen/agentpen/internal/cli"
	"github.com/agentpen/agentpen/workbench/grader"
)

const graderHelp = `Serves the grader: it holds the task catalogue's answer keys and grades
for episode servers started with "workbench serve --grader URL", so no key
enters the agent's container. GET /health and GET /docs are public;
POST /v1/score, /v1/cases and /v1/judge need the API key in the X-API-Key
header. The key is read from the environment variable --key-env names; it
is never logged. SIGTERM or SIGINT stops it (exit 0).`

// graderOptions are `workbench grader`'s flags.
type graderOptions struct {
	listen    listFlag
	keyEnv    string
	insecure  bool
	logFormat string
	logLevel  string
}

func (o *graderOptions) register(fs *cli.FlagSet) {
	fs.Var(&o.listen, "listen", "address to serve on, repeatable: host:port, tcp://host:port or unix:///abs/path.sock (default :8080)")
	fs.StringVar(&o.keyEnv, "key-env", "", "name of the environment variable that holds the API key (default $AGENTPEN_API_KEY_ENV, else "+grader.DefaultKeyEnv+")")
	fs.BoolVar(&o.insecure, "insecure-no-key", false, "serve without a key when the variable is empty: every route is open (local tests only)")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format on stderr: text or json")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
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
	if len(o.listen) == 0 {
		o.listen = listFlag{":8080"}
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
	if key == "" && !o.insecure {
		return fmt.Errorf("grader: the API key variable %s is unset or empty; set it (or pass --insecure-no-key for local tests)", o.keyEnv)
	}
	srv, err := grader.NewServer(grader.ServerConfig{Key: key, InsecureNoKey: o.insecure, Logger: log})
	if err != nil {
		return err
	}
	lns, err := listenAll(ctx, o.listen)
	if err != nil {
		return err
	}
	log.Info("grader starting", "key_env", o.keyEnv, "key_set", key != "")
	return srv.Serve(ctx, lns...)
}
