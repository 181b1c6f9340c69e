package docker

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sync/errgroup"

	"github.com/agentpen/agentpen/adapter/drivertest"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/testlatency"
	"github.com/agentpen/agentpen/store"
)

// The exploration benchmarks behind the campaign rows of docs/bench.md:
// where the time of a bring-up and a teardown goes (every SDK call timed),
// which concurrency is best, how the daemon handles agent networks. Not
// part of make bench: AGENTPEN_BENCH_EXPLORE=1 runs them, e.g.
//
//	AGENTPEN_BENCH_EXPLORE=1 go test -run '^$' -bench CampaignProfile -benchtime 2x ./adapter/docker

// explore skips an exploration benchmark unless AGENTPEN_BENCH_EXPLORE=1.
func explore(b *testing.B) {
	b.Helper()
	if os.Getenv("AGENTPEN_BENCH_EXPLORE") != "1" {
		b.Skip("exploration: AGENTPEN_BENCH_EXPLORE=1 runs it")
	}
}

// BenchmarkConcurrency finds the best concurrency of the raw limit and of
// the adapter (Parallelism) on this machine: 1 + 16 containers (and 16
// networks, per-agent) brought up and removed by direct SDK calls at 4, 8
// and 16 at a time, and by the adapter at Parallelism 4, 8 and 16, each
// round trying every one in rotating order. Not part of make bench
// (AGENTPEN_BENCH_EXPLORE=1 runs it).
func BenchmarkConcurrency(b *testing.B) {
	explore(b)
	type config struct {
		raw bool
		n   int
	}
	var configs []config
	for _, n := range []int{4, 8, 16} {
		configs = append(configs, config{true, n}, config{false, n})
	}
	if v := os.Getenv("AGENTPEN_BENCH_CONFIGS"); v != "" { // e.g. raw8,adapter8
		configs = nil
		for _, f := range strings.Split(v, ",") {
			raw := strings.HasPrefix(f, "raw")
			n, err := strconv.Atoi(strings.TrimPrefix(strings.TrimPrefix(f, "raw"), "adapter"))
			if err != nil {
				b.Fatalf("AGENTPEN_BENCH_CONFIGS: %q", f)
			}
			configs = append(configs, config{raw, n})
		}
	}
	for _, topo := range []campaign.Topology{campaign.TopologyNone, campaign.TopologyPerAgent} {
		b.Run(string(topo), func(b *testing.B) {
			a, cli, img := benchAdapter(b)
			upS := map[config]*testlatency.Samples{}
			downS := map[config]*testlatency.Samples{}
			for _, c := range configs {
				upS[c], downS[c] = &testlatency.Samples{}, &testlatency.Samples{}
			}
			for r := range rounds(b, 3) {
				for i := range configs {
					c := configs[(i+r)%len(configs)]
					if !c.raw {
						a.Parallelism = c.n
						id := benchCampaignID(string(topo))
						b.Cleanup(func() { removeLabelled(cli, id) })
						start := time.Now()
						if _, err := a.BringUp(b.Context(), benchSpec(id, img, 16, topo)); err != nil {
							b.Fatal(err)
						}
						*upS[c] = append(*upS[c], time.Since(start))
						start = time.Now()
						if _, err := a.Cleanup(b.Context(), id); err != nil {
							b.Fatal(err)
						}
						*downS[c] = append(*downS[c], time.Since(start))
						continue
					}
					s := newRawSet(b, a, cli, benchSpec(benchCampaignID("raw"), img, 16, topo))
					start := time.Now()
					ids, err := rawUp(b.Context(), cli, s, c.n)
					*upS[c] = append(*upS[c], time.Since(start))
					s.created()
					if err != nil {
						b.Fatal(err)
					}
					start = time.Now()
					if err := rawDown(b.Context(), cli, ids, c.n); err != nil {
						b.Fatal(err)
					}
					*downS[c] = append(*downS[c], time.Since(start))
					s.done(cli)
				}
			}
			for _, c := range configs {
				who := "adapter"
				if c.raw {
					who = "raw"
				}
				fmt.Fprintf(os.Stderr, "%s %-7s %2d: up %v down %v (up %v, down %v)\n", topo, who, c.n, upS[c].Median().Round(time.Millisecond), downS[c].Median().Round(time.Millisecond), *upS[c], *downS[c])
			}
		})
	}
}

