package adapter

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/custody"
	"github.com/agentpen/agentpen/store"
	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"golang.org/x/sync/errgroup"
)

// attestParallelism bounds concurrent daemon calls and execs of an
// attestation: the probes of every workspace must wait out their
// timeouts together.
const attestParallelism = 32

// AttestOptions configure Attest; zero values take the defaults.
type AttestOptions struct {
	// EgressTarget is a host:port that only outbound NAT reaches; each
	// workspace connects to it (reachable under egress nat, unreachable
	// under internal). Empty: egress is attested from the network's
	// Internal flag alone, and the report says so.
	EgressTarget string
	// ProbeTimeout bounds each probe (default attest.DefaultProbeTimeoutMS).
	ProbeTimeout time.Duration
	// ProbeCommand is the probe inside the containers (default
	// attest.DefaultProbeCommand()).
	ProbeCommand []string
	// HostLoopback are the addresses by which a container would reach the
	// host's loopback (default attest.DefaultHostLoopback).
	HostLoopback []string
}

// ErrNotUp is returned (wrapped) for a campaign whose latest generation
// is not up (campaign.Status.Up): its bring-up never reached readiness,
// or it was removed, or it is being removed.
var ErrNotUp = errors.New("campaign is not up")

// Attest proves what the campaign is, from the daemon's own answers and
// from probes run inside its containers, writes the report as a new file
// of the campaign (never over another) and journals its verdict, holding
// the campaign's lock (a down or a bring-up of it waits for the report).
// It returns the report and its path. The error is for a campaign that
// cannot be attested at all (an unusable state, a report that cannot be
// written) and, wrapping ErrNotUp, for one whose latest generation is not
// up: nothing is observed or written. A campaign that is up but not what
// it should be is a report with OK false.
func (a *Adapter) Attest(ctx context.Context, c *store.Campaign, opts AttestOptions) (*attest.Report, string, error) {
	lock, err := a.lockCampaign(ctx, c)
	if err != nil {
		return nil, "", err
	}
	defer lock.Unlock()
	j, err := a.openJournal(c)
	if err != nil {
		return nil, "", err
	}
	defer j.Close()
	_, _, rep, path, err := a.attest(ctx, c, j, opts, true)
	return rep, path, err
}

// attest is Attest without the lock (its caller holds it), also
// returning the evidence (for the fixtures). With needUp it first
// refuses a campaign that is not up (BringUpAttested's is pending).
func (a *Adapter) attest(ctx context.Context, c *store.Campaign, j *campaign.Journal, opts AttestOptions, needUp bool) (attest.Source, attest.Observation, *attest.Report, string, error) {
	start := time.Now()
	st, err := c.Read()
	if err != nil {
		return attest.Source{}, attest.Observation{}, nil, "", fmt.Errorf("campaign %q: %w", c.ID, err)
	}
	if needUp && !st.Status.Up() {
		return attest.Source{}, attest.Observation{}, nil, "", &notUpError{fmt.Sprintf("campaign %s is not up: %s; nothing was attested", c.ID, st.Reason(c.ID))}
	}
	src, err := a.attestSource(c, st)
	if err != nil {
		return src, attest.Observation{}, nil, "", err
	}
	key, err := a.signingKey(c)
	if err != nil {
		return src, attest.Observation{}, nil, "", err
	}
	x, err := attest.Expect(src)
	if err != nil {
		return src, attest.Observation{}, nil, "", err
	}
	obs, err := a.observeCampaign(ctx, x, opts)
	if err != nil {
		return src, obs, nil, "", err
	}
	if ctx.Err() != nil {
		// Probes cut short would read as failures the campaign does not
		// have: no report rather than a false one.
		return src, obs, nil, "", fmt.Errorf("attestation of %s interrupted, no report written: %w", c.ID, context.Cause(ctx))
	}
	obs.Timings.TotalMS = msSince(start)
	rep := x.Evaluate(obs)
	path, err := a.writeAttestation(ctx, c, j, key, st.Latest().N, rep)
	return src, obs, rep, path, err
}

