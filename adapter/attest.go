package adapter

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/custody"
	"github.com/agentpen/agentpen/store"
)

// attestParallelism bounds concurrent daemon calls and execs of an
// attestation: the probes of every workspace must wait out their
// timeouts together.
const attestParallelism = 32

// probeExecMargin is how much longer than its probes' timeout an exec of
// them may take (a variable for the tests).
var probeExecMargin = 15 * time.Second

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
	st, err := c.Read()
	if err != nil {
		return attest.Source{}, attest.Observation{}, nil, "", fmt.Errorf("campaign %q: %w", c.ID, err)
	}
	if needUp && !st.Status.Up() {
		return attest.Source{}, attest.Observation{}, nil, "", &notUpError{fmt.Sprintf("campaign %s is not up: %s; nothing was attested", c.ID, st.Reason(c.ID))}
	}
	src, obs, rep, err := a.judge(ctx, c, st, opts, nil)
	if err != nil {
		return src, obs, nil, "", err
	}
	path, err := a.writeAttestation(ctx, c, j, st.Latest().N, rep)
	return src, obs, rep, path, err
}

// Observe is an attestation of c that writes nothing, whatever c's state
// (a campaign whose journal no longer reads as up is still observed): the
// source the report is judged from, what the runtime and the probes
// returned, and the report. The attestation's fixtures are made from it.
func (a *Adapter) Observe(ctx context.Context, c *store.Campaign, opts AttestOptions) (attest.Source, attest.Observation, *attest.Report, error) {
	st, err := a.readState(c)
	if err != nil {
		return attest.Source{}, attest.Observation{}, nil, fmt.Errorf("campaign %q: %w", c.ID, err)
	}
	return a.judge(ctx, c, st, opts, nil)
}

// judge observes the campaign c (its state st) and judges it: the
// daemon's answers and the probes of every workspace, or of the pool
// slots scope names alone (a refill's).
func (a *Adapter) judge(ctx context.Context, c *store.Campaign, st store.State, opts AttestOptions, scope []int) (attest.Source, attest.Observation, *attest.Report, error) {
	start := time.Now()
	src, err := a.attestSource(c, st)
	if err != nil {
		return src, attest.Observation{}, nil, err
	}
	src.Scope = scope
	x, err := attest.Expect(src)
	if err != nil {
		return src, attest.Observation{}, nil, err
	}
	obs, err := a.observeCampaign(ctx, x, opts)
	if err != nil {
		return src, obs, nil, err
	}
	if ctx.Err() != nil {
		// Probes cut short would read as failures the campaign does not
		// have: no report rather than a false one.
		return src, obs, nil, fmt.Errorf("attestation of %s interrupted, no report written: %w", c.ID, context.Cause(ctx))
	}
	obs.Timings.TotalMS = msSince(start)
	rep := x.Evaluate(obs)
	a.learnGit(rep)
	return src, obs, rep, nil
}

// knownGit is a copy of the git audits learnt so far (nil: none).
func (a *Adapter) knownGit() attest.GitCache {
	a.gitMu.Lock()
	defer a.gitMu.Unlock()
	if len(a.gitCache) == 0 {
		return nil
	}
	return maps.Clone(a.gitCache)
}

// learnGit keeps the git audits of rep that passed: a workspace of the
// same image, root, bases and uid whose repositories are unchanged is
// not audited again (attest.GitCache).
func (a *Adapter) learnGit(rep *attest.Report) {
	a.gitMu.Lock()
	defer a.gitMu.Unlock()
	if a.gitCache == nil {
		a.gitCache = attest.GitCache{}
	}
	a.gitCache.Learn(rep)
}

// writeAttestation writes rep as a new report of generation gen, signed
// beside it, and journals its verdict (with its scope: a refill's slots).
func (a *Adapter) writeAttestation(ctx context.Context, c *store.Campaign, j *campaign.Journal, gen int, rep *attest.Report) (string, error) {
	key, err := a.signingKey(c)
	if err != nil {
		return "", err
	}
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
	info := a.Driver.Info()
	src.Endpoint, src.SocketPath = info.Runtime.Endpoint, info.SocketPath
	src.Roles = a.Driver.Settings(p)
	src.KeyPolicy = a.keyPolicy()
	src.Producer = producer()
	src.AgentpenKey = src.KeyPolicy.Check(a.getenv(p.Server.Spec.APIKeyEnv))
	return src, nil
}

