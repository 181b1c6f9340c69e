package adapter

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/agentpen/agentpen/apikey"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/store"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Defaults of an Adapter.
const (
	DefaultReadyTimeout = 60 * time.Second
	DefaultParallelism  = 8
	rollbackTimeout     = 90 * time.Second
)

// campaignAPI is what bring-up, readiness and removal call on the SDK
// client.
type campaignAPI interface {
	ImageInspect(ctx context.Context, ref string, opts ...client.ImageInspectOption) (image.InspectResponse, error)
	NetworkCreate(ctx context.Context, name string, options network.CreateOptions) (network.CreateResponse, error)
	NetworkInspect(ctx context.Context, id string, options network.InspectOptions) (network.Inspect, error)
	NetworkRemove(ctx context.Context, id string) error
	ContainerCreate(ctx context.Context, cfg *container.Config, hc *container.HostConfig, nc *network.NetworkingConfig, platform *ocispec.Platform, name string) (container.CreateResponse, error)
	ContainerStart(ctx context.Context, id string, options container.StartOptions) error
	ContainerInspect(ctx context.Context, id string) (container.InspectResponse, error)
	ContainerInspectWithRaw(ctx context.Context, id string, size bool) (container.InspectResponse, []byte, error)
	NetworkInspectWithRaw(ctx context.Context, id string, options network.InspectOptions) (network.Inspect, []byte, error)
	ContainerRemove(ctx context.Context, id string, options container.RemoveOptions) error
	ContainerList(ctx context.Context, options container.ListOptions) ([]container.Summary, error)
	NetworkList(ctx context.Context, options network.ListOptions) ([]network.Summary, error)
	NetworkConnect(ctx context.Context, networkID, containerID string, config *network.EndpointSettings) error
	ContainerLogs(ctx context.Context, id string, options container.LogsOptions) (io.ReadCloser, error)
	ContainerExecCreate(ctx context.Context, id string, options container.ExecOptions) (container.ExecCreateResponse, error)
	ContainerExecAttach(ctx context.Context, execID string, options container.ExecAttachOptions) (types.HijackedResponse, error)
	ContainerExecInspect(ctx context.Context, execID string) (container.ExecInspect, error)
}

var _ campaignAPI = (*client.Client)(nil)

// Adapter brings campaigns up on one validated rootless daemon and records
// everything it creates in each campaign's journal. Its exported fields
// may be set until the first method call; zero values take the defaults.
type Adapter struct {
	// Docker is the pinned client (required).
	Docker *Docker
	// LockBase is where the daemon-wide locks and claims live (default
	// store.DefaultLockBase: /run/agentpen for root), in a directory
	// named by the daemon's identity, so every agentpen on one daemon,
	// whatever its state root, shares them.
	LockBase string
	// Logger receives progress; nil discards it. Secret values never reach it.
	Logger *slog.Logger
	// Getenv reads agentpen's environment for API keys and secret_env; nil
	// means os.Getenv.
	Getenv func(string) string
	// ReadyTimeout bounds waiting for each container's health (default 60 s).
	ReadyTimeout time.Duration
	// Parallelism bounds the creates, starts and network joins of a
	// bring-up in flight at once (default DefaultParallelism: on a
	// 2-core host the daemon is the bottleneck from about 4 on, and 8 had
	// the best median; see docs/bench.md).
	Parallelism int
	// CleanupTimeout bounds one cleanup, retries of transient daemon
	// errors included (default DefaultCleanupTimeout).
	CleanupTimeout time.Duration
	// SubnetPool is where agent networks get their /28 subnets (default
	// DefaultSubnetPool); no subnet of any network on the daemon is reused.
	SubnetPool netip.Prefix
	// KeyPolicy says which API keys are placeholders; nil means
	// apikey.Default().
	KeyPolicy *apikey.Policy
	// EnvPolicy says which of agentpen's environment variables a campaign
	// may copy into its containers (server.secret_env,
	// server.api_key_env); the zero value allows the grader key only.
	EnvPolicy campaign.EnvPolicy
	// SigningKey signs the statement of every report (its DSSE envelope,
	// beside it); nil means the campaign's state root's key
	// (store.Root.SigningKey, made at first use).
	SigningKey ed25519.PrivateKey
	locksOnce  sync.Once
	locksVal   *store.Locks
	locksErr   error
	// resultsOnce makes results, the collector CollectResults uses.
	resultsOnce sync.Once
	results     *ResultsCollector

	// Journalled, when set, receives every record this adapter appends to
	// a campaign's journal, once it is on disk, in order (the journal's
	// lock is held: it must return quickly). The CLI shows a campaign's
	// events from it (package events).
	Journalled func(campaignID string, r campaign.Record)

	// Progress, when set, receives each step of a bring-up (every network
	// and container created, every container ready) and of a cleanup
	// (every journalled resource done with), one call at a time, from the
	// goroutine doing the work: it must return quickly.
	Progress func(Progress)
}

