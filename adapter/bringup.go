package adapter

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/store"
	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"golang.org/x/sync/errgroup"
)

// maxSocketPath is the longest path a unix socket address holds.
const maxSocketPath = 107

// ErrConflict is the kind of error (wrapped) when the daemon already holds
// resources of the campaign id (a twin campaign under another state root,
// or an earlier generation not cleaned up): nothing is created.
var ErrConflict = errors.New("conflict")

// ErrCampaignExists is returned (wrapped) by BringUp when the campaign's
// journal has a generation that is not verified removed. It is an
// ErrConflict, and reads "already exists" after the campaign's id.
var ErrCampaignExists error = kindError{"already exists", ErrConflict}

// kindError is a sentinel that is also a more general kind.
type kindError struct {
	msg  string
	kind error
}

func (e kindError) Error() string { return e.msg }
func (e kindError) Unwrap() error { return e.kind }

// BringUp brings up a validated plan (campaign.Validate's; the bring-up
// binds it to its generation): holding the campaign's lock, it refuses a
// campaign id that already has live resources (in this state root's
// journal or on the daemon, whatever the state root), starts a new
// generation with a fresh instance nonce, journals and creates the
// campaign's network, server and workspaces, and waits until each is
// ready. On any failure (including ctx cancellation) it removes what it
// created through the cleanup path (by exact id, with proof, verified)
// and writes the cleanup report; the error names the failing resource and
// says whether the rollback was verified.
func (a *Adapter) BringUp(ctx context.Context, root *store.Root, p *campaign.Plan) (*Campaign, error) {
	c, _, _, err := a.bringUp(ctx, root, p, nil)
	return c, err
}

// BringUpAttested is BringUp, then Attest of the new generation under the
// same hold of the campaign's lock: no other agentpen (a down, another
// attestation) acts on the campaign between its readiness and its
// report. The journal says campaign.OpAttesting (ready, its verdict
// pending) before the attestation and campaign.OpAttested once its
// report is written, so a bring-up killed in between reads as not up
// rather than ready and unattested. An attestation that cannot run (or
// is interrupted) is returned as the error, with the campaign up and
// pending; one that ran returns its report (and its path), failed or not.
// Either way the caller decides what to do with a campaign that did not
// attest: Up is the policy agentpen's commands and service use.
func (a *Adapter) BringUpAttested(ctx context.Context, root *store.Root, p *campaign.Plan, opts AttestOptions) (*Campaign, *attest.Report, string, error) {
	return a.bringUp(ctx, root, p, &opts)
}

