package launcher

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/events"
	"github.com/agentpen/agentpen/internal/testkit/fakeclock"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

// startClocked is a service over a fake backend whose clock starts at the
// wall clock's now (the journal's times are the wall clock's), with
// edit's changes to its configuration, loaded.
func startClocked(t *testing.T, edit func(*Config)) (*fakeBackend, *fakeclock.Clock, *testServer) {
	t.Helper()
	be := newFakeBackend(t)
	clock := fakeclock.New()
	clock.Advance(time.Since(fakeclock.Epoch))
	ts := newTestServerConfig(t, be, func(c *Config) {
		c.Clock = clock
		if edit != nil {
			edit(c)
		}
	})
	if err := ts.Load(); err != nil {
		t.Fatal(err)
	}
	return be, clock, ts
}

// createWith creates a campaign (synchronously, as token) of spec
// specJSON(id, ...) with edit's changes.
func (ts *testServer) createWith(t *testing.T, token, id string, edit func(m map[string]any)) {
	t.Helper()
	var m map[string]any
	jsonUnmarshal(specJSON(id, "software/median@7"), &m)
	edit(m)
	if resp, b := ts.doAs(t, token, http.MethodPost, "/v1/campaigns", jsonMarshal(m)); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create %s: %d %s", id, resp.StatusCode, b)
	}
}

// sseReader reads one event stream message by message.
type sseReader struct {
	t  *testing.T
	sc *bufio.Scanner
}

func newSSEReader(t *testing.T, r io.Reader) *sseReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	return &sseReader{t: t, sc: sc}
}

// next is the next message, false at the stream's end.
func (r *sseReader) next() (sseEvent, bool) {
	got := readSSEFrom(r.t, r.sc, 1)
	if len(got) == 0 {
		return sseEvent{}, false
	}
	return got[0], true
}

// until reads messages up to the first of type typ (included).
func (r *sseReader) until(typ events.Type) []sseEvent {
	r.t.Helper()
	var out []sseEvent
	for {
		ev, ok := r.next()
		if !ok {
			r.t.Fatalf("the stream ended before a %s event: %v", typ, types(out))
		}
		out = append(out, ev)
		if ev.ev.Type == typ {
			return out
		}
	}
}