// Campaign is a brought-up campaign: the plan and the ids of what exists.
type Campaign struct {
	Plan *campaign.Plan
	// Dir is the campaign's state directory.
	Dir string
	// NetworkIDs are the agents' networks, in agent order (none for
	// campaign.TopologyNone).
	NetworkIDs []string
	// GraderDir is the host directory of the grader's socket
	// (campaign.TopologyNone; "" otherwise).
	GraderDir  string
	ServerID   string
	Workspaces []Workspace
}

// Workspace is one workspace of a campaign: the one object agentpen up's
// JSON, agentpen ls --json and the launcher API describe a workspace with.
type Workspace struct {
	Index   int    `json:"index" doc:"Position in the spec's workspaces"`
	AgentID string `json:"agent_id" doc:"Opaque agent id: the only name the workspace has on the daemon"`
	TaskID  string `json:"task_id" doc:"The task the workspace is bound to (every reset serves it). For the trainer, not the agent"`
	// ContainerID is its container's id on the daemon.
	ContainerID string `json:"container_id" doc:"Its container's id on the daemon"`
	// Socket is the workbench's unix socket on the host (the CLI's way
	// in); BaseURL the launcher API's (set by the service).
	Socket  string `json:"socket,omitempty" doc:"The workbench's unix socket on the service's host"`
	BaseURL string `json:"base_url,omitempty" doc:"OpenEnv base_url: GenericEnvClient(base_url=...) appends /ws. Its last segment is the workspace's capability: keep it secret"`
	// RunDir is the host directory mounted at /run/workbench.
	RunDir string `json:"-"`
	// UIDBase is the first uid of its block (campaign.UIDBlockSize uids).
	UIDBase int `json:"-"`
	// Workbench is true when it runs the workbench (the default command),
	// false for a launcher's own command.
	Workbench bool `json:"-"`
	// Pooled is true for a workspace taken from the campaign's pool
	// (campaign.Plan.PoolAgent), bound to TaskID when it was claimed.
	Pooled bool `json:"pooled,omitempty" doc:"Taken from the campaign's pool and bound to its task when it was claimed"`
}

func (a *Adapter) api() campaignAPI { return a.Docker.sdk() }

func (a *Adapter) log() *slog.Logger {
	if a.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return a.Logger
}

func (a *Adapter) keyPolicy() apikey.Policy {
	if a.KeyPolicy == nil {
		return apikey.Default()
	}
	return *a.KeyPolicy
}

func (a *Adapter) getenv(k string) string {
	if a.Getenv == nil {
		return os.Getenv(k)
	}
	return a.Getenv(k)
}

// locks opens, once, the daemon-wide lock directory of the daemon.
func (a *Adapter) locks() (*store.Locks, error) {
	a.locksOnce.Do(func() {
		base := a.LockBase
		if base == "" {
			base, a.locksErr = store.DefaultLockBase(a.getenv)
			if a.locksErr != nil {
				return
			}
		}
		a.locksVal, a.locksErr = store.OpenLocks(base, daemonKey(a.Docker.Daemon().ID))
	})
	return a.locksVal, a.locksErr
}

// lockCampaign takes the campaign's daemon-wide lock.
func (a *Adapter) lockCampaign(ctx context.Context, c *store.Campaign) (*store.Lock, error) {
	return a.lockKey(ctx, c.Key)
}

// lockKey takes the lock of the campaign whose key (campaign.Key) is
// key, waiting at most store.DefaultLockWait.
func (a *Adapter) lockKey(ctx context.Context, key string) (*store.Lock, error) {
	l, err := a.locks()
	if err != nil {
		return nil, err
	}
	return l.Campaign(ctx, key, store.DefaultLockWait)
}

// daemonKey names a daemon's lock directory: "daemon-" and 16 hex digits
// of the SHA-256 of its /info ID (which holds ':' and is long).
func daemonKey(id string) string {
	sum := sha256.Sum256([]byte("agentpen-daemon\x00" + id))
	return "daemon-" + hex.EncodeToString(sum[:8])
}

func short(id string) string {
	if len(id) > 12 && !strings.Contains(id, "/") {
		return id[:12]
	}
	return id
}
