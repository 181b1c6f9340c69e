package adapter

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/campaign"
	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"golang.org/x/sync/errgroup"
)

// DaemonFile is the daemon a campaign was brought up on, in its state
// directory.
const DaemonFile = "daemon.json"

// SpecFile is the campaign's spec in its state directory.
const SpecFile = "campaign.json"

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

// Attest proves what the campaign is, from the daemon's own answers and
// from probes run inside its containers, and writes the report to
// attestation.json in the campaign's state directory (atomically). The
// error is for a campaign that cannot be attested at all (no state
// directory, an unreadable journal, a report that cannot be written) and,
// wrapping ErrNotUp, for one whose latest generation is not up (removed,
// being removed, failed or never ready): nothing is observed and the
// stored report, with its cleanup status, is left as it is. A campaign
// that is up but not what it should be is a report with OK false.
func (a *Adapter) Attest(ctx context.Context, campaignID string, opts AttestOptions) (*attest.Report, error) {
	if err := campaign.CheckID("campaign_id", campaignID); err != nil {
		return nil, err
	}
	// A down (or a bring-up) of the campaign waits for the report, and the
	// report is of the campaign as no other agentpen was changing it.
	lock, err := a.lockCampaign(ctx, campaign.Key(campaignID), DefaultLockWait)
	if err != nil {
		return nil, err
	}
	defer lock.unlock()
	_, _, rep, err := a.attest(ctx, campaignID, opts, true)
	return rep, err
}

// Journal notes of the verdict of the attestation that BringUpAttested
// runs (its start is noteReadyAttesting).
const (
	noteAttestedOK     = "attested ok"
	noteAttestedFailed = "attested failed"
)

// attest is Attest without the lock (its caller holds it), also
// returning the evidence (for the fixtures). With needUp it first
// refuses a campaign that is not up (BringUpAttested's is pending).
func (a *Adapter) attest(ctx context.Context, campaignID string, opts AttestOptions, needUp bool) (attest.Source, attest.Observation, *attest.Report, error) {
	start := time.Now()
	if needUp {
		if err := a.requireUp(campaignID); err != nil {
			return attest.Source{}, attest.Observation{}, nil, err
		}
	}
	src, err := a.attestSource(campaignID)
	if err != nil {
		return src, attest.Observation{}, nil, err
	}
	obs, err := a.observeCampaign(ctx, src, opts)
	if err != nil {
		return src, obs, nil, err
	}
	if ctx.Err() != nil {
		// Probes cut short would read as failures the campaign does not
		// have: no report rather than a false one.
		return src, obs, nil, fmt.Errorf("attestation of %s interrupted, no report written: %w", campaignID, context.Cause(ctx))
	}
	obs.Timings.TotalMS = msSince(start)
	rep := attest.Evaluate(src, obs)
	if err := a.writeReport(campaignID, rep); err != nil {
		return src, obs, rep, err
	}
	a.log().Info("attestation", "campaign", campaignID, "ok", rep.OK, "failed_checks", len(rep.FailedChecks),
		"daemon_ms", rep.Timings.DaemonMS, "probes_ms", rep.Timings.ProbesMS)
	return src, obs, rep, nil
}

// notUpError is the error of a campaign whose latest generation is not
// up; it is an ErrNotUp.
type notUpError struct{ msg string }

func (e *notUpError) Error() string { return e.msg }
func (e *notUpError) Unwrap() error { return ErrNotUp }

// requireUp returns nil when the campaign's latest generation is up
// (CampaignState.Up), else an error that says what became of it (or that
// there is no such campaign).
func (a *Adapter) requireUp(campaignID string) error {
	if err := campaign.CheckID("campaign_id", campaignID); err != nil {
		return err
	}
	dir, err := a.campaignDir(campaignID, false)
	if err != nil {
		return err
	}
	if _, err := os.Lstat(filepath.Join(dir, campaign.JournalFile)); err != nil {
		return noCampaign(campaignID, dir)
	}
	st := readCampaignState(dir)
	if st.Err != nil {
		return fmt.Errorf("campaign %q: %w", campaignID, st.Err)
	}
	if st.Up() {
		return nil
	}
	g := st.Latest()
	var why string
	switch live := len(g.Live()); {
	case len(st.Generations) == 0:
		why = "it has no generation"
	case st.RemovalStarted && live > 0 && st.LastCleanup == "":
		why = fmt.Sprintf("its latest generation (%d) is being removed, or a removal of it did not finish: agentpen down %s finishes it", g.N, campaignID)
	case st.AttestPending && live > 0 && st.LastCleanup == "":
		why = fmt.Sprintf("its latest generation (%d) stopped while it was being attested at bring-up (killed, or still running in another process): agentpen down %s removes it", g.N, campaignID)
	case st.BringUpFailed && live == 0:
		why = fmt.Sprintf("its latest generation (%d) failed to come up and was rolled back (cleanup %s)", g.N, cmp.Or(st.LastCleanup, "not journalled"))
	case st.AttestFailed && st.LastCleanup == "verified":
		why = fmt.Sprintf("its latest generation (%d) did not attest at bring-up and was removed (cleanup verified)", g.N)
	case st.LastCleanup == "verified":
		why = fmt.Sprintf("its latest generation (%d) was removed (cleanup verified)", g.N)
	case st.Ready && live == 0:
		why = fmt.Sprintf("its latest generation (%d) was removed (every resource of it is journalled removed)", g.N)
	case st.LastCleanup != "":
		why = fmt.Sprintf("its latest generation (%d) was being removed and its cleanup was %s: agentpen down %s finishes it", g.N, st.LastCleanup, campaignID)
	case live == 0:
		why = fmt.Sprintf("its latest generation (%d) failed and was rolled back", g.N)
	default:
		why = fmt.Sprintf("its latest generation (%d) never became ready (a bring-up in flight, or one killed: agentpen down %s removes it)", g.N, campaignID)
	}
	return &notUpError{fmt.Sprintf("campaign %s is not up: %s; nothing was attested, and %s is left as it was", campaignID, why, attest.FileName)}
}

