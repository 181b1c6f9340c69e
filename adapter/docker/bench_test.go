package docker

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"golang.org/x/sync/errgroup"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/adapter/drivertest"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/internal/testkit/testlatency"
	"github.com/agentpen/agentpen/store"
)

// The campaign benchmarks of issue 16 (make bench): a campaign of the
// workbench grader and N workspaces brought up, attested and torn down on
// the real rootless daemon, beside the raw limit (the same containers and
// networks created and started, then removed, by direct SDK calls, with no
// journal, proof or readiness) and the sequential docker CLI, measured in
// the same rounds, in an order that rotates from round to round.

const benchKey = "bench-key-0123456789abcdef"

// benchRoundsEnv overrides how many rounds a campaign benchmark measures.
const benchRoundsEnv = "AGENTPEN_BENCH_ROUNDS"

// rounds is how many rounds a campaign benchmark measures: b.N, at most
// def (AGENTPEN_BENCH_ROUNDS overrides def), since a round takes seconds.
// It is 0 for the one-iteration probe go test makes before a fixed
// -benchtime of more than one iteration (NNx): that run is repeated with
// b.N = NN, which alone reports.
func rounds(b *testing.B, def int) int {
	if v, err := strconv.Atoi(os.Getenv(benchRoundsEnv)); err == nil && v > 0 {
		def = v
	}
	if b.N == 1 {
		if f := flag.Lookup("test.benchtime"); f != nil {
			if n, err := strconv.Atoi(strings.TrimSuffix(f.Value.String(), "x")); err == nil && strings.HasSuffix(f.Value.String(), "x") && n > 1 {
				return 0
			}
		}
	}
	return min(b.N, def)
}

// benchSpec is a campaign of the workbench grader and n workspaces of img,
// in topology (per-agent: the server is agent-reachable, egress stays
// internal).
func benchSpec(id, img string, n int, topology campaign.Topology) campaign.CampaignSpec {
	tasks := []string{"software/median@2", "data/csv_region_total@5", "logs/first_error@1", "config/port_conflict"}
	s := campaign.CampaignSpec{CampaignID: id, Server: campaign.ServerSpec{Image: img, AgentReachable: topology == campaign.TopologyPerAgent}}
	for i := range n {
		s.Workspaces = append(s.Workspaces, campaign.WorkspaceSpec{TaskID: tasks[i%len(tasks)], AttemptID: fmt.Sprint("a", i), Image: img})
	}
	return s
}

// benchAdapter is an adapter on the real daemon (failing, never skipping,
// when AGENTPEN_REQUIRE_DOCKER=1 and there is none) and the workbench
// image's id.
func benchAdapter(b *testing.B) (*drivertest.Harness, *client.Client, string) {
	b.Helper()
	a, cli := realAdapter(b, benchKey, nil)
	img, err := cli.ImageInspect(b.Context(), testenv.WorkbenchImage())
	if err != nil {
		b.Fatalf("image %s: %v (make images; %s picks another)", testenv.WorkbenchImage(), err, testenv.WorkbenchImageEnv)
	}
	return a, cli, img.ID
}

// removeLabelled is the benchmarks' last-resort cleanup of one of their
// own campaign ids (by the ids the label listing finds).
func removeLabelled(cli *client.Client, campaignID string) {
	ctx := context.Background()
	f := filters.NewArgs(filters.Arg("label", campaign.LabelCampaign+"="+campaignID))
	cs, _ := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	for _, c := range cs {
		cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
	}
	ns, _ := cli.NetworkList(ctx, network.ListOptions{Filters: f})
	for _, n := range ns {
		cli.NetworkRemove(ctx, n.ID)
	}
}

// rawSet is a campaign's containers and networks as bring-up would create
// them (the same create settings, from the same builders), with their run
// directories made, uid blocks claimed and subnets chosen beforehand:
// what the raw limit and the docker CLI create.
type rawSet struct {
	p       *campaign.Plan
	server  containerSpec
	works   []containerSpec
	sockets []string // each workspace's workbench socket
	subnets []string
	root    string // the run root, removed by done
	env     []string
	claims  []*store.Lock
	subLock *store.Lock
}

