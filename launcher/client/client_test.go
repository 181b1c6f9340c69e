package client_test

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/events"
	"github.com/agentpen/agentpen/launcher"
	"github.com/agentpen/agentpen/launcher/client"
	"github.com/agentpen/agentpen/store"
)

const token = "client-test-token-8c1d5e0f3a7b9264"

// service is a launcher over a state root and an adapter that is never
// asked to reach a daemon (no campaign is created here).
func service(t *testing.T) (*launcher.Server, *client.Client, string) {
	t.Helper()
	root, err := store.CreateRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	tokens, err := launcher.ParseTokens("test", token)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := launcher.New(launcher.Config{Adapter: &adapter.Adapter{}, Root: root, Tokens: tokens, Key: bytes.Repeat([]byte{1}, launcher.KeyBytes), ResultsEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { ts.Close(); srv.Close(t.Context()) })
	return srv, client.New(ts.URL, token, ts.Client()), ts.URL
}

// TestErrors: the service's error answers come back as *client.Error
// with the problem's status, title and details.
func TestErrors(t *testing.T) {
	_, c, url := service(t)
	ctx := t.Context()
	if l, err := c.List(ctx); err != nil || len(l) != 0 {
		t.Fatalf("List: %v %v", l, err)
	}
	for name, call := range map[string]func() error{
		"get":          func() error { _, err := c.Get(ctx, "nope"); return err },
		"workspaces":   func() error { _, err := c.Workspaces(ctx, "nope"); return err },
		"attest":       func() error { _, err := c.Attest(ctx, "nope"); return err },
		"attestation":  func() error { _, err := c.Attestation(ctx, "nope"); return err },
		"cleanup":      func() error { _, err := c.Cleanup(ctx, "nope"); return err },
		"episodes":     func() error { _, err := c.Episodes(ctx, "nope", -1); return err },
		"verification": func() error { _, err := c.Verification(ctx, "nope"); return err },
	} {
		if err := call(); !client.IsNotFound(err) {
			t.Errorf("%s of an unknown campaign: %v, want a 404", name, err)
		}
	}
	_, err := c.Create(ctx, []byte(`{"campaign_id":"x","bogus":1}`))
	var e *client.Error
	if !errors.As(err, &e) || e.Status != http.StatusUnprocessableEntity || len(e.Errors) == 0 || !strings.Contains(e.Errors[0].Location, "bogus") {
		t.Fatalf("an invalid spec: %#v", err)
	}
	bad := client.New(url, "not-the-token", nil)
	if _, err := bad.List(ctx); !errors.As(err, &e) || e.Status != http.StatusUnauthorized || strings.Contains(err.Error(), token) {
		t.Fatalf("a wrong token: %v", err)
	}
}

// TestCoversTheAPI: every campaign operation the OpenAPI document names
// has a method here (the meta routes, the catalogue and the episode
// proxy are not this client's).
func TestCoversTheAPI(t *testing.T) {
	srv, _, _ := service(t)
	methods := map[string]string{
		"createCampaign": "Create", "listCampaigns": "List", "getCampaign": "Get", "deleteCampaign": "Delete",
		"listWorkspaces": "Workspaces", "attestCampaign": "Attest", "getAttestation": "Attestation",
		"getCleanup": "Cleanup", "listEpisodes": "Episodes", "patchCampaign": "Patch", "campaignEvents": "Events",
		"claimWorkspace": "Claim", "keepaliveCampaign": "Keepalive", "verifyCampaign": "Verification",
	}
	typ := reflect.TypeFor[*client.Client]()
	for path, item := range srv.OpenAPI().Paths {
		if !strings.HasPrefix(path, "/v1/campaigns") {
			continue
		}
		for _, op := range operations(item) {
			m, ok := methods[op]
			if !ok {
				t.Errorf("%s (%s) has no client method", op, path)
				continue
			}
			if _, ok := typ.MethodByName(m); !ok {
				t.Errorf("%s: method %s missing", op, m)
			}
		}
	}
}

// operations are the operation ids of an OpenAPI path item.
func operations(item any) []string {
	v := reflect.ValueOf(item).Elem()
	var ids []string
	for _, f := range []string{"Get", "Put", "Post", "Delete", "Patch"} {
		op := v.FieldByName(f)
		if op.IsValid() && !op.IsNil() {
			ids = append(ids, op.Elem().FieldByName("OperationID").String())
		}
	}
	slices.Sort(ids)
	return ids
}

// TestEventsResume: a stream whose connection drops in the middle of an
// event is resumed with the id of the last whole event received, so each
// event reaches the callback once, and it ends with the final state; a
// callback's ErrStopEvents ends it early with no error.
func TestEventsResume(t *testing.T) {
	var lastIDs []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lastIDs = append(lastIDs, r.Header.Get("Last-Event-ID"))
		w.Header().Set("Content-Type", "text/event-stream")
		ev := func(id, typ, state string) string {
			return "id: " + id + "\ndata: {\"event\":\"" + typ + "\",\"campaign\":\"c\",\"state\":\"" + state + "\"}\n\n"
		}
		switch len(lastIDs) {
		case 1:
			w.Write([]byte(": hello\n\n" + ev("1", "begin", "") + ev("2", "created", "") + "id: 3\ndata: {\"ev"))
			w.(http.Flusher).Flush()
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close() // dropped mid-event
		default:
			w.Write([]byte(ev("3", "attested", "") + ev("3:state", "state", "removed")))
		}
	}))
	defer ts.Close()
	c := client.New(ts.URL, token, ts.Client())
	var got []string
	if err := c.Events(t.Context(), "c", "", func(ev events.Event) error { got = append(got, string(ev.Type)+ev.State); return nil }); err != nil {
		t.Fatal(err)
	}
	if want := []string{"begin", "created", "attested", "stateremoved"}; !slices.Equal(got, want) || !slices.Equal(lastIDs, []string{"", "2"}) {
		t.Fatalf("events %v (want %v), Last-Event-IDs sent %q", got, want, lastIDs)
	}
	got, lastIDs = nil, nil
	err := c.Events(t.Context(), "c", "", func(ev events.Event) error {
		got = append(got, string(ev.Type))
		return client.ErrStopEvents
	})
	if err != nil || len(got) != 1 {
		t.Fatalf("stopped at the first: %v %v", got, err)
	}
}