func (a *Adapter) bringUp(ctx context.Context, root *store.Root, p *campaign.Plan, attestOpts *AttestOptions) (*Campaign, *attest.Report, string, error) {
	if !p.Keyed {
		return nil, nil, "", errors.New("the plan's agent ids are not keyed: validate the spec with the state root's plan options (store.Root.PlanOptions)")
	}
	if p.Owner != "" {
		// A begin record naming no launcher would make the journal corrupt.
		if err := campaign.CheckOwner("owner", p.Owner); err != nil {
			return nil, nil, "", err
		}
	}
	if err := a.Prepare(ctx, p); err != nil {
		return nil, nil, "", err
	}
	// The lock first: a new campaign's directory is made and put in
	// place under it (store.Root.Create).
	lock, err := a.lockKey(ctx, campaign.Key(p.CampaignID))
	if err != nil {
		return nil, nil, "", err
	}
	defer lock.Unlock()
	sc, err := root.Create(p.CampaignID)
	if err != nil {
		return nil, nil, "", err
	}
	defer sc.Close()
	gen, err := nextGeneration(sc)
	if err != nil {
		return nil, nil, "", err
	}
	if err := a.refuseLabelled(ctx, p.CampaignID); err != nil {
		return nil, nil, "", err
	}
	p.Bind(gen, campaign.NewInstance())
	// The pool's first slots come up, and are attested, with the rest.
	if err := p.AddPool(seq(0, p.Spec.Pool)); err != nil {
		return nil, nil, "", err
	}
	if n := len(filepath.Join(a.runRoot(p), p.Agents[0].AgentID, filepath.Base(campaign.WorkbenchSocket))); n > maxSocketPath {
		return nil, nil, "", fmt.Errorf("the workbench socket path under %s would be %d bytes, over the %d of a unix socket address: use a daemon whose socket path is shorter", a.runBase(), n, maxSocketPath)
	}
	j, err := a.openJournal(sc)
	if err != nil {
		return nil, nil, "", err
	}
	defer j.Close()
	if err := sc.WriteSpec(gen, p.Spec); err != nil {
		return nil, nil, "", err
	}
	if err := sc.WriteDaemon(gen, a.daemonRecord()); err != nil {
		return nil, nil, "", err
	}
	if err := j.Append(campaign.Record{Op: campaign.OpBegin, Gen: gen, Instance: p.Instance, Images: p.Images, Owner: p.Owner,
		Note: fmt.Sprintf("bring-up started: %d workspaces, egress %s", len(p.Agents), p.Egress)}); err != nil {
		return nil, nil, "", err
	}
	if !p.Lifetime.IsZero() {
		if p.Lifetime.Accepted.IsZero() {
			p.Lifetime.Accepted = time.Now()
		}
		if err := j.Append(p.Lifetime.Record(gen)); err != nil {
			return nil, nil, "", err
		}
	}
	b := &bringUp{a: a, j: j, p: p, failed: map[string]failedCreate{},
		progress: a.newProgress(p.CampaignID, map[string]int{campaign.RoleNetwork: len(p.Networks), campaign.RoleServer: 1, campaign.RoleWork: len(p.Agents)})}
	c := &Campaign{Plan: p, Dir: sc.Path}
	if err := b.create(ctx, c, true); err != nil {
		a.log().Warn("bring-up failed; rolling back", "campaign", p.CampaignID, "generation", gen, "err", err)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		rep := a.cleanupJournal(rctx, sc, j, cleanupOptions{gen: gen, failed: b.failedCreates(), reason: campaign.ReasonRollback})
		path, rbErr := a.finishReport(rctx, sc, j, &rep)
		err = fmt.Errorf("%w; rolled back: cleanup %s (%s)", err, rep.Status, path)
		return nil, nil, "", errors.Join(err, rbErr, j.Append(campaign.Record{Op: campaign.OpRolledBack, Gen: gen, Note: err.Error()}))
	}
	a.log().Info("campaign ready", "campaign", p.CampaignID, "generation", gen, "topology", p.Topology, "networks", len(c.NetworkIDs), "workspaces", len(c.Workspaces))
	// A pooled workspace is handed out by a claim only, never with the
	// campaign.
	c.Workspaces = slices.DeleteFunc(c.Workspaces, func(w Workspace) bool { return w.Pooled })
	if attestOpts == nil {
		// Every id is journalled already; the record only marks the
		// moment, so a failure to write it is logged rather than undoing
		// a ready campaign.
		if err := j.Append(campaign.Record{Op: campaign.OpReady, Gen: gen}); err != nil {
			a.log().Warn("journal the campaign's readiness", "campaign", p.CampaignID, "err", err)
		}
		return c, nil, "", nil
	}
	// Ready and attesting in one record: never a moment when the journal
	// says ready without saying the verdict is pending.
	if err := j.Append(campaign.Record{Op: campaign.OpAttesting, Gen: gen}); err != nil {
		return c, nil, "", err
	}
	if a.Progress != nil {
		a.Progress(Progress{CampaignID: p.CampaignID, Step: StepAttesting})
	}
	_, _, rep, path, err := a.attest(ctx, sc, j, *attestOpts, false)
	return c, rep, path, err
}

// nextGeneration reads the campaign's journal (if any) and returns the
// number of the next generation, refusing while an earlier one has
// resources not verified removed.
func nextGeneration(c *store.Campaign) (int, error) {
	recs, _, err := c.Records()
	if errors.Is(err, fs.ErrNotExist) {
		return 1, nil
	}
	if err != nil {
		return 0, err
	}
	next := 1
	for _, g := range campaign.Generations(recs) {
		if live := g.Live(); len(live) > 0 {
			return 0, fmt.Errorf("campaign %q %w: its generation %d has %d resources not verified removed (journal in %s); run agentpen down %s first",
				c.ID, ErrCampaignExists, g.N, len(live), c.Path, c.ID)
		}
		next = max(next, g.N+1)
	}
	return next, nil
}

