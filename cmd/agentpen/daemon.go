package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/agentpen/agentpen/adapter/driver"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/adapter/docker"
	"github.com/agentpen/agentpen/adapter/kube"
	"github.com/agentpen/agentpen/internal/cli"
)

// daemonFix is the one command that starts (or finds) the rootless daemon
// and prints the DOCKER_HOST to use; every DOCKER_HOST and daemon error
// ends with it.
const daemonFix = `start or find the rootless daemon: eval "$(scripts/rootless-docker.sh)"`

// fixedError is an error followed by what to do about it.
type fixedError struct {
	err error
	fix string
}

func (e *fixedError) Error() string { return e.err.Error() + "; " + e.fix }
func (e *fixedError) Unwrap() error { return e.err }

// withFix ends a DOCKER_HOST or daemon error with the fix (daemonFix, and
// for a socket path that does not look rootless, --allow-custom-socket
// first); other errors are returned as they are.
func withFix(err error) error {
	var he *docker.HostError
	switch {
	case errors.Is(err, docker.ErrHostNotRootless):
		return &fixedError{err, "if it is one, pass --allow-custom-socket; otherwise " + daemonFix}
	case errors.As(err, &he), errors.Is(err, adapter.ErrDaemonUnreachable), errors.Is(err, docker.ErrNotRootless):
		return &fixedError{err, daemonFix}
	}
	return err
}

// connect resolves DOCKER_HOST and connects to the rootless daemon it
// names; an error says what to do.
func connect(ctx context.Context, getenv func(string) string, allowCustom bool) (*docker.Driver, error) {
	host, err := docker.HostFromEnv(getenv, allowCustom)
	if err != nil {
		return nil, withFix(err)
	}
	d, err := docker.Connect(ctx, host)
	if err != nil {
		return nil, withFix(err)
	}
	return d, nil
}

// runtimeFlags choose the runtime a command's campaigns run on: the
// rootless Docker daemon DOCKER_HOST names, or, with --kubeconfig (or
// AGENTPEN_KUBECONFIG), a Kubernetes cluster. Never the one for the other:
// a cluster that does not answer is an error, not a fall back to Docker.
type runtimeFlags struct {
	allowCustom bool
	kubeconfig  string
	kubeNode    string
	kubeSeccomp string
	kubePrefix  string
}

// Variables that stand for the cluster flags when they are not given
// (scripts/kube-node.sh env prints them for the project's node).
const (
	EnvKubeconfig  = "AGENTPEN_KUBECONFIG"
	EnvKubeNode    = "AGENTPEN_KUBE_NODE"
	EnvKubeSeccomp = "AGENTPEN_KUBE_SECCOMP"
)

func (r *runtimeFlags) register(fs *cli.FlagSet, getenv func(string) string) {
	fs.BoolVar(&r.allowCustom, "allow-custom-socket", false, "accept a DOCKER_HOST socket path that does not look rootless (the daemon must still say rootless)")
	fs.StringVar(&r.kubeconfig, "kubeconfig", getenv(EnvKubeconfig), "act on the Kubernetes cluster this kubeconfig names instead of the rootless Docker daemon (default $"+EnvKubeconfig+"; docs/kubernetes.md)")
	fs.StringVar(&r.kubeNode, "kube-node", getenv(EnvKubeNode), "with --kubeconfig: place every pod on this node (a cluster without a scheduler; empty: the scheduler places them; default $"+EnvKubeNode+")")
	fs.StringVar(&r.kubeSeccomp, "kube-seccomp", getenv(EnvKubeSeccomp), "with --kubeconfig: the workspaces' Localhost seccomp profile, relative to the kubelet's seccomp root (empty: RuntimeDefault, which the episode namespaces need more than; default $"+EnvKubeSeccomp+")")
	fs.StringVar(&r.kubePrefix, "kube-prefix", kube.DefaultPrefix, "with --kubeconfig: the prefix of every namespace agentpen makes")
}

// openRuntime opens the chosen runtime's driver; an error says what to do.
func (r *runtimeFlags) openRuntime(ctx context.Context, getenv func(string) string, log *slog.Logger) (driver.Driver, error) {
	if r.kubeconfig != "" {
		return r.openCluster(ctx)
	}
	d, err := connect(ctx, getenv, r.allowCustom)
	if err != nil {
		return nil, err
	}
	d.Logger = log
	return d, nil
}

// openCluster opens the driver of the cluster --kubeconfig names.
func (r *runtimeFlags) openCluster(ctx context.Context) (*kube.Driver, error) {
	d, err := kube.Open(ctx, kube.Config{Kubeconfig: r.kubeconfig, NodeName: r.kubeNode, SeccompProfile: r.kubeSeccomp, Prefix: r.kubePrefix})
	if err != nil {
		return nil, fmt.Errorf("%w (the cluster --kubeconfig names; start the project's node with make kube-node)", err)
	}
	return d, nil
}
