package adapter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sync/errgroup"
)

// KindDir is the journal kind of a host directory agentpen made for a
// workspace (its /run/workbench).
const KindDir = "dir"

// Defaults of an Adapter.
const (
	DefaultReadyTimeout = 60 * time.Second
	DefaultParallelism  = 4
	rollbackTimeout     = 90 * time.Second
)

// ErrCampaignExists is returned by BringUp when the campaign's directory
// already journals resources that were not removed.
var ErrCampaignExists = errors.New("campaign already exists")

// ErrNotReady is returned (wrapped) when a container did not become ready
// before the deadline.
var ErrNotReady = errors.New("not ready")

// campaignAPI is what bring-up calls on the SDK client.
type campaignAPI interface {
	ImageInspect(ctx context.Context, ref string, opts ...client.ImageInspectOption) (image.InspectResponse, error)
	NetworkCreate(ctx context.Context, name string, options network.CreateOptions) (network.CreateResponse, error)
	NetworkInspect(ctx context.Context, id string, options network.InspectOptions) (network.Inspect, error)
	NetworkRemove(ctx context.Context, id string) error
	ContainerCreate(ctx context.Context, cfg *container.Config, hc *container.HostConfig, nc *network.NetworkingConfig, platform *ocispec.Platform, name string) (container.CreateResponse, error)
	ContainerStart(ctx context.Context, id string, options container.StartOptions) error
	ContainerInspect(ctx context.Context, id string) (container.InspectResponse, error)
	ContainerRemove(ctx context.Context, id string, options container.RemoveOptions) error
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
	// StateRoot holds one directory per campaign (required).
	StateRoot string
	// Logger receives progress; nil discards it. Secret values never reach it.
	Logger *slog.Logger
	// Getenv reads agentpen's environment for API keys and secret_env; nil
	// means os.Getenv.
	Getenv func(string) string
	// ReadyTimeout bounds waiting for each container's health (default 60 s).
	ReadyTimeout time.Duration
	// Parallelism bounds concurrent workspace creates (default 4).
	Parallelism int
}

// Campaign is a brought-up campaign: the plan and the ids of what exists.
type Campaign struct {
	Plan       *Plan
	Dir        string
	NetworkID  string
	ServerID   string
	Workspaces []Workspace
}

// Workspace is one running workspace container.
type Workspace struct {
	AgentID     string
	ContainerID string
	// RunDir is the host directory mounted at /run/workbench; Socket is the
	// workbench's unix socket in it.
	RunDir string
	Socket string
}

func (a *Adapter) api() campaignAPI { return a.Docker.api }

func (a *Adapter) log() *slog.Logger {
	if a.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return a.Logger
}

func (a *Adapter) getenv(k string) string {
	if a.Getenv == nil {
		return os.Getenv(k)
	}
	return a.Getenv(k)
}

// CampaignDir returns the state directory of a campaign id.
func (a *Adapter) CampaignDir(campaignID string) string {
	return filepath.Join(a.StateRoot, "campaigns", CampaignKey(campaignID))
}

// runRoot is where workspaces' /run/workbench directories live: beside the
// daemon's socket, in the rootless user's runtime directory, which the
// daemon can always reach for bind mounts (a root-only state root cannot).
func (a *Adapter) runRoot(p *Plan) string {
	return filepath.Join(filepath.Dir(a.Docker.host.SocketPath), "agentpen", p.Key)
}

// BringUp validates spec, journals and creates the campaign's network,
// server and workspaces, and waits until each is ready. On any failure
// (including ctx cancellation) it removes what it created, by exact id, and
// says so in the journal; the error names the failing resource.
func (a *Adapter) BringUp(ctx context.Context, spec CampaignSpec) (*Campaign, error) {
	p, err := NewPlan(spec)
	if err != nil {
		return nil, err
	}
	if err := a.checkKey(p); err != nil {
		return nil, err
	}
	if err := a.checkImages(ctx, p); err != nil {
		return nil, err
	}
	dir := a.CampaignDir(p.CampaignID)
	if recs, err := ReadJournal(filepath.Join(dir, JournalFile)); err == nil {
		for _, r := range Resources(recs) {
			if !r.Removed {
				return nil, fmt.Errorf("campaign %q (%s): %w; clean it up first", p.CampaignID, dir, ErrCampaignExists)
			}
		}
	}
	j, err := OpenJournal(dir)
	if err != nil {
		return nil, err
	}
	defer j.Close()
	if err := writeSpec(dir, spec); err != nil {
		return nil, err
	}
	c := &Campaign{Plan: p, Dir: dir}
	if err := j.Append(Record{Op: OpNote, Note: fmt.Sprintf("bring-up started: %d workspaces, egress %s", len(p.Agents), p.Egress)}); err != nil {
		return nil, err
	}
	if err := a.bringUp(ctx, j, c); err != nil {
		a.log().Warn("bring-up failed; rolling back", "campaign", p.CampaignID, "err", err)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		rbErr := a.rollback(rctx, j)
		os.Remove(a.runRoot(p)) // only when empty
		note := "bring-up failed: " + err.Error() + "; rolled back"
		if rbErr != nil {
			note += " with errors: " + rbErr.Error()
		}
		j.Append(Record{Op: OpNote, Note: note})
		return nil, errors.Join(err, rbErr)
	}
	j.Append(Record{Op: OpNote, Note: "ready"})
	a.log().Info("campaign ready", "campaign", p.CampaignID, "network", c.NetworkID, "workspaces", len(c.Workspaces))
	return c, nil
}