// refuseLabelled refuses a campaign id that the daemon already has
// resources of, whatever state root made them, and names them.
func (a *Adapter) refuseLabelled(ctx context.Context, campaignID string) error {
	found, err := a.listLabelled(ctx, campaign.LabelCampaign+"="+campaignID)
	if err != nil {
		return err
	}
	if len(found) == 0 {
		return nil
	}
	var names []string
	for _, f := range found {
		names = append(names, fmt.Sprintf("%s %s (%s)", f.Kind, f.Name, short(f.ID)))
	}
	return fmt.Errorf("campaign %q: %w: the daemon already has resources labelled with this campaign id (another state root's campaign, or resources no journal here accounts for: see agentpen orphans): %s",
		campaignID, ErrConflict, strings.Join(names, ", "))
}

// checkKey refuses a campaign whose default grader or episode servers need
// the API key when agentpen's environment does not hold it (they would
// refuse to start, after everything was created), holds a placeholder, or
// holds one shorter than the policy's minimum (apikey.Policy: the same
// policy the attestation applies). The message never holds the value and
// ends with how to make a key.
func (a *Adapter) checkKey(p *campaign.Plan) error {
	needs := p.Server.NeedsKey
	for _, ag := range p.Agents {
		needs = needs || ag.NeedsKey
	}
	if !needs {
		return nil
	}
	name := p.Server.Spec.APIKeyEnv
	policy := a.keyPolicy()
	st := policy.Check(a.getenv(name))
	if st.OK() {
		return nil
	}
	return &campaign.ValidationError{Field: "server.api_key_env", Msg: policy.Refusal(name, st)}
}

// bringUp is one bring-up in progress: its journal, its bound plan, and
// the creates that failed (for the rollback to resolve).
type bringUp struct {
	a        *Adapter
	j        *campaign.Journal
	p        *campaign.Plan
	progress *progress

	mu     sync.Mutex
	failed map[string]failedCreate
}

func (b *bringUp) failedCreates() map[string]failedCreate {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]failedCreate, len(b.failed))
	for k, v := range b.failed {
		out[k] = v
	}
	return out
}

// record journals r in this bring-up's generation.
func (b *bringUp) record(r campaign.Record) error {
	r.Gen = b.p.Generation
	return b.j.Append(r)
}

// create makes the campaign's networks, directories, server and
// workspaces, journalling each, and (with ready) waits until every
// container is ready. The networks come first (under the subnet lock);
// then the server and the workspaces share one bound of Parallelism
// creates, starts and connects at once: the server takes the first slot,
// its joins to the other agent networks queue behind its start, and each
// container's readiness is awaited, holding no slot, from the moment it
// started, while the others are still being made. The first failure
// cancels everything not yet begun and is the error returned.
func (b *bringUp) create(ctx context.Context, c *Campaign, ready bool) error {
	a, p := b.a, b.p
	limit := a.parallelism()
	// One network per agent (TopologyPerAgent), on subnets agentpen picks.
	if len(p.Networks) > 0 {
		ids, err := b.createNetworks(ctx, limit)
		if err != nil {
			return err
		}
		c.NetworkIDs = ids
	}
	// The grader's socket directory (TopologyNone).
	graderDir := ""
	if p.Topology == campaign.TopologyNone {
		var err error
		if graderDir, err = a.makeGraderDir(b.j, p); err != nil {
			return err
		}
		c.GraderDir = graderDir
	}
	// A uid block per workspace, claimed until the workspaces carry them.
	bases, claim, err := a.claimUIDBlocks(ctx, len(p.Agents))
	if err != nil {
		return err
	}
	defer claim.release()
	for i := range p.Agents {
		p.SetUIDBlock(i, bases[i])
	}
	apiKey := a.getenv(p.Server.Spec.APIKeyEnv)
	secrets := map[string]string{}
	for _, k := range p.Server.Spec.SecretEnv {
		if v := a.getenv(k); v != "" {
			secrets[k] = v
		}
	}

	ctx, ff := newFailFast(ctx)
	defer ff.cancel()
	fail := ff.fail
	sem := make(chan struct{}, limit)
	acquire := func() error {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := ctx.Err(); err != nil {
			<-sem
			return err
		}
		return nil
	}
	var g errgroup.Group

	// The server, in the first slot.
	if err := acquire(); err != nil {
		return err
	}
	serverUp := make(chan struct{})
	g.Go(func() error {
		id, err := b.createStart(ctx, serverSpec(p, apiKey, secrets, a.Docker.Host().SocketPath, graderDir))
		c.ServerID = id
		if err != nil {
			err = fail(err)
		}
		<-sem
		if err != nil {
			return err
		}
		close(serverUp)
		if !ready {
			return nil
		}
		if err := a.waitServer(ctx, c); err != nil {
			return fail(err)
		}
		b.progress.step(Progress{Step: StepReady, Role: campaign.RoleServer, Kind: campaign.KindContainer, Name: p.Server.Name, ID: c.ServerID})
		return nil
	})
	// Its joins to the other agent networks, under its alias.
	for _, id := range c.NetworkIDs[min(1, len(c.NetworkIDs)):] {
		g.Go(func() error {
			select {
			case <-serverUp:
			case <-ctx.Done():
				return ctx.Err()
			}
			if err := acquire(); err != nil {
				return err
			}
			defer func() { <-sem }()
			if err := a.api().NetworkConnect(ctx, id, c.ServerID, &network.EndpointSettings{Aliases: []string{p.Server.Alias}}); err != nil {
				return fail(fmt.Errorf("connect the server to network %s: %w", short(id), err))
			}
			return nil
		})
	}
	// The workspaces.
	c.Workspaces = make([]Workspace, len(p.Agents))
	for i, ag := range p.Agents {
		g.Go(func() error {
			if err := acquire(); err != nil {
				return err
			}
			ws, err := func() (Workspace, error) {
				defer func() { <-sem }()
				runDir, err := a.makeRunDir(b.j, p, ag)
				if err != nil {
					return Workspace{}, fail(err)
				}
				if err := a.writeBindFile(runDir, ag); err != nil {
					return Workspace{}, fail(err)
				}
				id, err := b.createStart(ctx, workspaceSpec(p, ag, runDir, graderDir, apiKey))
				if err != nil {
					return Workspace{}, fail(err)
				}
				return Workspace{Index: ag.Index, AgentID: ag.AgentID, TaskID: ag.Spec.TaskID, ContainerID: id, RunDir: runDir, Socket: filepath.Join(runDir, filepath.Base(campaign.WorkbenchSocket)), UIDBase: ag.UIDBase, Workbench: ag.NeedsKey, Pooled: ag.Pool}, nil
			}()
			if err != nil {
				return err
			}
			c.Workspaces[i] = ws
			if !ready {
				return nil
			}
			if err := a.waitWorkspace(ctx, ws); err != nil {
				return fail(err)
			}
			b.progress.step(Progress{Step: StepReady, Role: campaign.RoleWork, Kind: campaign.KindContainer, Name: ag.Name, ID: ws.ContainerID})
			return nil
		})
	}
	return ff.err(g.Wait())
}