// callLog records the SDK calls an adapter makes (for the exploration
// benchmarks' timing breakdown).
type callLog struct {
	mu    sync.Mutex
	t0    time.Time
	calls []call
}

type call struct {
	name       string
	start, dur time.Duration
}

func (l *callLog) since(name string, start time.Time) {
	l.mu.Lock()
	l.calls = append(l.calls, call{name: name, start: start.Sub(l.t0), dur: time.Since(start)})
	l.mu.Unlock()
}

// reset starts a new timeline.
func (l *callLog) reset() {
	l.mu.Lock()
	l.t0, l.calls = time.Now(), nil
	l.mu.Unlock()
}

// summary is, per call, its count, first start, last end, median and
// total duration.
func (l *callLog) summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	by := map[string][]call{}
	for _, c := range l.calls {
		by[c.name] = append(by[c.name], c)
	}
	var out []string
	for name, cs := range by {
		var s testlatency.Samples
		var tot time.Duration
		first, last := cs[0].start, time.Duration(0)
		for _, c := range cs {
			s = append(s, c.dur)
			tot += c.dur
			first = min(first, c.start)
			last = max(last, c.start+c.dur)
		}
		out = append(out, fmt.Sprintf("%-22s n=%3d  from %6dms to %6dms  median %5dms  max %5dms  sum %6dms", name, len(cs),
			first.Milliseconds(), last.Milliseconds(), s.Median().Milliseconds(), s.Quantile(1).Milliseconds(), tot.Milliseconds()))
	}
	sort.Slice(out, func(i, j int) bool { return strings.Fields(out[i])[3] < strings.Fields(out[j])[3] })
	return strings.Join(out, "\n")
}

// timeline is every call in order of start.
func (l *callLog) timeline() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	cs := slices.Clone(l.calls)
	sort.Slice(cs, func(i, j int) bool { return cs[i].start < cs[j].start })
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "%6d +%5d  %s\n", c.start.Milliseconds(), c.dur.Milliseconds(), c.name)
	}
	return b.String()
}

// logHandler records the adapter's log lines in a callLog (as calls of
// no duration).
type logHandler struct{ log *callLog }

func (h logHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h logHandler) Handle(_ context.Context, r slog.Record) error {
	msg := "log: " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "role" || a.Key == "name" && !strings.Contains(msg, "created") {
			msg += " " + a.Value.String()
		}
		return true
	})
	h.log.since(msg, time.Now())
	return nil
}
func (h logHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h logHandler) WithGroup(string) slog.Handler      { return h }

// timedAPI is the SDK client with the calls campaigns make timed.
type timedAPI struct {
	dockerAPI
	log *callLog
}

func (t timedAPI) ImageInspect(ctx context.Context, ref string, opts ...client.ImageInspectOption) (image.InspectResponse, error) {
	defer t.log.since("ImageInspect", time.Now())
	return t.dockerAPI.ImageInspect(ctx, ref, opts...)
}

func (t timedAPI) NetworkCreate(ctx context.Context, name string, o network.CreateOptions) (network.CreateResponse, error) {
	defer t.log.since("NetworkCreate", time.Now())
	return t.dockerAPI.NetworkCreate(ctx, name, o)
}

func (t timedAPI) NetworkInspect(ctx context.Context, id string, o network.InspectOptions) (network.Inspect, error) {
	defer t.log.since("NetworkInspect", time.Now())
	return t.dockerAPI.NetworkInspect(ctx, id, o)
}

func (t timedAPI) NetworkRemove(ctx context.Context, id string) error {
	defer t.log.since("NetworkRemove", time.Now())
	return t.dockerAPI.NetworkRemove(ctx, id)
}

func (t timedAPI) ContainerCreate(ctx context.Context, cfg *container.Config, hc *container.HostConfig, nc *network.NetworkingConfig, pl *ocispec.Platform, name string) (container.CreateResponse, error) {
	defer t.log.since("ContainerCreate", time.Now())
	return t.dockerAPI.ContainerCreate(ctx, cfg, hc, nc, pl, name)
}