// newRawSet prepares spec's containers for a raw or CLI bring-up. done
// (or the benchmark's end) removes whatever is left.
func newRawSet(b *testing.B, a *drivertest.Harness, cli *client.Client, spec campaign.CampaignSpec) *rawSet {
	b.Helper()
	ctx := b.Context()
	p, err := campaign.NewPlan(spec)
	if err != nil {
		b.Fatal(err)
	}
	p.Bind(1, campaign.NewInstance())
	s := &rawSet{p: p, root: dk(a.Adapter).runRoot(p.Instance), env: append(os.Environ(), "DOCKER_HOST="+dk(a.Adapter).Host().URL, p.Server.Spec.APIKeyEnv+"="+benchKey)}
	b.Cleanup(func() { s.done(cli) })
	if err := dk(a.Adapter).ensureRunBase(); err != nil {
		b.Fatal(err)
	}
	if err := dk(a.Adapter).mkdirOwned(s.root, false); err != nil {
		b.Fatal(err)
	}
	graderDir := ""
	if p.Topology == campaign.TopologyNone {
		graderDir = filepath.Join(s.root, "grader")
		if err := dk(a.Adapter).mkdirOwned(graderDir, false); err != nil {
			b.Fatal(err)
		}
	}
	locks, err := a.Locks()
	if err != nil {
		b.Fatal(err)
	}
	// uid blocks no bring-up in flight holds (as the engine claims them;
	// the benchmarks run alone on the daemon).
	for i := range p.Agents {
		for base := campaign.UIDBlockFirst + len(s.claims)*campaign.UIDBlockSize; ; base += campaign.UIDBlockSize {
			l, ok, err := locks.TryClaim("uid-blocks", strconv.Itoa(base))
			if err != nil {
				b.Fatal(err)
			}
			if ok {
				s.claims = append(s.claims, l)
				p.SetUIDBlock(i, base)
				break
			}
		}
	}
	if len(p.Networks) > 0 {
		if s.subLock, err = locks.Take(ctx, subnetLock, store.DefaultLockWait); err != nil {
			b.Fatal(err)
		}
		subnets, err := dk(a.Adapter).allocateSubnets(ctx, len(p.Networks))
		if err != nil {
			b.Fatal(err)
		}
		for _, sn := range subnets {
			s.subnets = append(s.subnets, sn.String())
		}
	}
	s.server = serverSpec(p, benchKey, nil, dk(a.Adapter).Host().SocketPath, graderDir)
	for _, ag := range p.Agents {
		dir := filepath.Join(s.root, ag.AgentID)
		if err := dk(a.Adapter).mkdirOwned(dir, false); err != nil {
			b.Fatal(err)
		}
		s.works = append(s.works, workspaceSpec(p, ag, dir, graderDir, benchKey))
		s.sockets = append(s.sockets, filepath.Join(dir, filepath.Base(campaign.WorkbenchSocket)))
	}
	return s
}