// TestEventsFollowACampaign: a stream opened on a ready campaign stays
// open and receives, as they happen, a claim (and the state after it),
// an expiring warning shortly before the campaign's ttl, and its removal
// at the deadline, then the state removed, and closes. A client whose
// connection is cut again and again at random bytes (a proxy that drops
// it) resumes each time with Last-Event-ID and ends with every journal
// event exactly once, in order and byte for byte as the uncut stream
// sent it, no event id twice, and the same final state.
func TestEventsFollowACampaign(t *testing.T) {
	checkNoLeaks(t)
	be, clock, ts := startClocked(t, func(c *Config) { c.ExpiryWarning = time.Minute })
	const id = "follow-1"
	ts.createWith(t, testToken, id, func(m map[string]any) { m["pool"] = 1; m["ttl_seconds"] = 600 })

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	uncut := newSSEReader(t, ts.openEvents(t, ctx, id, "").Body)
	history := uncut.until(events.State)
	if st := history[len(history)-1].ev; st.State != "ready" {
		t.Fatalf("the state after the history: %+v", st)
	}
	// The cut client, from the start, in the background.
	cutDone := make(chan []sseEvent, 1)
	go func() { cutDone <- followCut(t, ctx, ts, id) }()

	if resp, b := ts.do(t, http.MethodPost, "/v1/campaigns/"+id+"/workspaces", []byte(`{"task_id":"software/median@7","attempt_id":"x"}`), true); resp.StatusCode != http.StatusCreated {
		t.Fatalf("claim: %d %s", resp.StatusCode, b)
	}
	claim := uncut.until(events.State)
	if !slices.Equal(types(claim), []events.Type{events.Claim, events.State}) || strings.Contains(string(jsonMarshal(claim)), "median") {
		t.Fatalf("after a claim: %v", types(claim))
	}
	clock.Advance(539 * time.Second) // a second before the warning
	if calls := be.Calls(); slices.ContainsFunc(calls, func(c string) bool { return strings.HasPrefix(c, "Warn") }) {
		t.Fatalf("warned a minute and a second before the deadline: %v", calls)
	}
	clock.Advance(time.Second)
	warning := uncut.until(events.State)
	if !slices.Equal(types(warning), []events.Type{events.Expiring, events.State}) || warning[0].ev.Reason != campaign.ReasonTTL ||
		warning[0].ev.ExpiresAt == nil || warning[1].ev.State != "ready" {
		t.Fatalf("a minute before the deadline: %+v", warning)
	}
	clock.Advance(time.Minute)
	var removal []sseEvent
	for {
		ev, ok := uncut.next()
		if !ok {
			break
		}
		removal = append(removal, ev)
	}
	if len(removal) < 3 || removal[0].ev.Type != events.RemovalStarted || removal[0].ev.Reason != campaign.ReasonTTL ||
		removal[len(removal)-2].ev.Type != events.Cleanup || removal[len(removal)-1].ev.State != "removed" || removal[len(removal)-1].ev.Reason != campaign.ReasonTTL {
		t.Fatalf("at the deadline: %v", types(removal))
	}
	all := slices.Concat(history, claim, warning, removal)

	cut := <-cutDone
	if t.Failed() {
		return
	}
	journalEvents := func(evs []sseEvent) []sseEvent {
		return slices.DeleteFunc(slices.Clone(evs), func(e sseEvent) bool { return e.ev.Type == events.State })
	}
	want, got := journalEvents(all), journalEvents(cut)
	if len(got) != len(want) {
		t.Fatalf("the cut client got %d journal events, the uncut %d:\n%v\n%v", len(got), len(want), types(got), types(want))
	}
	for i := range want {
		if got[i].id != want[i].id || string(jsonMarshal(got[i].ev)) != string(jsonMarshal(want[i].ev)) {
			t.Fatalf("event %d: the cut client got %s %s, the uncut %s %s", i, got[i].id, jsonMarshal(got[i].ev), want[i].id, jsonMarshal(want[i].ev))
		}
	}
	seen := map[string]bool{}
	for _, e := range cut {
		if seen[e.id] {
			t.Fatalf("the cut client got event %s twice", e.id)
		}
		seen[e.id] = true
	}
	if last := cut[len(cut)-1]; last.ev.State != "removed" || last.id != all[len(all)-1].id {
		t.Fatalf("the cut client ended with %+v", last)
	}
}

// followCut follows the campaign's events through a proxy that drops
// the connection after a random number of bytes, each time, resuming
// with Last-Event-ID after the last whole event, until the stream ends
// on its own; it returns every event it got.
func followCut(t *testing.T, ctx context.Context, ts *testServer, id string) []sseEvent {
	proxy := newCutProxy(t, ts.ts.Listener.Addr().String())
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	var got []sseEvent
	last, cuts := "", 0
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+proxy.addr+"/v1/campaigns/"+id+"/events", nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		if last != "" {
			req.Header.Set("Last-Event-ID", last)
		}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			cuts++
			continue // cut in the request or the headers
		}
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			t.Errorf("resumed after %q: %d %s", last, resp.StatusCode, b)
			return got
		}
		ended, evs := readWhole(resp.Body)
		resp.Body.Close()
		for _, e := range evs {
			got = append(got, e)
			last = e.id
		}
		if ended && len(got) > 0 && got[len(got)-1].ev.State == "removed" {
			t.Logf("the cut client: %d events through %d cut connections", len(got), cuts)
			return got
		}
		cuts++
	}
	return got
}

// readWhole reads the events of a stream that may be cut anywhere: only
// whole messages (their blank line read) count; ended says the stream
// ended cleanly rather than being cut.
func readWhole(r io.Reader) (ended bool, out []sseEvent) {
	br := bufio.NewReader(r)
	var cur sseEvent
	var data string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return errors.Is(err, io.EOF) && line == "" && data == "" && cur.id == "", out
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case strings.HasPrefix(line, "id: "):
			cur.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		case line == "" && data != "":
			if json.Unmarshal([]byte(data), &cur.ev) != nil {
				return false, out
			}
			out = append(out, cur)
			cur, data = sseEvent{}, ""
		}
	}
}