// writeAttestation writes rep as a new report of generation gen, signed
// beside it, and journals its verdict (with its scope: a refill's slots).
func (a *Adapter) writeAttestation(ctx context.Context, c *store.Campaign, j *campaign.Journal, key ed25519.PrivateKey, gen int, rep *attest.Report) (string, error) {
	b, err := rep.Marshal()
	if err != nil {
		return "", fmt.Errorf("attestation report: %w", err)
	}
	f, env, err := custody.WriteReport(ctx, c, key, custody.Attestation, gen, b, custody.ImageSubjects(rep)...)
	if err != nil {
		return "", err
	}
	verdict := campaign.AttestOK
	if !rep.OK {
		verdict = campaign.AttestFailed
	}
	if err := j.Append(campaign.Record{Op: campaign.OpAttested, Gen: gen, Status: verdict, Report: f.Name, Digest: f.Digest, Envelope: env, Slots: rep.Scope}); err != nil {
		return "", fmt.Errorf("journal the attestation's verdict: %w", err)
	}
	a.log().Info("attestation", "campaign", c.ID, "ok", rep.OK, "failed_checks", len(rep.FailedChecks), "scope", rep.Scope,
		"daemon_ms", rep.Timings.DaemonMS, "probes_ms", rep.Timings.ProbesMS)
	return c.ReportPath(f.Name), nil
}

// notUpError is the error of a campaign whose latest generation is not
// up; it is an ErrNotUp.
type notUpError struct{ msg string }

func (e *notUpError) Error() string { return e.msg }
func (e *notUpError) Unwrap() error { return ErrNotUp }

// daemonRecord is the daemon a bring-up runs on, for its state directory.
func (a *Adapter) daemonRecord() attest.DaemonRecord {
	d := a.Docker.Daemon()
	return attest.DaemonRecord{ID: d.ID, ServerVersion: d.ServerVersion, RootDir: d.DockerRootDir, Rootless: d.Rootless, Endpoint: a.Docker.Host().URL}
}

// attestSource reads what the campaign's state directory says of its
// latest generation (st): its spec, its journal and the daemon recorded
// at bring-up (absent: left zero, and the daemon checks fail), plus the
// create settings and agentpen's key status.
func (a *Adapter) attestSource(c *store.Campaign, st store.State) (attest.Source, error) {
	var src attest.Source
	gen := st.Latest().N
	var err error
	if src.Spec, err = c.Spec(gen); err != nil {
		return src, err
	}
	if src.Records, _, err = c.Records(); err != nil {
		return src, fmt.Errorf("campaign %q: %w", c.ID, err)
	}
	if src.Bringup, _, err = c.Daemon(gen); err != nil {
		return src, fmt.Errorf("campaign %q: %w", c.ID, err)
	}
	opts, err := c.PlanOptions()
	if err != nil {
		return src, err
	}
	src.AgentKey = opts.AgentKey
	p, err := attest.PinnedPlan(src)
	if err != nil {
		return src, fmt.Errorf("campaign %q: %w", c.ID, err)
	}
	src.Endpoint, src.SocketPath = a.Docker.Host().URL, a.Docker.Host().SocketPath
	src.Roles = roleSettings(p, src.SocketPath)
	src.KeyPolicy = a.keyPolicy()
	src.Producer = producer()
	src.AgentpenKey = src.KeyPolicy.Check(a.getenv(p.Server.Spec.APIKeyEnv))
	return src, nil
}

// roleSettings are the hardening, limits and DNS the create calls ask for,
// read from the very specs bring-up uses.
func roleSettings(p *campaign.Plan, socket string) map[string]attest.RoleSettings {
	from := func(hc *container.HostConfig) attest.RoleSettings {
		rs := attest.RoleSettings{
			CapAdd: slices.Clone(hc.CapAdd), CapDrop: slices.Clone(hc.CapDrop), SecurityOpt: slices.Clone(hc.SecurityOpt),
			MaskedPaths: slices.Clone(hc.MaskedPaths), ReadonlyPaths: slices.Clone(hc.ReadonlyPaths),
			ReadOnlyRoot: hc.ReadonlyRootfs, Tmpfs: clone(hc.Tmpfs), Init: hc.Init != nil && *hc.Init, Memory: hc.Memory,
		}
		if hc.PidsLimit != nil {
			rs.PidsLimit = *hc.PidsLimit
		}
		rs.DNS.Servers, rs.DNS.Search, rs.DNS.Options, rs.DNS.ExtraHosts = hc.DNS, hc.DNSSearch, hc.DNSOptions, hc.ExtraHosts
		return rs
	}
	out := map[string]attest.RoleSettings{campaign.RoleServer: from(serverSpec(p, "", nil, socket, "/").HostConfig)}
	if len(p.Agents) > 0 {
		out[campaign.RoleWork] = from(workspaceSpec(p, p.Agents[0], "/", "/", "").HostConfig)
	}
	return out
}

