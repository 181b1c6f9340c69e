package docker

import (
	"context"
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
	"strings"
	"syscall"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/campaign"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
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
	// ErrDaemonUnreachable: nothing answered on the socket (the driver's
	// ErrUnreachable).
	ErrDaemonUnreachable = driver.Kind("docker daemon unreachable", driver.ErrUnreachable)
	// ErrNotRootless: the daemon's /info does not list the rootless
	// security option.
	ErrNotRootless = errors.New("docker daemon is not rootless")
)

// dockerAPI is the part of the SDK client the driver calls. It grows with
// the driver, one method per call it makes, never the SDK's whole
// APIClient.
type dockerAPI interface {
	Ping(ctx context.Context) (types.Ping, error)
	Info(ctx context.Context) (system.Info, error)
	ImageList(ctx context.Context, options image.ListOptions) ([]image.Summary, error)
	ImageInspect(ctx context.Context, ref string, opts ...client.ImageInspectOption) (image.InspectResponse, error)
	NetworkCreate(ctx context.Context, name string, options network.CreateOptions) (network.CreateResponse, error)
	NetworkInspect(ctx context.Context, id string, options network.InspectOptions) (network.Inspect, error)
	NetworkInspectWithRaw(ctx context.Context, id string, options network.InspectOptions) (network.Inspect, []byte, error)
	NetworkRemove(ctx context.Context, id string) error
	NetworkList(ctx context.Context, options network.ListOptions) ([]network.Summary, error)
	NetworkConnect(ctx context.Context, networkID, containerID string, config *network.EndpointSettings) error
	ContainerCreate(ctx context.Context, cfg *container.Config, hc *container.HostConfig, nc *network.NetworkingConfig, platform *ocispec.Platform, name string) (container.CreateResponse, error)
	ContainerStart(ctx context.Context, id string, options container.StartOptions) error
	ContainerInspect(ctx context.Context, id string) (container.InspectResponse, error)
	ContainerInspectWithRaw(ctx context.Context, id string, size bool) (container.InspectResponse, []byte, error)
	ContainerRemove(ctx context.Context, id string, options container.RemoveOptions) error
	ContainerList(ctx context.Context, options container.ListOptions) ([]container.Summary, error)
	ContainerLogs(ctx context.Context, id string, options container.LogsOptions) (io.ReadCloser, error)
	ContainerExecCreate(ctx context.Context, id string, options container.ExecOptions) (container.ExecCreateResponse, error)
	ContainerExecAttach(ctx context.Context, execID string, options container.ExecAttachOptions) (types.HijackedResponse, error)
	ContainerExecInspect(ctx context.Context, execID string) (container.ExecInspect, error)
	// HTTPClient and ClientVersion let the attestation read the daemon's
	// answers as the daemon wrote them (rawGet).
	HTTPClient() *http.Client
	ClientVersion() string
	Close() error
}

var _ dockerAPI = (*client.Client)(nil)

// Driver is agentpen's driver of one validated rootless Docker daemon
// (package adapter/driver): a client pinned to it. Get one from Connect;
// Close releases its connections. Its exported fields may be set until
// the first method call; zero values take the defaults.
type Driver struct {
	// SubnetPool is where agent networks get their /28 subnets (default
	// DefaultSubnetPool); no subnet of any network on the daemon is reused.
	SubnetPool netip.Prefix
	// Logger receives what the driver did (a network created, a container
	// left alone); nil discards it. Secret values never reach it.
	Logger *slog.Logger

	api    dockerAPI
	host   Host
	daemon campaign.Daemon
	// realSocket is the socket's path with every symbolic link resolved
	// (host.SocketPath when it cannot be resolved: a test's transport).
	realSocket string
}

var _ driver.Driver = (*Driver)(nil)

// Daemon returns the identity Connect read.
func (d *Driver) Daemon() campaign.Daemon { return d.daemon }

// Host returns the endpoint the client is pinned to.
func (d *Driver) Host() Host { return d.host }

// RealSocketPath returns the daemon's socket path with every symbolic link
// resolved: the same for every spelling of DOCKER_HOST that reaches it
// through links. agentpen's daemon-wide directories (run directories,
// locks) are derived from it, never from the spelling.
func (d *Driver) RealSocketPath() string { return d.realSocket }

// Info is what the driver says of the daemon and of itself.
func (d *Driver) Info() driver.Info {
	return driver.Info{
		Name: attest.RuntimeDocker,
		Runtime: attest.DaemonRecord{Driver: attest.RuntimeDocker, ID: d.daemon.ID, ServerVersion: d.daemon.ServerVersion, RootDir: d.daemon.DockerRootDir,
			Rootless: d.daemon.Rootless, Endpoint: d.host.URL},
		Daemon:     d.daemon,
		SocketPath: d.host.SocketPath,
		RunBase:    d.runBase(),
		Kinds:      []campaign.Kind{campaign.KindContainer, campaign.KindDir, campaign.KindNetwork},
		Capabilities: driver.Capabilities{
			HostSockets:           true,
			Attestable:            true,
			PrivilegedExec:        true,
			StreamingExec:         true,
			EnforcedNetworkPolicy: true,
			MaxWorkspaces:         campaign.MaxWorkspaces,
		},
	}
}

func (d *Driver) log() *slog.Logger {
	if d.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return d.Logger
}

// Close releases the client's idle connections.
func (d *Driver) Close() error { return d.api.Close() }

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
func Connect(ctx context.Context, host Host) (*Driver, error) {
	return connect(ctx, host, nil)
}

func connect(ctx context.Context, host Host, httpClient *http.Client) (*Driver, error) {
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
	return &Driver{api: c, host: host, daemon: d, realSocket: real}, nil
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

// short is an id as docker ps shows it (12 digits); a path stays whole.
func short(id string) string {
	if len(id) > 12 && !strings.Contains(id, "/") {
		return id[:12]
	}
	return id
}