// settle waits (untimed) until the set's containers are in the state the
// adapter's cleanup finds its own in: the server's ready command passes,
// every workbench answers /health, and then as long again as hold (the
// campaign's attestation), so the raw and CLI teardowns remove the same
// containers in the same state (a container removed the moment it
// started goes faster: BenchmarkTeardownAge).
func (s *rawSet) settle(b *testing.B, a *drivertest.Harness, ids rawIDs, hold time.Duration) {
	b.Helper()
	var g errgroup.Group
	g.Go(func() error {
		return dk(a.Adapter).waitServer(b.Context(), ids.containers[0], s.p.Server.Name, s.p.Server.Spec.ReadyCommand)
	})
	for i, sock := range s.sockets {
		g.Go(func() error {
			return dk(a.Adapter).waitWorkspace(b.Context(), ids.containers[i+1], s.p.Agents[i].AgentID, sock)
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	time.Sleep(hold)
}

// created releases the uid claims and the subnet lock once the containers
// and networks carry them.
func (s *rawSet) created() {
	for _, l := range s.claims {
		l.Unlock()
	}
	s.claims = nil
	if s.subLock != nil {
		s.subLock.Unlock()
		s.subLock = nil
	}
}

// done removes what is left of the set (by its campaign label) and its
// run root.
func (s *rawSet) done(cli *client.Client) {
	s.created()
	removeLabelled(cli, s.p.CampaignID)
	os.RemoveAll(s.root)
}

// rawIDs are what a raw bring-up created.
type rawIDs struct {
	containers []string
	networks   []string
}

// rawUp creates the set's networks, then creates and starts its
// containers and joins the server to the other networks, by direct SDK
// calls, conc at a time: the order bring-up uses (the server first, its
// joins as soon as it started, beside the workspaces), without journal,
// proof or readiness.
func rawUp(ctx context.Context, cli dockerAPI, s *rawSet, conc int) (rawIDs, error) {
	var ids rawIDs
	ids.networks = make([]string, len(s.p.Networks))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(conc)
	for i, n := range s.p.Networks {
		g.Go(func() error {
			resp, err := cli.NetworkCreate(gctx, n.Name, network.CreateOptions{Driver: "bridge", Internal: n.Internal, Labels: n.Labels,
				IPAM: &network.IPAM{Driver: "default", Config: []network.IPAMConfig{{Subnet: s.subnets[i]}}}})
			ids.networks[i] = resp.ID
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return ids, err
	}
	all := append([]containerSpec{s.server}, s.works...)
	ids.containers = make([]string, len(all))
	sem := make(chan struct{}, conc)
	createStart := func(ctx context.Context, i int) error {
		c := all[i]
		resp, err := cli.ContainerCreate(ctx, c.Config, c.HostConfig, c.Networking, nil, c.Name)
		if err != nil {
			return err
		}
		ids.containers[i] = resp.ID
		return cli.ContainerStart(ctx, resp.ID, container.StartOptions{})
	}
	g, gctx = errgroup.WithContext(ctx)
	serverUp := make(chan struct{})
	sem <- struct{}{}
	g.Go(func() error {
		err := createStart(gctx, 0)
		<-sem
		if err == nil {
			close(serverUp)
		}
		return err
	})
	for _, id := range ids.networks[min(1, len(ids.networks)):] {
		g.Go(func() error {
			select {
			case <-serverUp:
			case <-gctx.Done():
				return gctx.Err()
			}
			sem <- struct{}{}
			defer func() { <-sem }()
			return cli.NetworkConnect(gctx, id, ids.containers[0], &network.EndpointSettings{Aliases: []string{s.p.Server.Alias}})
		})
	}
	for i := 1; i < len(all); i++ {
		g.Go(func() error {
			sem <- struct{}{}
			defer func() { <-sem }()
			return createStart(gctx, i)
		})
	}
	return ids, g.Wait()
}

// rawDown removes the containers, then the networks, conc at a time.
func rawDown(ctx context.Context, cli dockerAPI, ids rawIDs, conc int) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(conc)
	for _, id := range ids.containers {
		g.Go(func() error {
			return cli.ContainerRemove(gctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	g, gctx = errgroup.WithContext(ctx)
	g.SetLimit(conc)
	for _, id := range ids.networks {
		g.Go(func() error { return cli.NetworkRemove(gctx, id) })
	}
	return g.Wait()
}

// cliRunArgs is `docker run -d` with the spec's settings, as far as the
// CLI spells them; environment values come from the CLI's environment
// (-e NAME), never the command line. An inline seccomp profile (the API
// takes its JSON, the CLI a file) is written to a file in dir.
func cliRunArgs(s containerSpec, dir string) ([]string, error) {
	hc, cfg := s.HostConfig, s.Config
	args := []string{"run", "-d", "--name", s.Name, "--network", string(hc.NetworkMode)}
	if hc.Init != nil && *hc.Init {
		args = append(args, "--init")
	}
	if s.Networking != nil {
		for _, ep := range s.Networking.EndpointsConfig {
			for _, al := range ep.Aliases {
				args = append(args, "--network-alias", al)
			}
		}
	}
	for _, c := range hc.CapDrop {
		args = append(args, "--cap-drop", c)
	}
	for _, c := range hc.CapAdd {
		args = append(args, "--cap-add", c)
	}
	for _, o := range hc.SecurityOpt {
		if profile, ok := strings.CutPrefix(o, "seccomp="); ok && strings.HasPrefix(profile, "{") {
			f := filepath.Join(dir, "seccomp-"+s.Name+".json")
			if err := os.WriteFile(f, []byte(profile), 0o600); err != nil {
				return nil, err
			}
			o = "seccomp=" + f
		}
		args = append(args, "--security-opt", o)
	}
	if hc.ReadonlyRootfs {
		args = append(args, "--read-only")
	}
	for _, k := range sortedKeys(hc.Tmpfs) {
		args = append(args, "--tmpfs", k+":"+hc.Tmpfs[k])
	}
	args = append(args, "--restart", "no")
	if hc.Memory > 0 {
		args = append(args, "--memory", strconv.FormatInt(hc.Memory, 10))
	}
	if hc.PidsLimit != nil {
		args = append(args, "--pids-limit", strconv.FormatInt(*hc.PidsLimit, 10))
	}
	for _, m := range hc.Mounts {
		v := fmt.Sprintf("type=%s,source=%s,target=%s", m.Type, m.Source, m.Target)
		if m.ReadOnly {
			v += ",readonly"
		}
		args = append(args, "--mount", v)
	}
	for _, k := range sortedKeys(cfg.Labels) {
		args = append(args, "--label", k+"="+cfg.Labels[k])
	}
	for _, e := range cfg.Env {
		args = append(args, "-e", strings.SplitN(e, "=", 2)[0])
	}
	args = append(args, cfg.Image)
	return append(args, cfg.Cmd...), nil
}

// docker runs the docker CLI and returns its trimmed stdout.
func docker(ctx context.Context, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			err = fmt.Errorf("docker %s: %w: %s", args[0], err, ee.Stderr)
		}
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// cliUp is the sequential docker CLI bring-up: each network, the server,
// its connects, then each workspace, one command after the other. The
// workspaces' environment values are the server's key, which the CLI
// reads from its own environment (s.env).
func cliUp(ctx context.Context, s *rawSet) (rawIDs, error) {
	var ids rawIDs
	for i, n := range s.p.Networks {
		args := []string{"network", "create", "--driver", "bridge", "--subnet", s.subnets[i]}
		if n.Internal {
			args = append(args, "--internal")
		}
		for _, k := range sortedKeys(n.Labels) {
			args = append(args, "--label", k+"="+n.Labels[k])
		}
		id, err := docker(ctx, s.env, append(args, n.Name)...)
		if err != nil {
			return ids, err
		}
		ids.networks = append(ids.networks, id)
	}
	env := s.env
	dir, err := os.MkdirTemp("", "agentpen-bench-cli-")
	if err != nil {
		return ids, err
	}
	defer os.RemoveAll(dir)
	for _, c := range append([]containerSpec{s.server}, s.works...) {
		args, err := cliRunArgs(c, dir)
		if err != nil {
			return ids, err
		}
		id, err := docker(ctx, slices.Concat(env, c.Config.Env), args...)
		if err != nil {
			return ids, err
		}
		ids.containers = append(ids.containers, id)
		if c.Role == campaign.RoleServer {
			for _, n := range ids.networks[min(1, len(ids.networks)):] {
				if _, err := docker(ctx, env, "network", "connect", "--alias", s.p.Server.Alias, n, id); err != nil {
					return ids, err
				}
			}
		}
	}
	return ids, nil
}

// cliDown is `docker rm -f` of each container, then `docker network rm` of
// each network, one after the other.
func cliDown(ctx context.Context, s *rawSet, ids rawIDs) error {
	for _, id := range ids.containers {
		if _, err := docker(ctx, s.env, "rm", "-f", "-v", id); err != nil {
			return err
		}
	}
	for _, id := range ids.networks {
		if _, err := docker(ctx, s.env, "network", "rm", id); err != nil {
			return err
		}
	}
	return nil
}

// benchCampaignID is a fresh campaign id for a benchmark.
func benchCampaignID(kind string) string {
	return fmt.Sprintf("bench-%s-%d", kind, time.Now().UnixNano())
}

// The raw limit's concurrency: the best of 4, 8 and 16 at a time over the
// runs of BenchmarkConcurrency on this machine (docs/bench.md), the same
// in both topologies: the daemon is the bottleneck from about 4 on, and
// the medians differ by less than their spread from run to run.
const (
	rawUpConcurrency   = 16
	rawDownConcurrency = 8
)

// BenchmarkCampaign16 brings a campaign of the workbench grader and 16
// workspaces up (until every one is ready), attests it and tears it down
// (cleanup with verification), per topology, beside the raw limit and the
// sequential docker CLI on the same containers and networks, in rotating
// order each round. The raw and CLI teardowns remove their containers once
// ready and after as long again as the campaign's attestation took (see
// rawSet.settle). Families (internal/testkit/testlatency): up-, raw-up-,
// cli-up- (bring-up), down-, raw-down-, cli-down- (teardown), attest- (the
// whole attestation), attest-probes- (its probes), attest-noprobes- (the
// rest).
//
//	go test -run '^$' -bench Campaign16 -benchtime 5x ./adapter/docker
func BenchmarkCampaign16(b *testing.B) {
	for _, topo := range []campaign.Topology{campaign.TopologyNone, campaign.TopologyPerAgent} {
		b.Run(string(topo), func(b *testing.B) {
			a, cli, img := benchAdapter(b)
			var up, rawUpS, cliUpS, down, rawDownS, cliDownS, att, attProbes, attRest testlatency.Samples
			n := rounds(b, 5)
			for r := range n {
				steps := []func(){
					func() { // agentpen
						id := benchCampaignID(string(topo))
						b.Cleanup(func() { removeLabelled(cli, id) })
						spec := benchSpec(id, img, 16, topo)
						start := time.Now()
						if _, err := a.BringUp(b.Context(), spec); err != nil {
							b.Fatal(err)
						}
						up = append(up, time.Since(start))
						rep, err := a.Attest(b.Context(), id, adapter.AttestOptions{})
						if err != nil {
							b.Fatal(err)
						}
						if !rep.OK {
							b.Fatalf("not attested: %v", rep.FailureLines())
						}
						total := time.Duration(rep.Timings.TotalMS * float64(time.Millisecond))
						probes := time.Duration(rep.Timings.ProbesMS * float64(time.Millisecond))
						att, attProbes, attRest = append(att, total), append(attProbes, probes), append(attRest, total-probes)
						start = time.Now()
						crep, err := a.Cleanup(b.Context(), id)
						if err != nil {
							b.Fatal(err)
						}
						down = append(down, time.Since(start))
						b.Logf("round %d agentpen: up %v, attest %v (probes %v), cleanup %v %v", r, up[len(up)-1], total, probes, down[len(down)-1], crep.Timings.PhasesMS)
					},
					func() { // raw SDK
						s := newRawSet(b, a, cli, benchSpec(benchCampaignID("raw"), img, 16, topo))
						start := time.Now()
						ids, err := rawUp(b.Context(), cli, s, rawUpConcurrency)
						rawUpS = append(rawUpS, time.Since(start))
						s.created()
						if err != nil {
							b.Fatal(err)
						}
						s.settle(b, a, ids, lastOf(att))
						start = time.Now()
						if err := rawDown(b.Context(), cli, ids, rawDownConcurrency); err != nil {
							b.Fatal(err)
						}
						rawDownS = append(rawDownS, time.Since(start))
						s.done(cli)
						b.Logf("round %d raw: up %v, down %v", r, rawUpS[len(rawUpS)-1], rawDownS[len(rawDownS)-1])
					},
					func() { // docker CLI
						s := newRawSet(b, a, cli, benchSpec(benchCampaignID("cli"), img, 16, topo))
						start := time.Now()
						ids, err := cliUp(b.Context(), s)
						cliUpS = append(cliUpS, time.Since(start))
						s.created()
						if err != nil {
							b.Fatal(err)
						}
						s.settle(b, a, ids, lastOf(att))
						start = time.Now()
						if err := cliDown(b.Context(), s, ids); err != nil {
							b.Fatal(err)
						}
						cliDownS = append(cliDownS, time.Since(start))
						s.done(cli)
						b.Logf("round %d cli: up %v, down %v", r, cliUpS[len(cliUpS)-1], cliDownS[len(cliDownS)-1])
					},
				}
				for i := range steps {
					steps[(i+r)%len(steps)]()
				}
			}
			up.Report(b, "up-")
			rawUpS.Report(b, "raw-up-")
			cliUpS.Report(b, "cli-up-")
			down.Report(b, "down-")
			rawDownS.Report(b, "raw-down-")
			cliDownS.Report(b, "cli-down-")
			att.Report(b, "attest-")
			attProbes.Report(b, "attest-probes-")
			attRest.Report(b, "attest-noprobes-")
		})
	}
}

// lastOf is the last sample of s, 0 when there is none.
func lastOf(s testlatency.Samples) time.Duration {
	if len(s) == 0 {
		return 0
	}
	return s[len(s)-1]
}

// scaleSizes are the campaign sizes BenchmarkCampaignScale measures.
var scaleSizes = []int{1, 8, 16, 32, 64}

// BenchmarkCampaignScale brings up (until ready) and tears down (cleanup
// with verification) a campaign of the workbench grader and 1, 8, 16, 32
// and 64 workspaces, per topology, sizes in rotating order from round to
// round: families up-<n>- and down-<n>-. make bench shows each size with
// the cost per added workspace. Three rounds by default (a round brings
// up 121 workspaces).
//
//	go test -run '^$' -bench CampaignScale -benchtime 1x ./adapter/docker
func BenchmarkCampaignScale(b *testing.B) {
	for _, topo := range []campaign.Topology{campaign.TopologyNone, campaign.TopologyPerAgent} {
		b.Run(string(topo), func(b *testing.B) {
			a, cli, img := benchAdapter(b)
			up := make([]testlatency.Samples, len(scaleSizes))
			down := make([]testlatency.Samples, len(scaleSizes))
			for r := range rounds(b, 3) {
				for k := range scaleSizes {
					i := (k + r) % len(scaleSizes)
					n := scaleSizes[i]
					id := benchCampaignID(string(topo))
					b.Cleanup(func() { removeLabelled(cli, id) })
					start := time.Now()
					if _, err := a.BringUp(b.Context(), benchSpec(id, img, n, topo)); err != nil {
						b.Fatal(err)
					}
					up[i] = append(up[i], time.Since(start))
					start = time.Now()
					if _, err := a.Cleanup(b.Context(), id); err != nil {
						b.Fatal(err)
					}
					down[i] = append(down[i], time.Since(start))
				}
			}
			for i, n := range scaleSizes {
				up[i].Report(b, fmt.Sprintf("up-%d-", n))
				down[i].Report(b, fmt.Sprintf("down-%d-", n))
			}
		})
	}
}

// BenchmarkPoolClaim measures a claim of a pooled workspace to its first
// tool answer (a stateless list_files step on the workspace's socket):
// warm- while the pool lasts (a campaign with a pool of 16, claimed 16
// times), cold- once it is drained (4 more claims, each made, awaited and
// attested for itself).
func BenchmarkPoolClaim(b *testing.B) {
	a, cli, img := benchAdapter(b)
	var warm, cold testlatency.Samples
	for range rounds(b, 1) {
		id := benchCampaignID("pool")
		b.Cleanup(func() { removeLabelled(cli, id) })
		spec := benchSpec(id, img, 1, campaign.TopologyNone)
		spec.Pool = 16
		if _, rep, err := a.BringUpAttested(b.Context(), spec, adapter.AttestOptions{}); err != nil || !rep.OK {
			b.Fatalf("bring-up: %v", err)
		}
		for i := range spec.Pool + 4 {
			start := time.Now()
			cl, err := a.Claim(b.Context(), id, "software/median@2", fmt.Sprint("b", i))
			if err != nil {
				b.Fatal(err)
			}
			hc := UnixHTTPClient(cl.Workspace.Socket, 30*time.Second)
			resp, err := hc.Post("http://workbench/step", "application/json", strings.NewReader(`{"action":{"tool":"list_files","args":{}}}`))
			if err != nil || resp.StatusCode != 200 {
				b.Fatalf("first tool call: %v %v", err, resp)
			}
			resp.Body.Close()
			hc.CloseIdleConnections()
			d := time.Since(start)
			if cl.Warm {
				warm = append(warm, d)
			} else {
				cold = append(cold, d)
			}
		}
		if _, err := a.Cleanup(b.Context(), id); err != nil {
			b.Fatal(err)
		}
	}
	warm.Report(b, "warm-")
	cold.Report(b, "cold-")
}
