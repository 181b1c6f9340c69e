package kube

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/campaign"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Defaults of a Config.
const (
	DefaultPrefix      = "agentpen"
	DefaultConcurrency = 32
	// MaxWorkspaces is the most workspaces (pool included) a campaign may
	// have on a cluster.
	MaxWorkspaces = 512
	// Finalizer is the finalizer every object the driver makes carries:
	// its deletion is two-phase, so an agentpen killed between the delete
	// and the object's end finds it terminating and finishes it by UID.
	Finalizer = "io.agentpen/custody"
)

// ErrUnreachable is returned (wrapped) when the API server does not
// answer.
var ErrUnreachable = driver.Kind("kubernetes API server unreachable", driver.ErrUnreachable)

// Config configures Open. Zero values take the defaults.
type Config struct {
	// Kubeconfig is the kubeconfig file (required): its current context
	// names the cluster and the credentials.
	Kubeconfig string
	// Prefix begins the name of every namespace the driver makes
	// (default DefaultPrefix): <prefix>-<16 digits of the instance>.
	Prefix string
	// NodeName, when set, places every pod on that node (a cluster
	// without a scheduler, as the one scripts/kube-node.sh runs); empty
	// leaves pods to the scheduler.
	NodeName string
	// SeccompProfile is the Localhost seccomp profile workspaces run
	// under, relative to the kubelet's seccomp root (the episode
	// namespaces need calls RuntimeDefault refuses); empty means
	// RuntimeDefault.
	SeccompProfile string
	// Concurrency bounds the driver's calls to the API server in flight
	// at once (default DefaultConcurrency); a call beyond it waits for a
	// slot.
	Concurrency int
}

// Driver is agentpen's driver of a Kubernetes cluster (package
// adapter/driver). Get one from Open; Close releases it.
type Driver struct {
	cfg  Config
	rest *rest.Config
	cs   kubernetes.Interface
	info driver.Info
	// slots bound the calls in flight (Config.Concurrency).
	slots chan struct{}
	// unplaced leaves workspace pods without a node (a test's campaign
	// wider than the kubelet takes, whose grader still runs).
	unplaced bool
}

var _ driver.Driver = (*Driver)(nil)

// Open reads the kubeconfig, asks the API server for its version and the
// cluster's identity (the kube-system namespace's UID), and returns the
// driver. On error nothing is left open.
func Open(ctx context.Context, cfg Config) (*Driver, error) {
	if cfg.Kubeconfig == "" {
		return nil, errors.New("kubernetes: no kubeconfig given")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if err := checkLabelValue("prefix", cfg.Prefix, 40); err != nil {
		return nil, err
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if _, err := os.Stat(cfg.Kubeconfig); err != nil {
		return nil, fmt.Errorf("kubernetes: kubeconfig: %w", err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: kubeconfig %s: %w", cfg.Kubeconfig, err)
	}
	// The driver bounds its own calls (Concurrency); client-go's default
	// rate limit (5 a second) would queue a campaign's creates silently.
	rc.QPS, rc.Burst = float32(10*cfg.Concurrency), 20*cfg.Concurrency
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: client: %w", err)
	}
	d := &Driver{cfg: cfg, rest: rc, cs: cs, slots: make(chan struct{}, cfg.Concurrency)}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		return nil, classify(fmt.Errorf("kubernetes: version of %s: %w", rc.Host, err))
	}
	ks, err := cs.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		return nil, classify(fmt.Errorf("kubernetes: the cluster's identity (namespace kube-system): %w", err))
	}
	d.info = driver.Info{
		Name: attest.RuntimeKubernetes,
		Runtime: attest.DaemonRecord{Driver: attest.RuntimeKubernetes, ID: "k8s-" + string(ks.UID), ServerVersion: v.GitVersion, RootDir: "namespace " + cfg.Prefix + "-*",
			Endpoint: rc.Host},
		Daemon: campaign.Daemon{ID: "k8s-" + string(ks.UID), Name: rc.Host, ServerVersion: v.GitVersion, APIVersion: v.GitVersion},
		// Pods go before the policies, secret and service account they
		// stand on, the namespace last.
		Kinds: []campaign.Kind{campaign.KindContainer, campaign.KindNetworkPolicy, campaign.KindSecret, campaign.KindServiceAccount, campaign.KindNamespace},
		// Attestable in the cluster's terms (attest/cluster.go); its
		// network policies are stored, and only probes could prove them
		// enforced (EnforcedNetworkPolicy false).
		Capabilities: driver.Capabilities{
			Attestable:        true,
			OwnUserNamespaces: true,
			BindAfterStart:    true,
			MaxWorkspaces:     MaxWorkspaces,
			Parallelism:       cfg.Concurrency,
		},
	}
	return d, nil
}

// Info is what the driver says of the cluster and of itself.
func (d *Driver) Info() driver.Info { return d.info }

// Close releases nothing: the client keeps no connection of its own.
func (d *Driver) Close() error { return nil }

// call runs fn in one of the driver's slots.
func (d *Driver) call(ctx context.Context, fn func() error) error {
	select {
	case d.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-d.slots }()
	return fn()
}

// kinded is an API error with the driver's kind of it.
type kinded struct{ kind, err error }

func (e *kinded) Error() string   { return e.err.Error() }
func (e *kinded) Unwrap() []error { return []error{e.kind, e.err} }

// classify gives an API server's error the driver's kind: NotFound;
// AlreadyExists (a name taken); Conflict (a precondition or a version
// that failed: changed); any other status of the server's own; or an
// API server that did not answer. A call that ended without an answer
// keeps no kind.
func classify(err error) error {
	var k error
	var st apierrors.APIStatus
	switch {
	case err == nil:
		return nil
	case errors.Is(err, driver.ErrNotFound), errors.Is(err, driver.ErrNameTaken), errors.Is(err, driver.ErrRefused),
		errors.Is(err, driver.ErrUnreachable), errors.Is(err, driver.ErrChanged):
		return err
	case apierrors.IsNotFound(err):
		k = driver.ErrNotFound
	case apierrors.IsAlreadyExists(err):
		k = driver.ErrNameTaken
	case apierrors.IsConflict(err):
		k = driver.ErrChanged
	case errors.As(err, &st):
		k = driver.ErrRefused
	case utilnet.IsConnectionRefused(err) || isDialError(err):
		return fmt.Errorf("%w: %w", ErrUnreachable, err)
	default:
		return err
	}
	return &kinded{k, err}
}

func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// checkLabelValue refuses what a label value (and a name made of it)
// cannot hold: at most max characters of [a-z0-9-], beginning and ending
// with a letter or digit.
func checkLabelValue(field, v string, max int) error {
	ok := v != "" && len(v) <= max && strings.Trim(v, "-") == v
	for _, c := range v {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			ok = false
		}
	}
	if !ok {
		return &campaign.ValidationError{Field: field, Value: v, Msg: fmt.Sprintf("a cluster's names hold at most %d characters of a-z, 0-9 and '-', beginning and ending with a letter or digit", max)}
	}
	return nil
}