// failFast is the shared cancellation of a bring-up's concurrent steps:
// the first failure is kept and cancels the rest. Its context is cancelled
// plainly, never with a cause: a daemon call cut short must fail as
// cancelled (its create may still be carried out by the daemon, and the
// rollback resolves it), not carry the error that stopped the others.
// Go's HTTP client returns the context's cause, so with
// errgroup.WithContext a sibling's conflict passed for the daemon's answer
// to a create still in flight, which was then journalled as never created
// and leaked.
type failFast struct {
	cancel context.CancelFunc
	once   sync.Once
	first  error
}

func newFailFast(ctx context.Context) (context.Context, *failFast) {
	ctx, cancel := context.WithCancel(ctx)
	return ctx, &failFast{cancel: cancel}
}

// fail records err if it is the first failure, cancels the rest and
// returns err.
func (f *failFast) fail(err error) error {
	f.once.Do(func() { f.first = err })
	f.cancel()
	return err
}

// err is the first failure, else waitErr (what the steps returned, e.g.
// the caller's cancellation). Call it once every step has returned.
func (f *failFast) err(waitErr error) error {
	if f.first != nil {
		return f.first
	}
	return waitErr
}

// parallelism is Parallelism or its default.
func (a *Adapter) parallelism() int {
	if a.Parallelism <= 0 {
		return DefaultParallelism
	}
	return a.Parallelism
}

// createNetworks creates every agent network, each on a /28 of the subnet
// pool that no network on the daemon uses, holding the daemon-wide subnet
// lock until they exist.
func (b *bringUp) createNetworks(ctx context.Context, limit int) ([]string, error) {
	lock, err := b.a.lockFile(ctx, subnetLock)
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	subnets, err := b.a.allocateSubnets(ctx, len(b.p.Networks))
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(b.p.Networks))
	ctx, ff := newFailFast(ctx)
	defer ff.cancel()
	var g errgroup.Group
	g.SetLimit(limit)
	for i, n := range b.p.Networks {
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				return err
			}
			id, err := b.createNetwork(ctx, n, subnets[i])
			ids[i] = id
			if err != nil {
				return ff.fail(err)
			}
			return nil
		})
	}
	return ids, ff.err(g.Wait())
}