// observeCampaign asks the daemon about everything the journal recorded
// and runs the probes.
func (a *Adapter) observeCampaign(ctx context.Context, x *attest.Expectation, opts AttestOptions) (attest.Observation, error) {
	src := x.Source()
	obs := attest.Observation{At: time.Now().UTC(), Endpoint: a.Docker.Host().URL, Networks: map[string]attest.Raw{}, Containers: map[string]attest.Raw{}, Images: map[string]attest.Raw{}}
	start := time.Now()
	a.observeDaemon(ctx, src, &obs)
	obs.Timings.DaemonMS = msSince(start)

	start = time.Now()
	env := attest.ProbeEnv{Command: opts.ProbeCommand, HostLoopback: opts.HostLoopback, EgressTarget: opts.EgressTarget, Peers: x.PeerAddrs(obs)}
	if opts.ProbeTimeout > 0 {
		env.TimeoutMS = int(opts.ProbeTimeout / time.Millisecond)
	}
	obs.ProbeEnv = env
	ls, err := openListeners(x.Plan().Egress == campaign.EgressInternal)
	if err != nil {
		return obs, err
	}
	execs := x.PlanExecs(env, ls.describe())
	obs.Runs = a.runProbes(ctx, execs, env)
	ls.close()
	obs.Listeners = ls.describe()
	obs.Timings.ProbesMS = msSince(start)
	return obs, nil
}

// observeDaemon reads /info, the journalled network and containers (by
// id), the images the plan pins, and the lists of everything carrying the
// campaign's label, at most attestParallelism calls at once.
func (a *Adapter) observeDaemon(ctx context.Context, src attest.Source, obs *attest.Observation) {
	var mu sync.Mutex
	set := func(f func()) { mu.Lock(); f(); mu.Unlock() }
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(attestParallelism)
	label := url.Values{"filters": {`{"label":{"` + campaign.LabelCampaign + "=" + src.Spec.CampaignID + `":true}}`}}
	g.Go(func() error { r := a.Docker.rawGet(gctx, "/info", nil); set(func() { obs.Info = r }); return nil })
	g.Go(func() error {
		q := url.Values{"all": {"1"}, "filters": label["filters"]}
		r := a.Docker.rawGet(gctx, "/containers/json", q)
		set(func() { obs.ContainerList = r })
		return nil
	})
	g.Go(func() error {
		r := a.Docker.rawGet(gctx, "/networks", label)
		set(func() { obs.NetworkList = r })
		return nil
	})
	g.Go(func() error {
		q := url.Values{"all": {"1"}, "filters": {`{"label":{"` + campaign.LabelUIDBlock + `":true}}`}}
		r := a.Docker.rawGet(gctx, "/containers/json", q)
		set(func() { obs.UIDBlocks = r })
		return nil
	})
	for _, res := range campaign.Resources(src.Records) {
		if res.ID == "" || res.Removed {
			continue
		}
		switch res.Kind {
		case campaign.KindNetwork:
			g.Go(func() error {
				b, err := a.Docker.NetworkJSON(gctx, res.ID)
				r := toRaw(b, err)
				set(func() { obs.Networks[res.ID] = r })
				return nil
			})
		case campaign.KindContainer:
			g.Go(func() error {
				b, err := a.Docker.ContainerJSON(gctx, res.ID)
				r := toRaw(b, err)
				set(func() { obs.Containers[res.ID] = r })
				return nil
			})
		}
	}
	// The images the plan pins (a tag by the id its bring-up resolved it
	// to, never by what the tag names now), by the pinned reference.
	refs := map[string]string{}
	if p, err := attest.PinnedPlan(src); err == nil {
		refs = p.ImageFields()
	}
	for ref := range refs {
		g.Go(func() error {
			r := a.Docker.rawGet(gctx, "/images/"+ref+"/json", nil)
			set(func() { obs.Images[ref] = r })
			return nil
		})
	}
	g.Wait()
}

func toRaw(b []byte, err error) attest.Raw {
	switch {
	case err == nil:
		return attest.Raw{JSON: b}
	case cerrdefs.IsNotFound(err):
		return attest.Raw{NotFound: true}
	}
	return attest.Raw{Err: err.Error()}
}

