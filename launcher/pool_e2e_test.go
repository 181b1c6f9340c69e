package launcher_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/agentpen/agentpen/api"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/internal/testkit/testlatency"
	apiclient "github.com/agentpen/agentpen/launcher/client"
	"github.com/agentpen/agentpen/workbench/client"
	"golang.org/x/sync/errgroup"
)

// createPooled creates, through the API, a campaign of one workspace
// (the first of tasks) with a pool of n.
func (l *liveService) createPooled(t testing.TB, id string, n int) {
	t.Helper()
	l.removeOnCleanup(t, id)
	var s campaign.CampaignSpec
	if err := json.Unmarshal(l.spec(id, e2eTasks[:1]), &s); err != nil {
		t.Fatal(err)
	}
	s.Pool = n
	b, _ := json.Marshal(s)
	if _, err := apiclient.New(l.ts.URL, l.token, nil).Create(t.Context(), b); err != nil {
		t.Fatalf("create with a pool of %d: %v", n, err)
	}
}

// TestPoolThroughAPI is a launcher's use of a pool, on the real daemon,
// through HTTP only: claims bind a task to a pooled workspace each, and
// each base_url plays its claimed task (a reset naming another refused);
// a task and attempt claimed twice is a 409; DELETE removes the claimed
// workspaces and the pool with the rest, and nothing remains; no secret,
// capability or claimed task id reached the logs, and no secret or
// capability the state directory.
func TestPoolThroughAPI(t *testing.T) {
	l := startLive(t)
	const id = "api-pool"
	l.createPooled(t, id, 2)
	hapi := apiclient.New(l.ts.URL, l.token, nil)
	if v, err := hapi.Get(t.Context(), id); err != nil {
		t.Fatal(err)
	} else if v.Pool == nil || *v.Pool != (api.PoolView{Warm: 2}) {
		t.Fatalf("a pool of 2, up: %+v", v.Pool)
	}
	tasks := e2eTasks[1:]
	seen := map[string]bool{}
	var urls []string
	for i, task := range tasks {
		cv, err := hapi.Claim(t.Context(), id, task, fmt.Sprint("p", i))
		if err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
		ws := cv.Workspace
		if i == 0 && cv.Pool != "warm" {
			t.Errorf("the first claim of a pool of 2: %q, want warm", cv.Pool)
		}
		if ws.BaseURL == "" || ws.TaskID != task || seen[ws.AgentID] {
			t.Fatalf("claim %d: %+v (seen before: %v)", i, ws, seen[ws.AgentID])
		}
		seen[ws.AgentID] = true
		urls = append(urls, ws.BaseURL)
		playThroughProxy(t, ws.BaseURL, task, tasks[(i+1)%len(tasks)])
	}
	// The view counts the pool: both claimed, and the service refills
	// two more (refilling, then warm).
	testenv.WaitFor(t, "the view to count the claims and the refill", func() bool {
		v, err := hapi.Get(t.Context(), id)
		return err == nil && v.Pool != nil && v.Pool.Claimed == len(tasks) && v.Pool.Warm+v.Pool.Refilling == 2
	})
	_, err := hapi.Claim(t.Context(), id, tasks[0], "p0")
	var ae *apiclient.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusConflict {
		t.Errorf("a task and attempt claimed twice: %v, want a 409", err)
	}
	if code, b := l.call(t, http.MethodDelete, "/v1/campaigns/"+id, nil); code != http.StatusOK {
		t.Fatalf("delete: %d %s", code, b)
	}
	if rep, err := l.verify(t, id); err != nil {
		t.Fatalf("verify after delete: %v (%v)", err, rep.FailedChecks)
	}
	if found, err := l.a.Driver.List(t.Context(), campaign.LabelCampaign+"="+id); err != nil || len(found) > 0 {
		t.Fatalf("after delete: %d labelled resources remain (%v)", len(found), err)
	}
	l.checkNoSecrets(t, urls, e2eTasks)
}