// observeCampaign asks the runtime about everything the journal recorded
// and runs the probes.
func (a *Adapter) observeCampaign(ctx context.Context, x *attest.Expectation, opts AttestOptions) (attest.Observation, error) {
	src := x.Source()
	obs := attest.Observation{At: time.Now().UTC()}
	start := time.Now()
	q := driver.EvidenceQuery{CampaignID: src.Spec.CampaignID, KeyEnv: x.Plan().Server.Spec.APIKeyEnv, KeyPolicy: src.KeyPolicy}
	for _, res := range campaign.Resources(src.Records) {
		if res.ID != "" && !res.Removed {
			q.Resources = append(q.Resources, res)
		}
	}
	// The images the plan pins (a tag by the id its bring-up resolved it
	// to, never by what the tag names now), by the pinned reference.
	if p, err := attest.PinnedPlan(src); err == nil {
		for ref := range p.ImageFields() {
			q.Images = append(q.Images, ref)
		}
		slices.Sort(q.Images)
	}
	obs.Runtime = a.Driver.Evidence(ctx, q)
	obs.Timings.DaemonMS = msSince(start)

	start = time.Now()
	env := attest.ProbeEnv{Command: opts.ProbeCommand, HostLoopback: opts.HostLoopback, EgressTarget: opts.EgressTarget, Peers: x.PeerAddrs(obs),
		ServerAddr: x.ServerAddr(obs), ArgvSuffix: x.ArgvSuffixes(obs), Images: x.ImageIDs(obs)}
	if opts.ProbeTimeout > 0 {
		env.TimeoutMS = int(opts.ProbeTimeout / time.Millisecond)
	}
	env.GitCache = a.knownGit()
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

// runProbes runs the execs phase by phase, every exec of a phase at once
// (bounded), each with a deadline of its probes' timeout and a margin; on
// a runtime that streams an exec, as one process per container
// (runProbesStreamed).
func (a *Adapter) runProbes(ctx context.Context, execs []attest.Exec, env attest.ProbeEnv) []attest.ProbeRun {
	timeout := time.Duration(env.TimeoutMS) * time.Millisecond
	if timeout <= 0 {
		timeout = attest.DefaultProbeTimeoutMS * time.Millisecond
	}
	// The process-custody probe reads /proc of a server that made itself
	// non-dumpable: with every capability of the container's user
	// namespace where the runtime can give them.
	info := a.Driver.Info()
	privileged := info.PrivilegedExec
	if info.StreamingExec {
		if runs, ok := a.runProbesStreamed(ctx, execs, timeout, privileged); ok {
			return runs
		}
	}
	runs := make([]attest.ProbeRun, len(execs))
	for _, phase := range probePhases {
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
				ectx, cancel := context.WithTimeout(ctx, timeout+probeExecMargin)
				defer cancel()
				out, err := a.Driver.Exec(ectx, x.ContainerID, x.Cmd, driver.ExecOptions{Privileged: privileged})
				runs[i].ExitCode, runs[i].Stdout = out.ExitCode, out.Stdout
				if err != nil {
					runs[i].ExitCode, runs[i].Err = -1, err.Error()
				} else if out.ExitCode != 0 && out.Stdout == "" {
					runs[i].Stdout = truncate(out.Stderr, 500)
				}
			})
		}
		wg.Wait()
	}
	return runs
}

// listeners are agentpen's own listeners on the host for the probes: one
// on the loopback, (under internal egress) one on every other address of
// the host, and a network canary for each of campaign.EgressClasses on the
// first host address that binds. They accept, count and close.
type listeners struct {
	ls   []listener
	wg   sync.WaitGroup
	once sync.Once
}

type listener struct {
	kind, class string
	ln          net.Listener
	mu          *sync.Mutex
	accepted    *int
}

func openListeners(internal bool) (*listeners, error) {
	out := &listeners{}
	if err := out.open(attest.ListenerLoopback, "", netip.MustParseAddr("127.0.0.1")); err != nil {
		return nil, fmt.Errorf("host loopback listener: %w", err)
	}
	ifAddrs, err := net.InterfaceAddrs()
	if err != nil {
		out.close()
		return nil, fmt.Errorf("host addresses: %w", err)
	}
	var hostAddrs []netip.Addr
	for _, ia := range ifAddrs {
		pfx, err := netip.ParsePrefix(ia.String())
		if err != nil {
			continue
		}
		ad := pfx.Addr()
		if ad.IsLoopback() || ad.IsLinkLocalUnicast() || ad.IsMulticast() || ad.IsUnspecified() {
			continue
		}
		hostAddrs = append(hostAddrs, ad)
		// An address that cannot be bound is not probed.
		if internal {
			out.open(attest.ListenerHostAddress, "", ad)
		}
	}
	// The stand-ins, on the first address that binds, IPv4 first; a
	// class without one fails its check (attest says so).
	slices.SortStableFunc(hostAddrs, func(a, b netip.Addr) int { return cmp.Compare(a.BitLen(), b.BitLen()) })
	for _, class := range campaign.EgressClasses {
		for _, ad := range hostAddrs {
			if out.open(attest.ListenerCanary, class, ad) == nil {
				break
			}
		}
	}
	return out, nil
}

// open starts a listener of kind on a free port of ad.
func (l *listeners) open(kind, class string, ad netip.Addr) error {
	ln, err := net.Listen("tcp", netip.AddrPortFrom(ad, 0).String())
	if err != nil {
		return err
	}
	x := listener{kind: kind, class: class, ln: ln, mu: &sync.Mutex{}, accepted: new(int)}
	l.ls = append(l.ls, x)
	l.wg.Go(func() {
		for {
			c, err := x.ln.Accept()
			if err != nil {
				return
			}
			x.mu.Lock()
			*x.accepted++
			x.mu.Unlock()
			c.Close()
		}
	})
	return nil
}

func (l *listeners) describe() []attest.Listener {
	out := []attest.Listener{}
	for _, x := range l.ls {
		x.mu.Lock()
		out = append(out, attest.Listener{Kind: x.kind, Class: x.class, Addr: x.ln.Addr().String(), Accepted: *x.accepted})
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

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