func (t timedAPI) ContainerStart(ctx context.Context, id string, o container.StartOptions) error {
	defer t.log.since("ContainerStart", time.Now())
	return t.dockerAPI.ContainerStart(ctx, id, o)
}

func (t timedAPI) ContainerInspect(ctx context.Context, id string) (container.InspectResponse, error) {
	defer t.log.since("ContainerInspect", time.Now())
	return t.dockerAPI.ContainerInspect(ctx, id)
}

func (t timedAPI) ContainerRemove(ctx context.Context, id string, o container.RemoveOptions) error {
	defer t.log.since("ContainerRemove", time.Now())
	return t.dockerAPI.ContainerRemove(ctx, id, o)
}

func (t timedAPI) ContainerList(ctx context.Context, o container.ListOptions) ([]container.Summary, error) {
	defer t.log.since("ContainerList", time.Now())
	return t.dockerAPI.ContainerList(ctx, o)
}

func (t timedAPI) NetworkList(ctx context.Context, o network.ListOptions) ([]network.Summary, error) {
	defer t.log.since("NetworkList", time.Now())
	return t.dockerAPI.NetworkList(ctx, o)
}

func (t timedAPI) NetworkConnect(ctx context.Context, nid, cid string, cfg *network.EndpointSettings) error {
	defer t.log.since("NetworkConnect", time.Now())
	return t.dockerAPI.NetworkConnect(ctx, nid, cid, cfg)
}

func (t timedAPI) ContainerExecCreate(ctx context.Context, id string, o container.ExecOptions) (container.ExecCreateResponse, error) {
	defer t.log.since("ContainerExecCreate", time.Now())
	return t.dockerAPI.ContainerExecCreate(ctx, id, o)
}

func (t timedAPI) ContainerExecAttach(ctx context.Context, id string, o container.ExecAttachOptions) (types.HijackedResponse, error) {
	defer t.log.since("ContainerExecAttach", time.Now())
	return t.dockerAPI.ContainerExecAttach(ctx, id, o)
}

func (t timedAPI) ContainerExecInspect(ctx context.Context, id string) (container.ExecInspect, error) {
	defer t.log.since("ContainerExecInspect", time.Now())
	return t.dockerAPI.ContainerExecInspect(ctx, id)
}

// timed is a copy of a whose SDK calls are logged in l.
func timed(a *drivertest.Harness, l *callLog) *drivertest.Harness {
	d := dk(a.Adapter)
	c := *a
	c.Adapter = withDriver(a.Adapter, &Driver{api: timedAPI{dockerAPI: d.api, log: l}, host: d.host, daemon: d.daemon, realSocket: d.realSocket})
	return &c
}

// BenchmarkCampaignProfile brings up and tears down a 16-workspace campaign
// per topology with every SDK call timed, and logs the breakdown (which
// calls, when, how long). Not part of make bench
// (AGENTPEN_BENCH_EXPLORE=1 runs it).
func BenchmarkCampaignProfile(b *testing.B) {
	explore(b)
	for _, topo := range []campaign.Topology{campaign.TopologyNone, campaign.TopologyPerAgent} {
		b.Run(string(topo), func(b *testing.B) {
			a0, cli, img := benchAdapter(b)
			l := &callLog{}
			a := timed(a0, l)
			a.Logger = slog.New(logHandler{l})
			if v, err := strconv.Atoi(os.Getenv("AGENTPEN_BENCH_PARALLELISM")); err == nil {
				a.Parallelism = v
			}
			for range rounds(b, 2) {
				id := benchCampaignID(string(topo))
				b.Cleanup(func() { removeLabelled(cli, id) })
				l.reset()
				start := time.Now()
				if _, err := a.BringUp(b.Context(), benchSpec(id, img, 16, topo)); err != nil {
					b.Fatal(err)
				}
				fmt.Fprintf(os.Stderr, "%s bring-up %v\n%s\n", topo, time.Since(start), l.summary())
				if os.Getenv("AGENTPEN_BENCH_TIMELINE") == "1" {
					fmt.Fprint(os.Stderr, l.timeline())
				}
				l.reset()
				start = time.Now()
				rep, err := a.Cleanup(b.Context(), id)
				if err != nil {
					b.Fatal(err)
				}
				fmt.Fprintf(os.Stderr, "%s cleanup %v %v\n%s\n", topo, time.Since(start), rep.Timings.PhasesMS, l.summary())
				if os.Getenv("AGENTPEN_BENCH_TIMELINE") == "1" {
					fmt.Fprint(os.Stderr, l.timeline())
				}

				s := newRawSet(b, a0, cli, benchSpec(benchCampaignID("raw"), img, 16, topo))
				raw := timedAPI{dockerAPI: dk(a0.Adapter).api, log: l}
				l.reset()
				start = time.Now()
				ids, err := rawUp(b.Context(), raw, s, rawUpConcurrency)
				s.created()
				if err != nil {
					b.Fatal(err)
				}
				fmt.Fprintf(os.Stderr, "%s raw up %v\n%s\n", topo, time.Since(start), l.summary())
				l.reset()
				start = time.Now()
				if err := rawDown(b.Context(), raw, ids, rawDownConcurrency); err != nil {
					b.Fatal(err)
				}
				fmt.Fprintf(os.Stderr, "%s raw down %v\n%s\n", topo, time.Since(start), l.summary())
				if os.Getenv("AGENTPEN_BENCH_TIMELINE") == "1" {
					fmt.Fprint(os.Stderr, l.timeline())
				}
				s.done(cli)
			}
		})
	}
}

