package docker

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/agentpen/agentpen/attest/evidence"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/testlatency"
)

// Time to interactive, the computesdk way (issue 41): from the call that
// asks for a workspace to the first answer of a tool in it. Cold: a
// campaign of the grader and n workspaces created, attested and answering
// (agentpen's own create, no network hop: computesdk's figures include
// one); beside it the floor measured in the same rounds, the raw SDK's
// create-and-start of the same containers (the same settings, from the
// same builders) and one exec round in every one of them, which no
// attested create can go below. Warm (a claim to its first answer) is
// launcher.BenchmarkPoolClaimAPI's and BenchmarkPoolClaimBurstAPI's.

// span is one driver call of a bring-up: what it was (create, start,
// ready, evidence, exec), of which role, and when it began and ended.
type span struct {
	what       string
	role       string
	start, end time.Time
}

// timedDriver records the spans of the driver calls made through it.
type timedDriver struct {
	driver.Driver
	mu    sync.Mutex
	spans []span
}

func (t *timedDriver) Unwrap() driver.Driver { return t.Driver }

func (t *timedDriver) add(what, role string, start time.Time) {
	t.mu.Lock()
	t.spans = append(t.spans, span{what: what, role: role, start: start, end: time.Now()})
	t.mu.Unlock()
}

// take returns the spans recorded and forgets them.
func (t *timedDriver) take() []span {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := t.spans
	t.spans = nil
	return out
}

func (t *timedDriver) Create(ctx context.Context, o *driver.Object) (string, error) {
	start := time.Now()
	id, err := t.Driver.Create(ctx, o)
	if o.Kind == campaign.KindContainer {
		t.add("create", o.Role, start)
	}
	return id, err
}

func (t *timedDriver) Start(ctx context.Context, o *driver.Object) error {
	start := time.Now()
	err := t.Driver.Start(ctx, o)
	t.add("start", o.Role, start)
	return err
}

func (t *timedDriver) Ready(ctx context.Context, o *driver.Object) error {
	start := time.Now()
	err := t.Driver.Ready(ctx, o)
	t.add("ready", o.Role, start)
	return err
}

func (t *timedDriver) Exec(ctx context.Context, id string, cmd []string, opts driver.ExecOptions) (driver.ExecResult, error) {
	start := time.Now()
	out, err := t.Driver.Exec(ctx, id, cmd, opts)
	t.add("exec", "", start)
	return out, err
}

func (t *timedDriver) Evidence(ctx context.Context, q driver.EvidenceQuery) evidence.Runtime {
	start := time.Now()
	rt := t.Driver.Evidence(ctx, q)
	t.add("evidence", "", start)
	return rt
}

