package launcher_test

import (
	"testing"

	"github.com/agentpen/agentpen/events"
	apiclient "github.com/agentpen/agentpen/launcher/client"
)

// TestGoClientAsync (real daemon): the Go client creates a campaign
// asynchronously, follows its events to their first state event (ready),
// changes its lifetime and deletes it.
func TestGoClientAsync(t *testing.T) {
	l := startLive(t)
	id := "goclient-" + randHex(8)
	l.removeOnCleanup(t, id)
	c := apiclient.New(l.ts.URL, l.token, nil)
	v, err := c.CreateAsync(t.Context(), l.spec(id, e2eTasks[:1]))
	if err != nil || v.State != "creating" {
		t.Fatalf("create async: %v %+v", err, v)
	}
	var seen []events.Type
	var final events.Event
	if err := c.Events(t.Context(), id, "", func(ev events.Event) error {
		seen = append(seen, ev.Type)
		final = ev
		if ev.Type == events.State {
			return apiclient.ErrStopEvents // the stream follows the campaign while it lives
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if final.Type != events.State || final.State != "ready" || len(seen) < 3 {
		t.Fatalf("events %v, final %+v", seen, final)
	}
	ttl := 3600
	if p, err := c.Patch(t.Context(), id, apiclient.Lifetime{TTLSeconds: &ttl}); err != nil || p.State != "ready" {
		t.Fatalf("patch: %v %+v", err, p)
	}
	if rep, err := c.Delete(t.Context(), id); err != nil || rep.Status != "verified" {
		t.Fatalf("delete: %v %+v", err, rep)
	}
}