// cutProxy relays TCP connections to target, dropping each after the
// server has sent it 250 to 1250 bytes (headers included).
type cutProxy struct {
	addr  string
	conns atomic.Int64 // connections accepted
}

// newCutProxy starts a cutProxy; it ends with the test.
func newCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.conns.Add(1)
			wg.Go(func() {
				defer c.Close()
				s, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer s.Close()
				go func() { io.Copy(s, c); s.Close() }()
				io.CopyN(c, s, int64(250+rand.IntN(1000)))
			})
		}
	})
	return p
}

// TestLauncherTether: a campaign tied to its launcher
// (launcher_timeout_seconds) is removed, reason launcher_gone, once the
// token that created it has held no event stream of it and sent no
// keepalive for its timeout, and not a second before: a stream held open
// keeps it however long; its close, or a keepalive, starts the count
// again; another token's stream (the operator's) counts for nothing,
// and its keepalive is refused; a PATCH to 0 unties it; a campaign not
// tied is never removed for it.
func TestLauncherTether(t *testing.T) {
	checkNoLeaks(t)
	be, clock, ts := startClocked(t, func(c *Config) { c.Tokens = mustTokens(t, launcherTokens) })
	tie := func(n int) func(m map[string]any) {
		return func(m map[string]any) { m["launcher_timeout_seconds"] = n }
	}
	ts.createWith(t, tokAlice, "tied", tie(30))
	ts.createWith(t, tokAlice, "loose", func(map[string]any) {})
	ts.createWith(t, tokAlice, "untied", tie(30))
	if v := ts.getView(t, "tied"); v.Lifetime == nil || v.Lifetime.LauncherTimeoutSeconds != 30 {
		t.Fatalf("lifetime %+v", v.Lifetime)
	}
	if resp, b := ts.doAs(t, tokAlice, http.MethodPatch, "/v1/campaigns/untied", []byte(`{"launcher_timeout_seconds":0}`)); resp.StatusCode != http.StatusOK {
		t.Fatalf("untie: %d %s", resp.StatusCode, b)
	}

	// Alice's stream keeps it, however long; the operator's does not.
	ctx, cancel := context.WithCancel(t.Context())
	alice := ts.openEventsAs(t, ctx, tokAlice, "tied")
	newSSEReader(t, alice.Body).until(events.State)
	opCtx, opCancel := context.WithCancel(t.Context())
	defer opCancel()
	newSSEReader(t, ts.openEventsAs(t, opCtx, testToken, "tied").Body).until(events.State)
	if n := ts.streamsOf("tied"); n != 1 {
		t.Fatalf("%d launcher streams counted, want alice's alone", n)
	}
	clock.Advance(10 * time.Minute)
	if v := ts.getView(t, "tied"); v.State != "ready" {
		t.Fatalf("10 minutes with its launcher's stream open: %s", v.State)
	}
	cancel()
	testenv.WaitFor(t, "the service to see the stream closed", func() bool { return ts.streamsOf("tied") == 0 })
	clock.Advance(20 * time.Second)
	// A keepalive, 20 s after: the count starts again.
	resp, b := ts.doAs(t, tokAlice, http.MethodPost, "/v1/campaigns/tied/keepalive", nil)
	var kv struct {
		GoneAt time.Time `json:"gone_at"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &kv) != nil || !kv.GoneAt.Equal(clock.Now().Add(30*time.Second)) {
		t.Fatalf("keepalive: %d %s", resp.StatusCode, b)
	}
	if resp, b := ts.doAs(t, testToken, http.MethodPost, "/v1/campaigns/tied/keepalive", nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("the operator's keepalive: %d %s", resp.StatusCode, b)
	}
	clock.Advance(29 * time.Second)
	if v := ts.getView(t, "tied"); v.State != "ready" {
		t.Fatalf("29 s after its launcher's keepalive: %s", v.State)
	}
	clock.Advance(time.Second)
	v := waitState(t, ts, "tied", "removed")
	if v.RemovalReason != campaign.ReasonLauncherGone || v.Cleanup == nil || v.Cleanup.Status != "verified" {
		t.Fatalf("30 s after: %+v", v)
	}
	// A campaign agentpen up made has no launcher to tie it to.
	be.readyWithLifetime(t, "made-by-up", campaign.Lifetime{})
	if resp, b := ts.do(t, http.MethodPatch, "/v1/campaigns/made-by-up", []byte(`{"launcher_timeout_seconds":30}`), true); resp.StatusCode != http.StatusUnprocessableEntity ||
		!strings.Contains(string(b), "body.launcher_timeout_seconds") {
		t.Fatalf("tying a campaign with no launcher: %d %s", resp.StatusCode, b)
	}
	clock.Advance(time.Hour)
	for _, id := range []string{"loose", "untied"} {
		if v := ts.getView(t, id); v.State != "ready" {
			t.Errorf("%s, not tied, an hour and more with no launcher: %s", id, v.State)
		}
	}
}

// TestLauncherTetherRestart: a service started on a state root with a
// campaign tied to its launcher gives the launcher its timeout from the
// start to come back: removed then, not before.
func TestLauncherTetherRestart(t *testing.T) {
	checkNoLeaks(t)
	be := newFakeBackend(t)
	be.readyWithLifetime(t, "tied", campaign.Lifetime{Accepted: time.Now(), Launcher: 30 * time.Second})
	clock := fakeclock.New()
	clock.Advance(time.Since(fakeclock.Epoch) + time.Hour) // long after the campaign was made
	ts := newTestServerClock(t, be, clock)
	if err := ts.Load(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(29 * time.Second)
	if v := ts.getView(t, "tied"); v.State != "ready" {
		t.Fatalf("29 s after the service started: %s", v.State)
	}
	clock.Advance(time.Second)
	if v := waitState(t, ts, "tied", "removed"); v.RemovalReason != campaign.ReasonLauncherGone {
		t.Fatalf("30 s after: %+v", v)
	}
}

// TestKeepaliveWhileCreating: a launcher that sends its keepalive as
// soon as its asynchronous create is accepted, before the bring-up has
// journalled anything, is answered (not the 404 of an unknown id), and
// so is one sent once the campaign is up.
func TestKeepaliveWhileCreating(t *testing.T) {
	checkNoLeaks(t)
	be := newFakeBackend(t)
	release := make(chan struct{})
	be.bringUp = func(ctx context.Context) error { <-release; return nil }
	ts := newLaunchersServer(t, be, launcherTokens)
	var once sync.Once
	bringUp := func() { once.Do(func() { close(release) }) }
	t.Cleanup(bringUp) // before the service's Close, whatever failed
	var m map[string]any
	jsonUnmarshal(specJSON("early", "software/median@7"), &m)
	m["launcher_timeout_seconds"] = 30
	if resp, b := ts.doAs(t, tokAlice, http.MethodPost, "/v1/campaigns", jsonMarshal(m), "Prefer", "respond-async"); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	if resp, b := ts.doAs(t, tokAlice, http.MethodPost, "/v1/campaigns/early/keepalive", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("a keepalive while creating: %d %s", resp.StatusCode, b)
	}
	bringUp()
	waitState(t, ts, "early", "ready")
	if resp, b := ts.doAs(t, tokAlice, http.MethodPost, "/v1/campaigns/early/keepalive", nil); resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"launcher_timeout_seconds":30`) {
		t.Fatalf("a keepalive once up: %d %s", resp.StatusCode, b)
	}
}

// openEventsAs opens the campaign's event stream with token.
func (ts *testServer) openEventsAs(t *testing.T, ctx context.Context, token, id string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.ts.URL+"/v1/campaigns/"+id+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := ts.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("events of %s: %d", id, resp.StatusCode)
	}
	return resp
}