// AttestationPath is where Attest writes a campaign's report.
func (a *Adapter) AttestationPath(campaignID string) string {
	return filepath.Join(a.CampaignDir(campaignID), attest.FileName)
}

func (a *Adapter) writeReport(campaignID string, rep *attest.Report) error {
	b, err := rep.Marshal()
	if err != nil {
		return fmt.Errorf("attestation report: %w", err)
	}
	return writeFileAtomic(a.AttestationPath(campaignID), b)
}

// recordDaemon writes the daemon the campaign is being brought up on.
func (a *Adapter) recordDaemon(dir string) error {
	d := a.Docker.Daemon()
	rec := attest.DaemonRecord{ID: d.ID, ServerVersion: d.ServerVersion, RootDir: d.DockerRootDir, Rootless: d.Rootless, Endpoint: a.Docker.Host().URL}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return fmt.Errorf("daemon record: %w", err)
	}
	return writeFileAtomic(filepath.Join(dir, DaemonFile), append(b, '\n'))
}

// attestSource reads the campaign's state directory: spec, journal and the
// daemon recorded at bring-up (absent: left zero, and the daemon checks
// fail), plus the create settings and agentpen's key status.
func (a *Adapter) attestSource(campaignID string) (attest.Source, error) {
	if err := campaign.CheckID("campaign_id", campaignID); err != nil {
		return attest.Source{}, err
	}
	var src attest.Source
	dir, err := a.campaignDir(campaignID, false)
	if err != nil {
		return src, err
	}
	b, err := os.ReadFile(filepath.Join(dir, SpecFile))
	if errors.Is(err, os.ErrNotExist) {
		return src, noCampaign(campaignID, dir)
	}
	if err != nil {
		return src, fmt.Errorf("campaign %q: %w", campaignID, err)
	}
	if err := json.Unmarshal(b, &src.Spec); err != nil {
		return src, fmt.Errorf("campaign %q: spec: %w", campaignID, err)
	}
	src.Records, err = a.loadJournal(filepath.Join(dir, campaign.JournalFile))
	if err != nil {
		return src, fmt.Errorf("campaign %q: %w", campaignID, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, DaemonFile)); err == nil {
		if err := json.Unmarshal(b, &src.Bringup); err != nil {
			return src, fmt.Errorf("campaign %q: %s: %w", campaignID, DaemonFile, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return src, err
	}
	p, err := campaign.NewPlan(src.Spec)
	if err != nil {
		return src, fmt.Errorf("campaign %q: %w", campaignID, err)
	}
	src.Endpoint, src.SocketPath = a.Docker.Host().URL, a.Docker.Host().SocketPath
	src.Roles = roleSettings(p, src.SocketPath)
	src.KeyPolicy = a.keyPolicy()
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
func (a *Adapter) observeCampaign(ctx context.Context, src attest.Source, opts AttestOptions) (attest.Observation, error) {
	obs := attest.Observation{At: time.Now().UTC(), Endpoint: a.Docker.Host().URL, Networks: map[string]attest.Raw{}, Containers: map[string]attest.Raw{}, Images: map[string]attest.Raw{}}
	start := time.Now()
	a.observeDaemon(ctx, src, &obs)
	obs.Timings.DaemonMS = msSince(start)

	start = time.Now()
	env := attest.ProbeEnv{Command: opts.ProbeCommand, HostLoopback: opts.HostLoopback, EgressTarget: opts.EgressTarget, Peers: attest.PeerAddrs(src, obs)}
	if opts.ProbeTimeout > 0 {
		env.TimeoutMS = int(opts.ProbeTimeout / time.Millisecond)
	}
	obs.ProbeEnv = env
	p, err := campaign.NewPlan(src.Spec)
	if err != nil {
		return obs, err
	}
	ls, err := openListeners(p.Egress == campaign.EgressInternal)
	if err != nil {
		return obs, err
	}
	execs, err := attest.PlanExecs(src, env, ls.describe())
	if err != nil {
		ls.close()
		return obs, err
	}
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
	// The images the plan pins, by the pinned reference.
	refs := map[string]bool{src.Spec.Server.Image: true}
	for _, w := range src.Spec.Workspaces {
		refs[w.Image] = true
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
