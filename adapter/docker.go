package adapter

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/agentpen/agentpen/campaign"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"
)

// Timeouts of the pinned client. A single request's own ctx bounds it further.
const (
	// DialTimeout bounds connecting to the daemon's socket.
	DialTimeout = 5 * time.Second
	// ProbeTimeout bounds the ping and /info of Connect.
	ProbeTimeout = 15 * time.Second
)

// Daemon kinds of error, returned wrapped by Connect.
var (
	// ErrDaemonUnreachable: nothing answered on the socket.
	ErrDaemonUnreachable = errors.New("docker daemon unreachable")
	// ErrNotRootless: the daemon's /info does not list the rootless
	// security option.
	ErrNotRootless = errors.New("docker daemon is not rootless")
)

// dockerAPI is the part of the SDK client the adapter calls. It grows with
// the adapter, one method per call it makes, never the SDK's whole
// APIClient.
type dockerAPI interface {
	Ping(ctx context.Context) (types.Ping, error)
	Info(ctx context.Context) (system.Info, error)
	ImageList(ctx context.Context, options image.ListOptions) ([]image.Summary, error)
	// HTTPClient and ClientVersion let the attestation read the daemon's
	// answers as the daemon wrote them (rawGet).
	HTTPClient() *http.Client
	ClientVersion() string
	Close() error
	campaignAPI
}

var _ dockerAPI = (*client.Client)(nil)

// Docker is a client pinned to one validated rootless daemon. Get one from
// Connect; Close releases its connections.
type Docker struct {
	api    dockerAPI
	host   Host
	daemon campaign.Daemon
	// realSocket is the socket's path with every symbolic link resolved
	// (host.SocketPath when it cannot be resolved: a test's transport).
	realSocket string
}

// Daemon returns the identity Connect read.
func (d *Docker) Daemon() campaign.Daemon { return d.daemon }

// Host returns the endpoint the client is pinned to.
func (d *Docker) Host() Host { return d.host }

// RealSocketPath returns the daemon's socket path with every symbolic link
// resolved: the same for every spelling of DOCKER_HOST that reaches it
// through links. agentpen's daemon-wide directories (run directories,
// locks) are derived from it, never from the spelling.
func (d *Docker) RealSocketPath() string { return d.realSocket }

// sdk is the SDK client, for the adapter's own calls.
func (d *Docker) sdk() dockerAPI { return d.api }

// Close releases the client's idle connections.
func (d *Docker) Close() error { return d.api.Close() }

// newSDKClient builds the SDK client from host alone, never from the
// environment: API-version negotiation (the daemon here speaks 1.41), a
// bounded dial, and httpClient when a test injects a transport.
func newSDKClient(host Host, httpClient *http.Client) (*client.Client, error) {
	opts := []client.Opt{
		client.WithHost(host.URL),
		client.WithAPIVersionNegotiation(),
	}
	if httpClient != nil {
		opts = append(opts, client.WithHTTPClient(httpClient))
	} else {
		dialer := &net.Dialer{Timeout: DialTimeout}
		sock := host.SocketPath
		opts = append(opts, client.WithDialContext(func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "unix", sock)
		}))
	}
	c, err := client.NewClientWithOpts(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker client for %s: %w", host, err)
	}
	return c, nil
}

// Connect builds the pinned client for host, pings the daemon, reads /info
// and refuses a daemon that is not rootless. The returned Docker is ready
// for use; on error nothing is left open.
func Connect(ctx context.Context, host Host) (*Docker, error) {
	return connect(ctx, host, nil)
}

func connect(ctx context.Context, host Host, httpClient *http.Client) (*Docker, error) {
	if host.SocketPath == "" {
		return nil, &HostError{Err: ErrHostUnset}
	}
	c, err := newSDKClient(host, httpClient)
	if err != nil {
		return nil, err
	}
	real, err := realSocket(host)
	if err != nil {
		c.Close()
		return nil, err
	}
	d, err := identify(ctx, c, host)
	if err != nil {
		c.Close()
		return nil, err
	}
	return &Docker{api: c, host: host, daemon: d, realSocket: real}, nil
}