// BenchmarkTeardownOrder compares two raw per-agent teardowns: containers
// then networks (rawDown), and the server's networks disconnected first,
// each network removed as soon as its workspace is gone. Exploration only
// (AGENTPEN_BENCH_EXPLORE=1).
func BenchmarkTeardownOrder(b *testing.B) {
	explore(b)
	a, cli, img := benchAdapter(b)
	var plain, disc testlatency.Samples
	for r := range rounds(b, 3) {
		for k := range 2 {
			s := newRawSet(b, a, cli, benchSpec(benchCampaignID("raw"), img, 16, campaign.TopologyPerAgent))
			ids, err := rawUp(b.Context(), cli, s, 16)
			s.created()
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			if (k+r)%2 == 0 {
				if err := rawDown(b.Context(), cli, ids, 16); err != nil {
					b.Fatal(err)
				}
				plain = append(plain, time.Since(start))
			} else {
				g := new(errgroup.Group)
				srv := ids.containers[0]
				for i, nid := range ids.networks {
					ws := ids.containers[i+1]
					g.Go(func() error {
						if err := cli.ContainerRemove(b.Context(), ws, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
							return err
						}
						if err := cli.NetworkDisconnect(b.Context(), nid, srv, true); err != nil {
							return err
						}
						return cli.NetworkRemove(b.Context(), nid)
					})
				}
				if err := g.Wait(); err != nil {
					b.Fatal(err)
				}
				if err := cli.ContainerRemove(b.Context(), srv, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
					b.Fatal(err)
				}
				disc = append(disc, time.Since(start))
			}
			s.done(cli)
		}
	}
	fmt.Fprintf(os.Stderr, "plain %v %v\ndisconnect first %v %v\n", plain.Median(), plain, disc.Median(), disc)
}

