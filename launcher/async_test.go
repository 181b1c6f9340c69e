package launcher

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/api"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/events"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

// sseEvent is one message of an event stream: its id and its data.
type sseEvent struct {
	id string
	ev events.Event
}

// readSSE reads an event stream until it ends (or n events, when n > 0),
// each message's data decoded strictly into events.Event.
func readSSE(t *testing.T, r io.Reader, n int) []sseEvent {
	t.Helper()
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	return readSSEFrom(t, sc, n)
}

// readSSEFrom is readSSE on a scanner of the stream.
func readSSEFrom(t *testing.T, sc *bufio.Scanner, n int) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	var data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			cur.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		case line == "" && data != "":
			dec := json.NewDecoder(strings.NewReader(data))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&cur.ev); err != nil {
				t.Fatalf("event data %s: %v", data, err)
			}
			if cur.ev.Seq > 0 && cur.id != strconv.Itoa(cur.ev.Seq) {
				t.Fatalf("event id %q, seq %d", cur.id, cur.ev.Seq)
			}
			out = append(out, cur)
			cur, data = sseEvent{}, ""
			if n > 0 && len(out) == n {
				return out
			}
		}
	}
	return out
}

// openEvents opens the campaign's event stream (after lastID, when not
// empty) with ctx.
func (ts *testServer) openEvents(t *testing.T, ctx context.Context, id, lastID string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.ts.URL+"/v1/campaigns/"+id+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := ts.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func types(evs []sseEvent) []events.Type {
	var out []events.Type
	for _, e := range evs {
		out = append(out, e.ev.Type)
	}
	return out
}

// TestAsyncCreate: with Prefer: respond-async a create answers 202 with
// Location at once and reads creating; its event stream, opened before
// the bring-up has journalled anything, streams every event of the
// bring-up as the journal says it, then the state ready, and stays open
// while the campaign lives; the campaign is served. A client that
// connects late gets the same events; one that resumes gets what
// followed its last event, and after a state event only what comes
// next: here a delete, to the state removed, where the stream ends.
func TestAsyncCreate(t *testing.T) {
	checkNoLeaks(t)
	be := newFakeBackend(t)
	release := make(chan struct{})
	be.bringUp = func(ctx context.Context) error { <-release; return nil }
	ts := newTestServer(t, be)
	req, _ := http.NewRequest(http.MethodPost, ts.ts.URL+"/v1/campaigns", bytes.NewReader(specJSON("camp-1", "software/median@7", "sql/top_customer@3")))
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Prefer", "wait=10, respond-async")
	resp, err := ts.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var v api.CampaignView
	if resp.StatusCode != http.StatusAccepted || resp.Header.Get("Location") != "/v1/campaigns/camp-1" ||
		resp.Header.Get("Preference-Applied") != "respond-async" || json.Unmarshal(b, &v) != nil || v.State != "creating" {
		t.Fatalf("async create: %d %v %s", resp.StatusCode, resp.Header, b)
	}
	if _, b := ts.do(t, http.MethodGet, "/v1/campaigns/camp-1", nil, true); !strings.Contains(string(b), `"state":"creating"`) {
		t.Fatalf("while creating: %s", b)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stream := ts.openEvents(t, ctx, "camp-1", "")
	if stream.StatusCode != http.StatusOK || stream.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %d %v", stream.StatusCode, stream.Header)
	}
	close(release)
	want := []events.Type{events.Begin, events.Created, events.Created, events.Created, events.Created, events.Created, events.Created,
		events.Attesting, events.Attested, events.State}
	got := readSSE(t, stream.Body, len(want))
	if !slices.Equal(types(got), want) {
		t.Fatalf("events %v, want %v", types(got), want)
	}
	last := got[len(got)-1]
	if last.ev.State != "ready" || last.ev.Campaign != "camp-1" || last.id != strconv.Itoa(got[len(got)-2].ev.Seq)+":state" {
		t.Fatalf("state %+v", last)
	}
	if _, b := ts.do(t, http.MethodGet, "/v1/campaigns/camp-1", nil, true); !strings.Contains(string(b), `"state":"ready"`) || !strings.Contains(string(b), "base_url") {
		t.Fatalf("after the create: %s", b)
	}
	// Late: everything that happened, then the state, at once.
	late := readSSE(t, ts.openEvents(t, ctx, "camp-1", "").Body, len(want))
	if !slices.Equal(types(late), want) || late[len(late)-1].id != last.id {
		t.Fatalf("a late client got %v, want %v", types(late), want)
	}
	// Resumed after the sixth event: the rest.
	resumed := readSSE(t, ts.openEvents(t, ctx, "camp-1", got[5].id).Body, len(want)-6)
	if !slices.Equal(types(resumed), want[6:]) {
		t.Fatalf("resumed after %s: %v, want %v", got[5].id, types(resumed), want[6:])
	}
	// Resumed after the state: nothing until the delete, then the
	// removal to its state, and the end.
	after := ts.openEvents(t, ctx, "camp-1", last.id)
	if resp, b := ts.do(t, http.MethodDelete, "/v1/campaigns/camp-1", nil, true); resp.StatusCode != http.StatusOK {
		t.Fatalf("delete: %d %s", resp.StatusCode, b)
	}
	rest := readSSE(t, after.Body, 0)
	if len(rest) < 3 || rest[0].ev.Type != events.RemovalStarted || rest[len(rest)-1].ev.State != "removed" || rest[len(rest)-2].ev.Type != events.Cleanup ||
		slices.ContainsFunc(rest[:len(rest)-1], func(e sseEvent) bool { return e.ev.Type == events.State }) {
		t.Fatalf("after the state, a delete: %v", types(rest))
	}
	if strings.Contains(ts.logs.String(), "software/") || strings.Contains(ts.logs.String(), "sql/") {
		t.Errorf("a task id reached the log: %s", ts.logs.String())
	}
}

// TestAsyncCreateClientGone: a client of an asynchronous create that
// goes away (its request, then its event stream) stops nothing: the
// campaign is created, and nothing is removed.
func TestAsyncCreateClientGone(t *testing.T) {
	checkNoLeaks(t)
	be := newFakeBackend(t)
	release, started := make(chan struct{}), make(chan struct{})
	be.bringUp = func(ctx context.Context) error {
		close(started)
		<-release
		return ctx.Err()
	}
	ts := newTestServer(t, be)
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.ts.URL+"/v1/campaigns", bytes.NewReader(specJSON("camp-1", "software/median@7")))
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Prefer", "respond-async")
	resp, err := ts.ts.Client().Do(req)
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("async create: %v %v", resp, err)
	}
	resp.Body.Close()
	sctx, scancel := context.WithCancel(t.Context())
	ts.openEvents(t, sctx, "camp-1", "")
	<-started
	cancel()
	scancel()
	close(release)
	testenv.WaitFor(t, "the campaign to be ready", func() bool {
		_, b := ts.do(t, http.MethodGet, "/v1/campaigns/camp-1", nil, true)
		return strings.Contains(string(b), `"state":"ready"`)
	})
	if calls := be.mutating(); !slices.Equal(calls, []string{"BringUp camp-1", "Attest camp-1"}) {
		t.Fatalf("calls %v", calls)
	}
}