func writeSpec(dir string, spec CampaignSpec) error {
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return fmt.Errorf("campaign spec: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "campaign.json"), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write campaign spec: %w", err)
	}
	return nil
}

// checkKey refuses a campaign whose default grader or episode servers need
// the API key when agentpen's environment does not hold it: they would
// refuse to start, after everything was created.
func (a *Adapter) checkKey(p *Plan) error {
	needs := p.Server.NeedsKey
	for _, ag := range p.Agents {
		needs = needs || ag.NeedsKey
	}
	if needs && a.getenv(p.Server.Spec.APIKeyEnv) == "" {
		return invalid("server.api_key_env", p.Server.Spec.APIKeyEnv, "is unset or empty in agentpen's environment; the grader and the workspaces' episode servers need it")
	}
	return nil
}

// checkImages refuses a campaign whose images are not present locally:
// nothing is ever pulled.
func (a *Adapter) checkImages(ctx context.Context, p *Plan) error {
	refs := map[string]string{p.Server.Spec.Image: "server.image"}
	for _, ag := range p.Agents {
		refs[ag.Spec.Image] = fmt.Sprintf("workspaces[%d].image", ag.Index)
	}
	for _, ref := range sortedKeys(refs) {
		if _, err := a.api().ImageInspect(ctx, ref); err != nil {
			if cerrdefs.IsNotFound(err) {
				return invalid(refs[ref], ref, "no such image on the daemon (agentpen never pulls; build or load it first)")
			}
			return fmt.Errorf("inspect image %s: %w", ref, err)
		}
	}
	return nil
}