// BenchmarkNetworkOps times 16 empty agent networks created and removed
// one at a time and all at once (is the daemon serialising them?).
// Exploration only (AGENTPEN_BENCH_EXPLORE=1).
func BenchmarkNetworkOps(b *testing.B) {
	explore(b)
	a, cli, _ := benchAdapter(b)
	ctx := b.Context()
	res := map[string]*testlatency.Samples{}
	for r := range rounds(b, 3) {
		for k := range 2 {
			conc := []int{1, 16}[(k+r)%2]
			locks, err := a.Locks()
			if err != nil {
				b.Fatal(err)
			}
			lock, err := locks.Take(ctx, subnetLock, store.DefaultLockWait)
			if err != nil {
				b.Fatal(err)
			}
			subnets, err := dk(a.Adapter).allocateSubnets(ctx, 16)
			if err != nil {
				b.Fatal(err)
			}
			label := map[string]string{campaign.LabelCampaign: benchCampaignID("net")}
			b.Cleanup(func() { removeLabelled(cli, label[campaign.LabelCampaign]) })
			ids := make([]string, 16)
			g := new(errgroup.Group)
			g.SetLimit(conc)
			start := time.Now()
			for i := range ids {
				g.Go(func() error {
					resp, err := cli.NetworkCreate(ctx, fmt.Sprintf("%s-%d", label[campaign.LabelCampaign], i), network.CreateOptions{Driver: "bridge", Internal: true, Labels: label,
						IPAM: &network.IPAM{Driver: "default", Config: []network.IPAMConfig{{Subnet: subnets[i].String()}}}})
					ids[i] = resp.ID
					return err
				})
			}
			if err := g.Wait(); err != nil {
				b.Fatal(err)
			}
			key := fmt.Sprintf("create conc %d", conc)
			if res[key] == nil {
				res[key] = &testlatency.Samples{}
			}
			*res[key] = append(*res[key], time.Since(start))
			lock.Unlock()
			g = new(errgroup.Group)
			g.SetLimit(conc)
			start = time.Now()
			for _, id := range ids {
				g.Go(func() error { return cli.NetworkRemove(ctx, id) })
			}
			if err := g.Wait(); err != nil {
				b.Fatal(err)
			}
			key = fmt.Sprintf("remove conc %d", conc)
			if res[key] == nil {
				res[key] = &testlatency.Samples{}
			}
			*res[key] = append(*res[key], time.Since(start))
		}
	}
	for k, s := range res {
		fmt.Fprintf(os.Stderr, "%s: median %v %v\n", k, s.Median(), *s)
	}
}

// BenchmarkTeardownAge: the raw removal of 1 + 16 containers (none
// topology) right after they were started and 3 s later (as long as the
// adapter's readiness and attestation keep them up before its cleanup).
func BenchmarkTeardownAge(b *testing.B) {
	explore(b)
	a, cli, img := benchAdapter(b)
	res := map[time.Duration]*testlatency.Samples{0: {}, 3 * time.Second: {}}
	for r := range rounds(b, 3) {
		for k := range 2 {
			age := time.Duration((k+r)%2) * 3 * time.Second
			s := newRawSet(b, a, cli, benchSpec(benchCampaignID("raw"), img, 16, campaign.TopologyNone))
			ids, err := rawUp(b.Context(), cli, s, rawUpConcurrency)
			s.created()
			if err != nil {
				b.Fatal(err)
			}
			time.Sleep(age)
			start := time.Now()
			if err := rawDown(b.Context(), cli, ids, rawDownConcurrency); err != nil {
				b.Fatal(err)
			}
			*res[age] = append(*res[age], time.Since(start))
			s.done(cli)
		}
	}
	for age, s := range res {
		fmt.Fprintf(os.Stderr, "removed %v after start: median %v %v\n", age, s.Median(), *s)
	}
}

// BenchmarkCleanupOverhead: a ready campaign of 1 + 16 (none topology)
// removed by the adapter's cleanup, against the same kind of campaign's
// containers removed by direct SDK calls (then the cleanup finds them
// gone): the adapter's own cost, with the containers in the same state.
func BenchmarkCleanupOverhead(b *testing.B) {
	explore(b)
	a, cli, img := benchAdapter(b)
	var clean, raw testlatency.Samples
	for r := range rounds(b, 3) {
		for k := range 2 {
			id := benchCampaignID("ovh")
			b.Cleanup(func() { removeLabelled(cli, id) })
			c, err := a.BringUp(b.Context(), benchSpec(id, img, 16, campaign.TopologyNone))
			if err != nil {
				b.Fatal(err)
			}
			if (k+r)%2 == 0 {
				start := time.Now()
				if _, err := a.Cleanup(b.Context(), id); err != nil {
					b.Fatal(err)
				}
				clean = append(clean, time.Since(start))
				continue
			}
			ids := rawIDs{containers: []string{c.ServerID}}
			for _, w := range c.Workspaces {
				ids.containers = append(ids.containers, w.ContainerID)
			}
			start := time.Now()
			if err := rawDown(b.Context(), cli, ids, rawDownConcurrency); err != nil {
				b.Fatal(err)
			}
			raw = append(raw, time.Since(start))
			if _, err := a.Cleanup(b.Context(), id); err != nil {
				b.Fatal(err)
			}
		}
	}
	fmt.Fprintf(os.Stderr, "cleanup median %v %v\nraw removal of the same median %v %v\n", clean.Median(), clean, raw.Median(), raw)
}