// breakdown splits the time from t0 to the first answer (answered) into
// stages that add up to it, each ending when the last call of its kind
// ended: create (the last container made), start, ready, the runtime's
// evidence, each round of probe execs (execs that overlap in time are one
// round), the rest of the attestation (judging, the report signed and
// journalled), and the first answer.
func breakdown(t0, attested, answered time.Time, spans []span) (stages []string, d []time.Duration) {
	last := func(what string) time.Time {
		var end time.Time
		for _, s := range spans {
			if s.what == what && s.end.After(end) {
				end = s.end
			}
		}
		return end
	}
	var execs []span
	for _, s := range spans {
		if s.what == "exec" {
			execs = append(execs, s)
		}
	}
	slices.SortFunc(execs, func(a, b span) int { return a.start.Compare(b.start) })
	var rounds []time.Time // each round's end
	for _, s := range execs {
		if n := len(rounds); n > 0 && !s.start.After(rounds[n-1]) {
			rounds[n-1] = later(rounds[n-1], s.end)
			continue
		}
		rounds = append(rounds, s.end)
	}
	at := t0
	step := func(name string, end time.Time) {
		if end.IsZero() {
			return
		}
		stages = append(stages, name)
		d = append(d, max(0, end.Sub(at)))
		at = later(at, end)
	}
	step("create", last("create"))
	step("start", last("start"))
	step("ready", last("ready"))
	step("evidence", last("evidence"))
	for i, end := range rounds {
		step(fmt.Sprintf("round%d", i+1), end)
	}
	step("attest-rest", attested)
	step("answer", answered)
	return stages, d
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// firstAnswer resets each workspace's episode and asks list_files on its
// socket (the first tool answer), all at once; it returns when every one
// answered.
func firstAnswer(ctx context.Context, sockets []string) error {
	var g errgroup.Group
	for _, sock := range sockets {
		g.Go(func() error {
			hc := UnixHTTPClient(sock, 30*time.Second)
			defer hc.CloseIdleConnections()
			for _, call := range []struct{ path, body string }{{"/reset", `{}`}, {"/step", `{"action":{"tool":"list_files","args":{}}}`}} {
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://workbench"+call.path, strings.NewReader(call.body))
				if err != nil {
					return err
				}
				req.Header.Set("Content-Type", "application/json")
				resp, err := hc.Do(req)
				if err != nil {
					return err
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					return fmt.Errorf("%s on %s: status %d", call.path, sock, resp.StatusCode)
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// floorRound is the floor's exec round: the probe binary with one probe
// (the network interfaces) in every container at once.
func floorRound(ctx context.Context, d *Driver, ids []string) error {
	var g errgroup.Group
	for _, id := range ids {
		g.Go(func() error {
			code, out, err := d.execOutput(ctx, id, []string{"/usr/local/bin/workbench", "probe", "--batch", `{"probes":[{"id":"p","kind":"interfaces"}]}`}, false)
			if err == nil && code != 0 {
				err = fmt.Errorf("exec in %s: exit %d: %s", short(id), code, out.Stderr)
			}
			return err
		})
	}
	return g.Wait()
}

// ttiSizes are the workspace counts BenchmarkTimeToInteractive measures.
var ttiSizes = []int{1, 8}

// BenchmarkTimeToInteractive measures, for a campaign of the grader and
// 1 and 8 workspaces (topology none): cold-<n>- from agentpen's attested
// create (adapter.Up) to every workspace's first tool answer (a reset and
// a list_files step on its socket), with its stages (cold-<n>-create-,
// -start-, -ready-, -evidence-, -round<k>- for each round of probe execs,
// -attest-rest-, -answer-) and the floor raw-cold-<n>- (the raw SDK's
// create-and-start of the same containers, 16 at a time as the raw
// limit of BenchmarkCampaign16, and one exec round in each), in rotating
// order.
//
//	go test -run '^$' -bench TimeToInteractive -benchtime 20x ./adapter/docker
func BenchmarkTimeToInteractive(b *testing.B) {
	a, cli, img := benchAdapter(b)
	td := &timedDriver{Driver: a.Driver}
	a.Driver = td
	n := rounds(b, 20)
	cold := map[int]*testlatency.Samples{}
	floor := map[int]*testlatency.Samples{}
	stages := map[string]*testlatency.Samples{}
	for _, size := range ttiSizes {
		cold[size], floor[size] = &testlatency.Samples{}, &testlatency.Samples{}
	}
	for r := range n {
		for k, size := range ttiSizes {
			steps := []func(){
				func() { // agentpen
					id := benchCampaignID("tti")
					b.Cleanup(func() { removeLabelled(cli, id) })
					td.take()
					start := time.Now()
					res, err := a.Up(b.Context(), benchSpec(id, img, size, campaign.TopologyNone), adapter.UpOptions{})
					if err != nil {
						b.Fatal(err)
					}
					attested := time.Now()
					var sockets []string
					for _, w := range res.Campaign.Workspaces {
						sockets = append(sockets, w.Socket)
					}
					if err := firstAnswer(b.Context(), sockets); err != nil {
						b.Fatal(err)
					}
					answered := time.Now()
					*cold[size] = append(*cold[size], answered.Sub(start))
					names, ds := breakdown(start, attested, answered, td.take())
					for i, name := range names {
						key := fmt.Sprintf("cold-%d-%s-", size, name)
						if stages[key] == nil {
							stages[key] = &testlatency.Samples{}
						}
						*stages[key] = append(*stages[key], ds[i])
					}
					b.Logf("round %d, %d workspaces: cold %v: %v %v", r, size, answered.Sub(start), names, ds)
					if _, err := a.Cleanup(b.Context(), id); err != nil {
						b.Fatal(err)
					}
				},
				func() { // the floor
					s := newRawSet(b, a, cli, benchSpec(benchCampaignID("tti-raw"), img, size, campaign.TopologyNone))
					start := time.Now()
					ids, err := rawUp(b.Context(), cli, s, rawUpConcurrency)
					s.created()
					if err == nil {
						err = floorRound(b.Context(), dk(a.Adapter), ids.containers)
					}
					if err != nil {
						b.Fatal(err)
					}
					*floor[size] = append(*floor[size], time.Since(start))
					b.Logf("round %d, %d workspaces: floor %v", r, size, time.Since(start))
					s.done(cli)
				},
			}
			for i := range steps {
				steps[(i+r+k)%len(steps)]()
			}
		}
	}
	for _, size := range ttiSizes {
		cold[size].Report(b, fmt.Sprintf("cold-%d-", size))
		floor[size].Report(b, fmt.Sprintf("raw-cold-%d-", size))
	}
	for key, s := range stages {
		s.Report(b, key)
	}
}