// createNetwork journals the intent, creates one agent network and
// journals its id. A conflict (the name is taken) is journalled as never
// created and never adopted; any other failure is left to the rollback to
// resolve.
func (b *bringUp) createNetwork(ctx context.Context, n campaign.NetworkPlan, subnet netip.Prefix) (string, error) {
	n.Labels = campaign.WithCreateLabel(n.Labels)
	if err := b.record(campaign.Record{Op: campaign.OpIntent, Kind: campaign.KindNetwork, Role: campaign.RoleNetwork, Name: n.Name, Labels: n.Labels}); err != nil {
		return "", err
	}
	resp, err := b.a.api().NetworkCreate(ctx, n.Name, networkCreateOptions(n, subnet))
	if err != nil {
		err = fmt.Errorf("create network %s: %w", n.Name, err)
		return "", errors.Join(err, b.createFailed(campaign.KindNetwork, n.Name, err))
	}
	if err := b.record(campaign.Record{Op: campaign.OpCreated, Kind: campaign.KindNetwork, Role: campaign.RoleNetwork, Name: n.Name, ID: resp.ID}); err != nil {
		return resp.ID, err
	}
	b.a.log().Info("network created", "name", n.Name, "id", short(resp.ID), "subnet", subnet, "internal", n.Internal)
	b.progress.step(Progress{Step: StepCreated, Role: campaign.RoleNetwork, Kind: campaign.KindNetwork, Name: n.Name, ID: resp.ID})
	return resp.ID, nil
}

// createStart journals the intent, creates and starts one container, and
// journals its id. A failed create is journalled and kept for the
// rollback, which resolves it (see resolveContainer); a conflict (another
// container holds the name) is journalled as never created and never
// adopted.
func (b *bringUp) createStart(ctx context.Context, s containerSpec) (string, error) {
	id, err := b.createContainer(ctx, s)
	if err != nil {
		return id, err
	}
	return id, b.start(ctx, s, id)
}

// start starts the container id created for s.
func (b *bringUp) start(ctx context.Context, s containerSpec, id string) error {
	if err := b.a.api().ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		return fmt.Errorf("start %s %s: %w", s.Role, s.Name, err)
	}
	b.progress.step(Progress{Step: StepCreated, Role: s.Role, Kind: campaign.KindContainer, Name: s.Name, ID: id})
	return nil
}

// createContainer journals the intent, creates one container and
// journals its id (createStart without the start).
func (b *bringUp) createContainer(ctx context.Context, s containerSpec) (string, error) {
	api := b.a.api()
	cfg := *s.Config
	cfg.Labels = campaign.WithCreateLabel(s.Config.Labels)
	s.Config = &cfg
	if err := b.record(campaign.Record{Op: campaign.OpIntent, Kind: campaign.KindContainer, Role: s.Role, Name: s.Name, Labels: s.Config.Labels}); err != nil {
		return "", err
	}
	resp, err := api.ContainerCreate(ctx, s.Config, s.HostConfig, s.Networking, nil, s.Name)
	if err != nil {
		err = fmt.Errorf("create %s: %w", s, err)
		return "", errors.Join(err, b.createFailed(campaign.KindContainer, s.Name, err))
	}
	if err := b.record(campaign.Record{Op: campaign.OpCreated, Kind: campaign.KindContainer, Role: s.Role, Name: s.Name, ID: resp.ID}); err != nil {
		return resp.ID, err
	}
	b.a.log().Info("container created", "role", s.Role, "name", s.Name, "id", short(resp.ID))
	return resp.ID, nil
}

// createFailed journals a failed create. A conflict is definitive and
// resolved at once (never created by us); anything else is remembered for
// the rollback's resolution.
func (b *bringUp) createFailed(kind campaign.Kind, name string, err error) error {
	jerr := b.record(campaign.Record{Op: campaign.OpCreateFailed, Kind: kind, Name: name, Note: err.Error()})
	if cerrdefs.IsConflict(err) {
		return errors.Join(jerr, b.record(campaign.Record{Op: campaign.OpRemoved, Kind: kind, Name: name, Note: "never created: the name is taken by another resource (conflict)"}))
	}
	b.mu.Lock()
	b.failed[name] = failedCreate{at: time.Now(), answered: daemonAnswered(err)}
	b.mu.Unlock()
	return jerr
}