// rawGet is a GET of the Engine API as the daemon answers it: the body of
// a 200, NotFound for a 404, the error otherwise.
func (d *Docker) rawGet(ctx context.Context, path string, q url.Values) attest.Raw {
	u := "http://docker/v" + d.api.ClientVersion() + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return attest.Raw{Err: err.Error()}
	}
	resp, err := d.api.HTTPClient().Do(req)
	if err != nil {
		return attest.Raw{Err: fmt.Sprintf("GET %s: %v", path, err)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	switch {
	case err != nil:
		return attest.Raw{Err: fmt.Sprintf("GET %s: %v", path, err)}
	case resp.StatusCode == http.StatusNotFound:
		return attest.Raw{NotFound: true}
	case resp.StatusCode != http.StatusOK:
		return attest.Raw{Err: fmt.Sprintf("GET %s: status %d: %s", path, resp.StatusCode, truncate(string(b), 200))}
	case !json.Valid(b):
		return attest.Raw{Err: fmt.Sprintf("GET %s: the body is not JSON", path)}
	}
	return attest.Raw{JSON: b}
}

// runProbes runs the execs phase by phase, every exec of a phase at once
// (bounded), each with a deadline of its probes' timeout and a margin.
func (a *Adapter) runProbes(ctx context.Context, execs []attest.Exec, env attest.ProbeEnv) []attest.ProbeRun {
	timeout := time.Duration(env.TimeoutMS) * time.Millisecond
	if timeout <= 0 {
		timeout = attest.DefaultProbeTimeoutMS * time.Millisecond
	}
	runs := make([]attest.ProbeRun, len(execs))
	for _, phase := range []string{attest.PhaseBefore, attest.PhaseMain, attest.PhaseAfter} {
		var wg sync.WaitGroup
		sem := make(chan struct{}, attestParallelism)
		for i, x := range execs {
			if x.Phase != phase {
				continue
			}
			runs[i] = attest.ProbeRun{Phase: x.Phase, Subject: x.Subject}
			if x.ContainerID == "" {
				runs[i].Err = "no container id"
				continue
			}
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				ectx, cancel := context.WithTimeout(ctx, timeout+15*time.Second)
				defer cancel()
				code, stdout, stderr, err := a.execOutput(ectx, x.ContainerID, x.Cmd, true)
				runs[i].ExitCode, runs[i].Stdout = code, stdout
				if err != nil {
					runs[i].Err = err.Error()
				} else if code != 0 && stdout == "" {
					runs[i].Stdout = truncate(stderr, 500)
				}
			})
		}
		wg.Wait()
	}
	return runs
}

// listeners are agentpen's own listeners on the host for the probes: one
// on the loopback, and (under internal egress) one on every other address
// of the host. They accept, count and close.
type listeners struct {
	ls   []listener
	wg   sync.WaitGroup
	once sync.Once
}

type listener struct {
	kind     string
	ln       net.Listener
	mu       *sync.Mutex
	accepted *int
}

func openListeners(internal bool) (*listeners, error) {
	addrs := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	if internal {
		ifAddrs, err := net.InterfaceAddrs()
		if err != nil {
			return nil, fmt.Errorf("host addresses: %w", err)
		}
		for _, ia := range ifAddrs {
			pfx, err := netip.ParsePrefix(ia.String())
			if err != nil {
				continue
			}
			ad := pfx.Addr()
			if ad.IsLoopback() || ad.IsLinkLocalUnicast() || ad.IsMulticast() || ad.IsUnspecified() {
				continue
			}
			addrs = append(addrs, ad)
		}
	}
	out := &listeners{}
	for _, ad := range addrs {
		ln, err := net.Listen("tcp", netip.AddrPortFrom(ad, 0).String())
		if err != nil {
			if ad.IsLoopback() {
				out.close()
				return nil, fmt.Errorf("host loopback listener: %w", err)
			}
			continue // an address that cannot be bound is not probed
		}
		kind := attest.ListenerHostAddress
		if ad.IsLoopback() {
			kind = attest.ListenerLoopback
		}
		l := listener{kind: kind, ln: ln, mu: &sync.Mutex{}, accepted: new(int)}
		out.ls = append(out.ls, l)
		out.wg.Go(func() {
			for {
				c, err := l.ln.Accept()
				if err != nil {
					return
				}
				l.mu.Lock()
				*l.accepted++
				l.mu.Unlock()
				c.Close()
			}
		})
	}
	return out, nil
}

func (l *listeners) describe() []attest.Listener {
	out := []attest.Listener{}
	for _, x := range l.ls {
		x.mu.Lock()
		out = append(out, attest.Listener{Kind: x.kind, Addr: x.ln.Addr().String(), Accepted: *x.accepted})
		x.mu.Unlock()
	}
	return out
}

// close stops every listener and waits for their goroutines.
func (l *listeners) close() {
	l.once.Do(func() {
		for _, x := range l.ls {
			x.ln.Close()
		}
		l.wg.Wait()
	})
}

func msSince(t time.Time) float64 {
	return float64(time.Since(t).Microseconds()) / 1000
}