func (a *Adapter) bringUp(ctx context.Context, j *Journal, c *Campaign) error {
	p := c.Plan
	api := a.api()
	// Network.
	if err := j.Append(Record{Op: OpIntent, Kind: KindNetwork, Role: RoleNetwork, Name: p.Network.Name, Labels: p.Network.Labels}); err != nil {
		return err
	}
	resp, err := api.NetworkCreate(ctx, p.Network.Name, networkCreateOptions(p))
	if err != nil {
		j.Append(Record{Op: OpCreateFailed, Kind: KindNetwork, Name: p.Network.Name, Note: err.Error()})
		a.adoptNetwork(j, p)
		return fmt.Errorf("create network %s: %w", p.Network.Name, err)
	}
	c.NetworkID = resp.ID
	if err := j.Append(Record{Op: OpCreated, Kind: KindNetwork, Name: p.Network.Name, ID: resp.ID}); err != nil {
		return err
	}
	a.log().Info("network created", "name", p.Network.Name, "id", short(resp.ID), "internal", p.Network.Internal)

	// Server.
	apiKey := a.getenv(p.Server.Spec.APIKeyEnv)
	secrets := map[string]string{}
	for _, k := range p.Server.Spec.SecretEnv {
		if v := a.getenv(k); v != "" {
			secrets[k] = v
		}
	}
	srvID, err := a.createStart(ctx, j, serverSpec(p, apiKey, secrets, a.Docker.host.SocketPath))
	if err != nil {
		return err
	}
	c.ServerID = srvID

	// Workspaces, concurrently with a bound.
	c.Workspaces = make([]Workspace, len(p.Agents))
	g, gctx := errgroup.WithContext(ctx)
	limit := a.Parallelism
	if limit <= 0 {
		limit = DefaultParallelism
	}
	g.SetLimit(limit)
	for i, ag := range p.Agents {
		g.Go(func() error {
			runDir, err := a.makeRunDir(j, p, ag)
			if err != nil {
				return err
			}
			id, err := a.createStart(gctx, j, workspaceSpec(p, ag, runDir, apiKey))
			if err != nil {
				return err
			}
			c.Workspaces[i] = Workspace{AgentID: ag.AgentID, ContainerID: id, RunDir: runDir, Socket: filepath.Join(runDir, filepath.Base(WorkbenchSocket))}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}

	// Readiness.
	g, gctx = errgroup.WithContext(ctx)
	g.SetLimit(limit + 1)
	g.Go(func() error { return a.waitServer(gctx, c) })
	for _, ws := range c.Workspaces {
		g.Go(func() error { return a.waitWorkspace(gctx, ws) })
	}
	return g.Wait()
}

// createStart journals the intent, creates and starts one container, and
// journals its id. A create that failed may still have made the container
// (a cancelled call): adopt looks it up by name and records it only when
// its labels prove it is this campaign's.
func (a *Adapter) createStart(ctx context.Context, j *Journal, s containerSpec) (string, error) {
	api := a.api()
	if err := j.Append(Record{Op: OpIntent, Kind: KindContainer, Role: s.Role, Name: s.Name, Labels: s.Config.Labels}); err != nil {
		return "", err
	}
	resp, err := api.ContainerCreate(ctx, s.Config, s.HostConfig, s.Networking, nil, s.Name)
	if err != nil {
		j.Append(Record{Op: OpCreateFailed, Kind: KindContainer, Name: s.Name, Note: err.Error()})
		if !cerrdefs.IsConflict(err) {
			a.adoptContainer(j, s)
		}
		return "", fmt.Errorf("create %s: %w", s, err)
	}
	if err := j.Append(Record{Op: OpCreated, Kind: KindContainer, Role: s.Role, Name: s.Name, ID: resp.ID}); err != nil {
		return resp.ID, err
	}
	a.log().Info("container created", "role", s.Role, "name", s.Name, "id", short(resp.ID))
	if err := api.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		return resp.ID, fmt.Errorf("start %s %s: %w", s.Role, s.Name, err)
	}
	return resp.ID, nil
}

// adoptContainer records a container a failed create left behind, when its
// labels prove ownership.
func (a *Adapter) adoptContainer(j *Journal, s containerSpec) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := a.api().ContainerInspect(ctx, s.Name)
	if err != nil || info.Config == nil || !labelsMatch(info.Config.Labels, s.Config.Labels) {
		return
	}
	j.Append(Record{Op: OpCreated, Kind: KindContainer, Role: s.Role, Name: s.Name, ID: info.ID, Note: "found after a failed create"})
}

func (a *Adapter) adoptNetwork(j *Journal, p *Plan) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := a.api().NetworkInspect(ctx, p.Network.Name, network.InspectOptions{})
	if err != nil || info.Name != p.Network.Name || !labelsMatch(info.Labels, p.Network.Labels) {
		return
	}
	j.Append(Record{Op: OpCreated, Kind: KindNetwork, Role: RoleNetwork, Name: p.Network.Name, ID: info.ID, Note: "found after a failed create"})
}

// labelsMatch reports whether have carries every io.agentpen.* label of
// want with the same value.
func labelsMatch(have, want map[string]string) bool {
	n := 0
	for k, v := range want {
		if strings.HasPrefix(k, ReservedLabelPrefix) {
			if have[k] != v {
				return false
			}
			n++
		}
	}
	return n > 0
}

// makeRunDir creates the workspace's /run/workbench on the host: 0700,
// owned by the daemon's user (container root), journalled for cleanup.
func (a *Adapter) makeRunDir(j *Journal, p *Plan, ag AgentPlan) (string, error) {
	root := a.runRoot(p)
	dir := filepath.Join(root, ag.AgentID)
	if err := j.Append(Record{Op: OpIntent, Kind: KindDir, Role: RoleWork, Name: dir}); err != nil {
		return "", err
	}
	st, err := os.Stat(a.Docker.host.SocketPath)
	if err != nil {
		return "", fmt.Errorf("stat docker socket: %w", err)
	}
	sys, _ := st.Sys().(*syscall.Stat_t)
	for _, d := range []string{filepath.Dir(root), root, dir} {
		if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("workspace run dir %s: %w", d, err)
		}
		if sys != nil {
			if err := os.Lchown(d, int(sys.Uid), int(sys.Gid)); err != nil {
				return "", fmt.Errorf("workspace run dir %s: %w", d, err)
			}
		}
	}
	if err := j.Append(Record{Op: OpCreated, Kind: KindDir, Role: RoleWork, Name: dir, ID: dir}); err != nil {
		return "", err
	}
	return dir, nil
}