// realSocket resolves the symbolic links of host's socket path, and
// refuses a socket with more than one hard link: agentpen derives its
// daemon-wide locks from the socket's real path, and another link would be
// another real path to the same daemon. A path that does not exist is
// left as it is (the ping says what is wrong).
func realSocket(host Host) (string, error) {
	real, err := filepath.EvalSymlinks(host.SocketPath)
	if err != nil {
		return host.SocketPath, nil
	}
	if fi, err := os.Stat(real); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
			return "", &HostError{Value: host.URL, Err: fmt.Errorf("%w: %s has %d hard links", ErrHostLinked, real, st.Nlink)}
		}
	}
	return real, nil
}

// identify pings api and reads the daemon identity from /info.
func identify(ctx context.Context, api interface {
	Ping(context.Context) (types.Ping, error)
	Info(context.Context) (system.Info, error)
	ClientVersion() string
}, host Host) (campaign.Daemon, error) {
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	if _, err := api.Ping(ctx); err != nil {
		return campaign.Daemon{}, unreachable(ctx, host, err)
	}
	info, err := api.Info(ctx)
	if err != nil {
		return campaign.Daemon{}, fmt.Errorf("info %s: %w", host, err)
	}
	d := daemonFromInfo(info)
	d.APIVersion = api.ClientVersion()
	if !d.Rootless {
		return campaign.Daemon{}, fmt.Errorf("%w: %s answers as server %s with security options %v", ErrNotRootless, host, orUnknown(d.ServerVersion), d.SecurityOpts)
	}
	return d, nil
}

// unreachable is the error of a ping that failed: ErrDaemonUnreachable,
// the socket, and why, said once. The SDK's own text for a failed
// connection repeats the socket and drops the reason ("Cannot connect to
// the Docker daemon at unix://... Is the docker daemon running?"), so the
// reason is the system's answer to a dial of the socket itself.
func unreachable(ctx context.Context, host Host, err error) error {
	why := err.Error()
	if client.IsErrConnectionFailed(err) {
		why = "no answer"
		var d net.Dialer
		dctx, cancel := context.WithTimeout(ctx, DialTimeout)
		defer cancel()
		if c, derr := d.DialContext(dctx, "unix", host.SocketPath); derr != nil {
			why = dialReason(derr)
		} else {
			c.Close()
		}
	}
	return fmt.Errorf("%w at %s: %s", ErrDaemonUnreachable, host, why)
}

// dialReason is the reason of a failed dial without the address the
// message already names: "no such file or directory", "connection
// refused", "permission denied".
func dialReason(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		var se *os.SyscallError
		if errors.As(op.Err, &se) {
			return se.Err.Error()
		}
		return op.Err.Error()
	}
	return err.Error()
}

// daemonFromInfo reads the identity out of /info. Rootless is true only when
// a security option is exactly name=rootless.
func daemonFromInfo(info system.Info) campaign.Daemon {
	d := campaign.Daemon{
		ID:            info.ID,
		Name:          info.Name,
		ServerVersion: info.ServerVersion,
		DockerRootDir: info.DockerRootDir,
		CgroupDriver:  info.CgroupDriver,
		CgroupVersion: info.CgroupVersion,
		SecurityOpts:  slices.Clone(info.SecurityOptions),
		Warnings:      slices.Clone(info.Warnings),
	}
	for _, opt := range info.SecurityOptions {
		for _, kv := range strings.Split(opt, ",") {
			if kv == "name=rootless" {
				d.Rootless = true
			}
		}
	}
	cgroups := info.CgroupDriver != "" && info.CgroupDriver != "none"
	d.MemoryLimitEnforced = cgroups && info.MemoryLimit
	d.PidsLimitEnforced = cgroups && info.PidsLimit
	return d
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// Images returns the local images whose repository is under prefix
// ("agentpen/"), as "repo:tag" -> image id, sorted by the caller.
func (d *Docker) Images(ctx context.Context, prefix string) (map[string]string, error) {
	list, err := d.api.ImageList(ctx, image.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	out := map[string]string{}
	for _, img := range list {
		for _, tag := range img.RepoTags {
			if strings.HasPrefix(tag, prefix) {
				out[tag] = img.ID
			}
		}
	}
	return out, nil
}