// TestAsyncCreateRefusedAtOnce: an asynchronous create of a bad spec, of
// one the adapter refuses before the bring-up (a key variable unset), or
// of a campaign that exists is refused as a synchronous one is, and
// nothing is made.
func TestAsyncCreateRefusedAtOnce(t *testing.T) {
	be := newFakeBackend(t)
	be.prepare = func(p *campaign.Plan) error {
		if p.Server.Spec.APIKeyEnv == "OTHER_KEY" {
			return &campaign.ValidationError{Field: "server.api_key_env", Msg: "OTHER_KEY is unset or empty"}
		}
		return nil
	}
	ts := newTestServer(t, be)
	post := func(body []byte) (*http.Response, []byte) {
		req, _ := http.NewRequest(http.MethodPost, ts.ts.URL+"/v1/campaigns", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testToken)
		req.Header.Set("Prefer", "respond-async")
		resp, err := ts.ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	for _, c := range badSpecs() {
		sync, _ := ts.do(t, http.MethodPost, "/v1/campaigns", c.body, true)
		if resp, b := post(c.body); resp.StatusCode != sync.StatusCode || resp.StatusCode/100 != 4 {
			t.Errorf("%s: %d %s, and %d synchronously", c.name, resp.StatusCode, b, sync.StatusCode)
		}
	}
	otherKey := mutate(func(m map[string]any) { m["server"].(map[string]any)["api_key_env"] = "OTHER_KEY" })
	if resp, b := post(otherKey); resp.StatusCode != http.StatusUnprocessableEntity || decodeProblem(t, resp, b).Errors[0].Location != "body.server.api_key_env" {
		t.Errorf("a key variable unset: %d %s", resp.StatusCode, b)
	}
	if m := be.mutating(); len(m) > 0 {
		t.Fatalf("a refused create reached the adapter: %v", m)
	}
	if resp, b := post(specJSON("camp-1", "software/median@7")); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	testenv.WaitFor(t, "the create to end", func() bool {
		_, b := ts.do(t, http.MethodGet, "/v1/campaigns/camp-1", nil, true)
		return strings.Contains(string(b), `"state":"ready"`)
	})
	if resp, b := post(specJSON("camp-1", "software/median@7")); resp.StatusCode != http.StatusConflict {
		t.Fatalf("again: %d %s", resp.StatusCode, b)
	}
	if resp, b := ts.do(t, http.MethodGet, "/v1/campaigns/nope/events", nil, true); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("events of no campaign: %d %s", resp.StatusCode, b)
	}
}

// TestEventsEndOnClose: a stream that follows an operation ends when the
// service closes.
func TestEventsEndOnClose(t *testing.T) {
	checkNoLeaks(t)
	be := newFakeBackend(t)
	release := make(chan struct{})
	be.bringUp = func(ctx context.Context) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return ctx.Err()
	}
	ts := newTestServer(t, be)
	req, _ := http.NewRequest(http.MethodPost, ts.ts.URL+"/v1/campaigns", bytes.NewReader(specJSON("camp-1", "software/median@7")))
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Prefer", "respond-async")
	resp, err := ts.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	stream := ts.openEvents(t, t.Context(), "camp-1", "")
	done := make(chan []sseEvent)
	go func() { done <- readSSE(t, stream.Body, 0) }()
	closed := make(chan struct{})
	go func() { ts.Close(context.Background()); close(closed) }()
	<-done
	close(release)
	<-closed
}