// waitServer runs the readiness command in the server container until it
// exits 0.
func (a *Adapter) waitServer(ctx context.Context, c *Campaign) error {
	cmd := c.Plan.Server.Spec.ReadyCommand
	var last error
	err := a.poll(ctx, func(ctx context.Context) (bool, error) {
		code, out, err := a.Exec(ctx, c.ServerID, cmd)
		if err != nil {
			last = err
			return false, nil
		}
		if code != 0 {
			last = fmt.Errorf("exit %d: %s", code, strings.TrimSpace(truncate(out, 200)))
			return false, nil
		}
		return true, nil
	}, c.ServerID)
	if err != nil {
		return fmt.Errorf("server %s: %w (last probe: %v)%s", c.Plan.Server.Name, err, last, a.tail(c.ServerID))
	}
	return nil
}

// waitWorkspace polls GET /health on the workbench's unix socket.
func (a *Adapter) waitWorkspace(ctx context.Context, ws Workspace) error {
	hc := UnixHTTPClient(ws.Socket, 2*time.Second)
	defer hc.CloseIdleConnections()
	var last error
	err := a.poll(ctx, func(ctx context.Context) (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://workbench/health", nil)
		resp, err := hc.Do(req)
		if err != nil {
			last = err
			return false, nil
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			last = fmt.Errorf("status %d", resp.StatusCode)
			return false, nil
		}
		return true, nil
	}, ws.ContainerID)
	if err != nil {
		return fmt.Errorf("workspace %s (container %s): %w (last check: %v)%s", ws.AgentID, short(ws.ContainerID), err, last, a.tail(ws.ContainerID))
	}
	return nil
}

// poll calls check until it reports ready, the container stops running, or
// ReadyTimeout passes.
func (a *Adapter) poll(ctx context.Context, check func(context.Context) (bool, error), id string) error {
	timeout := a.ReadyTimeout
	if timeout <= 0 {
		timeout = DefaultReadyTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	delay := 50 * time.Millisecond
	for {
		ok, err := check(ctx)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if info, err := a.api().ContainerInspect(ctx, id); err == nil && info.State != nil && !info.State.Running {
			return fmt.Errorf("%w: container exited (status %d)", ErrNotReady, info.State.ExitCode)
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%w after %s", ErrNotReady, timeout)
			}
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, time.Second)
	}
}

// tail returns the container's last log lines as an error suffix.
func (a *Adapter) tail(id string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rc, err := a.api().ContainerLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: "15"})
	if err != nil {
		return ""
	}
	defer rc.Close()
	var out bytes.Buffer
	stdcopy.StdCopy(&out, &out, io.LimitReader(rc, 64<<10))
	if out.Len() == 0 {
		return "; no log output"
	}
	return "; last log lines:\n" + strings.TrimRight(out.String(), "\n")
}

// Exec runs cmd in the container with the given id and returns its exit
// code and combined output (at most 1 MiB). This is how the host reaches a
// server that publishes no port.
func (a *Adapter) Exec(ctx context.Context, id string, cmd []string) (int, string, error) {
	api := a.api()
	ex, err := api.ContainerExecCreate(ctx, id, container.ExecOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return -1, "", fmt.Errorf("exec create in %s: %w", short(id), err)
	}
	att, err := api.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		return -1, "", fmt.Errorf("exec attach in %s: %w", short(id), err)
	}
	defer att.Close()
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(&out, &out, io.LimitReader(att.Reader, 1<<20))
		done <- err
	}()
	select {
	case err = <-done:
	case <-ctx.Done():
		att.Close()
		<-done
		return -1, out.String(), ctx.Err()
	}
	if err != nil {
		return -1, out.String(), fmt.Errorf("exec output in %s: %w", short(id), err)
	}
	insp, err := api.ContainerExecInspect(ctx, ex.ID)
	if err != nil {
		return -1, out.String(), fmt.Errorf("exec inspect in %s: %w", short(id), err)
	}
	return insp.ExitCode, out.String(), nil
}

