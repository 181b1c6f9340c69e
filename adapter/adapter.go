package adapter

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/agentpen/agentpen/api"
	"github.com/agentpen/agentpen/apikey"
	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/store"
)

// Defaults of an Adapter.
const (
	DefaultReadyTimeout = 60 * time.Second
	DefaultParallelism  = 8
	rollbackTimeout     = 90 * time.Second
)

// Adapter is agentpen's engine: it brings campaigns up on one runtime
// (its Driver), records everything it creates in each campaign's journal,
// attests, claims, reconciles and removes them. Its exported fields may be
// set until the first method call; zero values take the defaults.
type Adapter struct {
	// Driver is the runtime (required): adapter/docker's for a rootless
	// Docker daemon.
	Driver driver.Driver
	// LockBase is where the runtime-wide locks and claims live (default
	// store.DefaultLockBase: /run/agentpen for root), in a directory
	// named by the runtime's identity, so every agentpen on one runtime,
	// whatever its state root, shares them.
	LockBase string
	// Logger receives progress; nil discards it. Secret values never reach it.
	Logger *slog.Logger
	// Getenv reads agentpen's environment for API keys and secret_env; nil
	// means os.Getenv.
	Getenv func(string) string
	// ReadyTimeout bounds waiting for each container's readiness (default
	// 60 s).
	ReadyTimeout time.Duration
	// Parallelism bounds the creates, starts and network joins of a
	// bring-up in flight at once (default: the driver's
	// Capabilities.Parallelism, else DefaultParallelism: on a 2-core
	// host the daemon is the bottleneck from about 4 on, and 8 had the
	// best median; see docs/bench.md).
	Parallelism int
	// CleanupTimeout bounds one cleanup, retries of transient daemon
	// errors included (default DefaultCleanupTimeout).
	CleanupTimeout time.Duration
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
	// claims are the campaigns' warm claims in this process, by key
	// (claims.go).
	claimsMu sync.Mutex
	claims   map[string]*claimQueue
	// holds are the campaigns' locks as this process holds them, by key
	// (hold.go).
	holdsMu sync.Mutex
	holds   map[string]*campaignHolds
	// gitCache holds the git audits of this adapter's attestations that
	// passed, for the next ones (attest.GitCache); gitMu guards it.
	gitMu    sync.Mutex
	gitCache attest.GitCache

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
	// NetworkIDs are the agents' networks, in agent order, where the
	// runtime makes networks (none for campaign.TopologyNone).
	NetworkIDs []string
	ServerID   string
	Workspaces []Workspace
}

// Workspace is one workspace of a campaign: what the launcher API, agentpen
// up and ls describe it with (api.Workspace), and the driver's handle on
// it.
type Workspace struct {
	api.Workspace
	// Handle is how the driver reaches it (Dial, Bind, Activity, Results).
	Handle driver.Workspace `json:"-"`
	// UIDBase is the first uid of its block (campaign.UIDBlockSize uids).
	UIDBase int `json:"-"`
	// Workbench is true when it runs the workbench (the default command),
	// false for a launcher's own command.
	Workbench bool `json:"-"`
}

// workspace describes the plan's workspace ag, bound to task, reached
// through h.
func workspace(ag campaign.AgentPlan, task string, h driver.Workspace) Workspace {
	return Workspace{
		Workspace: api.Workspace{Index: ag.Index, AgentID: ag.AgentID, TaskID: task, ContainerID: h.ID, Socket: h.Socket, Pooled: ag.Pool},
		Handle:    h, UIDBase: ag.UIDBase, Workbench: ag.NeedsKey,
	}
}

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
		a.locksVal, a.locksErr = store.OpenLocks(base, daemonKey(a.Driver.Info().Runtime.ID))
	})
	return a.locksVal, a.locksErr
}

// lockCampaign takes the campaign's daemon-wide lock.
func (a *Adapter) lockCampaign(ctx context.Context, c *store.Campaign) (*store.Lock, error) {
	return a.lockKey(ctx, c.Key)
}

// lockKey takes the lock of the campaign whose key (campaign.Key) is
// key alone (hold.go), waiting at most store.DefaultLockWait.
func (a *Adapter) lockKey(ctx context.Context, key string) (*store.Lock, error) {
	l, err := a.locks()
	if err != nil {
		return nil, err
	}
	return a.takeAlone(key, func() (*store.Lock, error) { return l.Campaign(ctx, key, store.DefaultLockWait) })
}

// daemonKey names a runtime's lock directory: "daemon-" and 16 hex digits
// of the SHA-256 of its identity (a Docker /info ID holds ':' and is
// long).
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

// Kinds of error the engine passes on from its driver (package
// adapter/driver), under the names agentpen's commands and service know.
var (
	// ErrDaemonUnreachable: the runtime did not answer (the launcher
	// answers 503, the CLI exits 3).
	ErrDaemonUnreachable = driver.ErrUnreachable
	// ErrNotReady: a container did not become ready before ReadyTimeout.
	ErrNotReady = driver.ErrNotReady
)

// Locks opens, once, the runtime-wide lock directory: every campaign's
// lock, the allocation locks and the uid-block claims that every agentpen
// on this runtime shares (store.Locks).
func (a *Adapter) Locks() (*store.Locks, error) { return a.locks() }