// BenchmarkPoolClaimAPI measures what a launcher waits for from a claim of a
// pooled workspace to its first tool answer through the base_url: the
// POST /v1/campaigns/{id}/workspaces, a session on the base_url (the
// proxy), its reset and a list_files step; while the pool lasts (a pool
// of 16, claimed 16 times in a row while the service refills it in the
// background). Its control, raw-warm-, is the same first answer on the
// same base_url right after each warm claim's, without the claim.
// warm- is warm-post- (the POST to its answer) and warm-session- (the
// first session after it, to its first answer: the workspace's first
// episode) added. adapter.BenchmarkPoolClaim has the drained pool's
// figure.
func BenchmarkPoolClaimAPI(b *testing.B) {
	l := startLive(b)
	hapi := apiclient.New(l.ts.URL, l.token, nil)
	var warm, post, session, raw testlatency.Samples
	for round := range max(1, b.N/16) {
		id := fmt.Sprint("bench-pool-", round)
		l.createPooled(b, id, 16)
		for i := range 16 {
			ctx := testenv.Context(b)
			start := time.Now()
			cv, err := hapi.Claim(ctx, id, "software/median@2", fmt.Sprint("b", i))
			if err != nil {
				b.Fatal(err)
			}
			claimed := time.Since(start)
			s, err := client.Dial(ctx, cv.Workspace.BaseURL)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.Reset(ctx, client.ResetOptions{}); err != nil {
				b.Fatal(err)
			}
			if _, err := s.Step(ctx, "list_files", nil); err != nil {
				b.Fatal(err)
			}
			d := time.Since(start)
			s.Close()
			if cv.Pool != "warm" {
				continue
			}
			warm, post, session = append(warm, d), append(post, claimed), append(session, d-claimed)
			// The control: the same first answer on the same base_url
			// at once, without the claim.
			start = time.Now()
			if s, err = client.Dial(ctx, cv.Workspace.BaseURL); err != nil {
				b.Fatal(err)
			}
			if _, err := s.Reset(ctx, client.ResetOptions{}); err != nil {
				b.Fatal(err)
			}
			if _, err := s.Step(ctx, "list_files", nil); err != nil {
				b.Fatal(err)
			}
			raw = append(raw, time.Since(start))
			s.Close()
		}
		if _, err := hapi.Delete(b.Context(), id); err != nil {
			b.Fatal(err)
		}
	}
	if len(warm) == 0 {
		b.Fatal("no claim was warm")
	}
	warm.Report(b, "warm-")
	post.Report(b, "warm-post-")
	session.Report(b, "warm-session-")
	raw.Report(b, "raw-warm-")
}

// burstSizes are the bursts BenchmarkPoolClaimBurstAPI measures, and
// burstRounds how many of each it pools (issue 41: five).
var (
	burstSizes  = []int{16, 64}
	burstRounds = 5
)

// BenchmarkPoolClaimBurstAPI measures a burst of n claims at once (16
// and 64), each to its first tool answer through its base_url (the POST,
// a session on the base_url, its reset and a list_files step), on a
// campaign with a pool of n, the service refilling it in the background
// as it does; burst-<n>- pools the claims of five bursts. Its control,
// raw-burst-<n>-, is measured right after each burst on the same
// workspaces: n sessions at once on the base_urls just claimed (a
// session, its reset and a list_files step), the first answer without
// the claim.
func BenchmarkPoolClaimBurstAPI(b *testing.B) {
	l := startLive(b)
	hapi := apiclient.New(l.ts.URL, l.token, nil)
	firstAnswer := func(ctx context.Context, url string) error {
		s, err := client.Dial(ctx, url)
		if err != nil {
			return err
		}
		defer s.Close()
		if _, err := s.Reset(ctx, client.ResetOptions{}); err != nil {
			return err
		}
		_, err = s.Step(ctx, "list_files", nil)
		return err
	}
	for _, n := range burstSizes {
		var burst, raw testlatency.Samples
		for round := range burstRounds {
			id := fmt.Sprint("bench-burst-", n, "-", round)
			l.createPooled(b, id, n)
			ctx := testenv.Context(b)
			urls := make([]string, n)
			took := make([]time.Duration, n)
			warm := make([]bool, n)
			var g errgroup.Group
			start := time.Now()
			for i := range n {
				g.Go(func() error {
					cv, err := hapi.Claim(ctx, id, "software/median@2", fmt.Sprint("b", i))
					if err != nil {
						return fmt.Errorf("claim %d: %w", i, err)
					}
					if err := firstAnswer(ctx, cv.Workspace.BaseURL); err != nil {
						return fmt.Errorf("claim %d: first answer: %w", i, err)
					}
					took[i], urls[i], warm[i] = time.Since(start), cv.Workspace.BaseURL, cv.Pool == "warm"
					return nil
				})
			}
			if err := g.Wait(); err != nil {
				b.Fatal(err)
			}
			if slices.Contains(warm, false) || len(slices.Compact(slices.Sorted(slices.Values(urls)))) != n {
				b.Fatalf("burst of %d: warm %v; %d base_urls, want %d distinct", n, warm, len(slices.Compact(slices.Sorted(slices.Values(urls)))), n)
			}
			burst = append(burst, took...)
			p50 := testlatency.Samples(slices.Clone(took)).Median()
			start = time.Now()
			for i := range n {
				g.Go(func() error {
					if err := firstAnswer(ctx, urls[i]); err != nil {
						return err
					}
					took[i] = time.Since(start)
					return nil
				})
			}
			if err := g.Wait(); err != nil {
				b.Fatal(err)
			}
			raw = append(raw, took...)
			b.Logf("burst of %d, round %d: p50 %v, raw p50 %v", n, round, p50, testlatency.Samples(took).Median())
			if _, err := hapi.Delete(b.Context(), id); err != nil {
				b.Fatal(err)
			}
		}
		burst.Report(b, fmt.Sprintf("burst-%d-", n))
		raw.Report(b, fmt.Sprintf("raw-burst-%d-", n))
	}
}