// rollback removes, by exact id and in reverse order, everything the
// journal says was created and not yet removed, and journals each removal.
func (a *Adapter) rollback(ctx context.Context, j *Journal) error {
	recs, err := ReadJournal(j.Path())
	if err != nil {
		return err
	}
	res := Resources(recs)
	var errs []error
	// Containers first, then directories, then the network.
	for _, kind := range []string{KindContainer, KindDir, KindNetwork} {
		for i := len(res) - 1; i >= 0; i-- {
			r := res[i]
			if r.Kind != kind || r.Removed || r.ID == "" {
				continue
			}
			if err := a.remove(ctx, r); err != nil {
				errs = append(errs, err)
				continue
			}
			j.Append(Record{Op: OpRemoved, Kind: r.Kind, Role: r.Role, Name: r.Name, ID: r.ID})
		}
	}
	return errors.Join(errs...)
}

// ErrNotOwned is returned (wrapped) when a journalled id names a resource
// whose io.agentpen.* labels do not match the journal's intent: it is left
// alone.
var ErrNotOwned = errors.New("labels do not prove ownership")

// remove deletes one journalled resource by its id, after its labels prove
// it is the one the journal's intent describes; one already gone counts as
// removed.
func (a *Adapter) remove(ctx context.Context, r Resource) error {
	var err error
	switch r.Kind {
	case KindContainer:
		var info container.InspectResponse
		info, err = a.api().ContainerInspect(ctx, r.ID)
		if err == nil {
			if info.Config == nil || !labelsMatch(info.Config.Labels, r.Labels) {
				return fmt.Errorf("remove container %s (%s): %w", r.Name, short(r.ID), ErrNotOwned)
			}
			err = a.api().ContainerRemove(ctx, r.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		}
	case KindNetwork:
		var info network.Inspect
		info, err = a.api().NetworkInspect(ctx, r.ID, network.InspectOptions{})
		if err == nil {
			if !labelsMatch(info.Labels, r.Labels) {
				return fmt.Errorf("remove network %s (%s): %w", r.Name, short(r.ID), ErrNotOwned)
			}
			err = a.api().NetworkRemove(ctx, r.ID)
		}
	case KindDir:
		if !a.isRunDir(r.ID) {
			return fmt.Errorf("remove dir %q: not a workspace run directory of this daemon; refusing", r.ID)
		}
		err = os.RemoveAll(r.ID)
	}
	if err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("remove %s %s (%s): %w", r.Kind, r.Name, short(r.ID), err)
	}
	return nil
}

var runDirBase = regexp.MustCompile(`^agent-[0-9a-f]{24}$`)

// isRunDir reports whether path has the shape of a workspace run directory
// (<socket dir>/agentpen/<campaign key>/agent-<24 hex>), so a journal
// entry, however it was written, never makes agentpen remove anything else.
func (a *Adapter) isRunDir(path string) bool {
	root := filepath.Join(filepath.Dir(a.Docker.host.SocketPath), "agentpen")
	return filepath.IsAbs(path) && filepath.Clean(path) == path &&
		filepath.Dir(filepath.Dir(path)) == root && runDirBase.MatchString(filepath.Base(path)) &&
		filepath.Base(filepath.Dir(path)) != "." && filepath.Base(filepath.Dir(path)) != ".."
}

// UnixHTTPClient is an HTTP client whose every request goes to the unix
// socket at path.
func UnixHTTPClient(path string, timeout time.Duration) *http.Client {
	d := &net.Dialer{Timeout: timeout}
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return d.DialContext(ctx, "unix", path)
			},
			DisableKeepAlives: true,
		},
	}
}

func short(id string) string {
	if len(id) > 12 && !strings.Contains(id, "/") {
		return id[:12]
	}
	return id
}

// TearDown removes, by exact id, everything a campaign's journal records as
// created and not removed, and journals each removal. It never looks
// anything up by name or label. (The cleanup report, with verification, is
// package cleanup's; this is the removal itself.)
func (a *Adapter) TearDown(ctx context.Context, campaignID string) error {
	if err := CheckID("campaign_id", campaignID); err != nil {
		return err
	}
	dir := a.CampaignDir(campaignID)
	if _, err := os.Stat(filepath.Join(dir, JournalFile)); err != nil {
		return fmt.Errorf("campaign %q: no journal in %s: %w", campaignID, dir, err)
	}
	j, err := OpenJournal(dir)
	if err != nil {
		return err
	}
	defer j.Close()
	j.Append(Record{Op: OpNote, Note: "teardown started"})
	err = a.rollback(ctx, j)
	if err == nil {
		os.Remove(a.runRoot(&Plan{Key: CampaignKey(campaignID)}))
		j.Append(Record{Op: OpNote, Note: "teardown complete"})
	}
	return err
}
