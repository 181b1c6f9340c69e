package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/events"
	"github.com/agentpen/agentpen/store"
	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humachi"
)

// A campaign's event stream (GET /v1/campaigns/{id}/events) is read
// from its journal, the one record of what happened (package events):
// a client that connects late first gets every event already journalled
// (after Last-Event-ID, when it sends one), then each new one as it is
// journalled (a claim, a refill, a lifetime's change, an expiry warning,
// a removal), for as long as the campaign lives. Once the campaign is
// settled (no operation of this service runs on it) after a run of
// events, one event of type state says what it is; the stream ends after
// the state that says it is removed (or unusable). The journal is read
// again when the adapter says it appended to it (Config.Adapter's
// Journalled callback), and every eventsPoll in any case, so what another
// process does (agentpen up, down) is streamed too.
//
// Each journal event's id is its record's sequence number ("12"); a
// state event's is the sequence number of the last event before it and
// ":state" ("12:state"). A client that resumes with Last-Event-ID gets
// exactly what followed that event: the records after it, and a state
// event unless the one after those records is the one it had. So a cut
// connection loses nothing and repeats nothing.
//
// A stream of the campaign held open by the launcher that created it
// (its token) is that launcher's sign of life, as a keepalive is
// (tether.go).

// Event stream timings.
const (
	// eventsPoll is how often a stream reads the journal with no word
	// from the adapter.
	eventsPoll = 250 * time.Millisecond
	// eventsKeepAlive is how often a stream that says nothing sends a
	// comment, so that proxies keep it open.
	eventsKeepAlive = 15 * time.Second
	// eventsWriteTimeout bounds writing one event to a client.
	eventsWriteTimeout = 10 * time.Second
)

type eventsInput struct {
	ID          string `path:"id" doc:"Campaign id"`
	LastEventID string `header:"Last-Event-ID" doc:"Resume after this event (the id of the last event received: a journal sequence number, or one followed by :state): what followed it is sent, nothing twice"`
}

// eventID is an event's place in a stream: after journal record seq, and
// whether the state event that follows it was sent.
type eventID struct {
	seq   int
	state bool
}

func (id eventID) String() string {
	if id.state {
		return strconv.Itoa(id.seq) + ":state"
	}
	return strconv.Itoa(id.seq)
}

// parseEventID reads a Last-Event-ID: "12" or "12:state".
func parseEventID(s string) (eventID, error) {
	num, state := strings.CutSuffix(s, ":state")
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 || strconv.Itoa(n) != num {
		return eventID{}, fmt.Errorf("%q is not an event id", s)
	}
	return eventID{seq: n, state: state}, nil
}

// registerEvents registers the event stream.
func (s *Server) registerEvents(hapi huma.API) {
	schema := hapi.OpenAPI().Components.Schemas.Schema(reflect.TypeFor[events.Event](), true, "Event")
	huma.Register(hapi, huma.Operation{
		OperationID: "campaignEvents", Method: http.MethodGet, Path: "/v1/campaigns/{id}/events", Tags: []string{"campaigns"},
		Summary: "Stream the campaign's events (server-sent events) while it lives: what already happened, each new event, and its state",
		Description: "Every event is read from the campaign's journal: a client that connects late first gets what already " +
			"happened, then each new event as it is journalled (claims, refills, lifetime changes, an expiring warning " +
			"shortly before a ttl or idle removal, the removal itself). Once the campaign is settled after a run of events " +
			"(no create, delete or expiry of this service running on it), an event of type state names its state; the " +
			"stream ends after the state event that says removed (or unusable), and when the service stops. Each journal " +
			"event's id is its record's sequence number; a state event's is the number before it and :state (12:state). " +
			"A client whose connection drops reconnects with Last-Event-ID: it gets what followed that event, nothing " +
			"twice. Each message's data is an Event, the schema of agentpen's --log-format json records. A stream held " +
			"open by the token that created the campaign keeps a campaign tied to its launcher " +
			"(launcher_timeout_seconds) alive, as POST .../keepalive does.",
		Errors: []int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusNotFound, http.StatusConflict},
		Responses: map[string]*huma.Response{"200": {
			Description: "text/event-stream: each message's data is one Event (JSON)",
			Content:     map[string]*huma.MediaType{"text/event-stream": {Schema: schema}},
		}},
	}, s.campaignEvents)
}

func (s *Server) campaignEvents(ctx context.Context, in *eventsInput) (*huma.StreamResponse, error) {
	if err := campaign.CheckID("id", in.ID); err != nil {
		return nil, pathProblem(err)
	}
	id := in.ID
	snap, err := s.read(id)
	if errors.Is(err, store.ErrNoCampaign) && s.busyAs(id) != campaign.StatusCreating {
		return nil, campaignProblem(id, "events", err)
	}
	if err == nil && snap.err != nil {
		return nil, unusableProblem(id, snap)
	}
	var from eventID
	if in.LastEventID != "" {
		if from, err = parseEventID(in.LastEventID); err != nil {
			return nil, problem(http.StatusBadRequest, "Last-Event-ID: not an event id (a journal sequence number, or one followed by :state)",
				&huma.ErrorDetail{Message: "not a non-negative integer, with or without :state", Location: "header.Last-Event-ID", Value: in.LastEventID})
		}
	}
	// The launcher that created it holds it alive while it listens.
	caller, _ := CallerOf(ctx)
	owner, _ := s.ownerOf(id)
	launcher := owner != "" && caller.Name == owner
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.relays.Add(1)
	}
	s.mu.Unlock()
	if closed {
		return nil, operationProblem("events", errClosing)
	}
	return &huma.StreamResponse{Body: func(hctx huma.Context) {
		defer s.relays.Done()
		if launcher {
			s.launcherStream(id, true)
			defer s.launcherStream(id, false)
		}
		s.streamEvents(hctx, id, from)
	}}, nil
}

// streamEvents writes the campaign's events after from, following its
// journal while it lives, each run of them followed by its state once
// it is settled, until the state says it is removed or unusable.
func (s *Server) streamEvents(hctx huma.Context, id string, from eventID) {
	hctx.SetHeader("Content-Type", "text/event-stream")
	hctx.SetHeader("Cache-Control", "no-cache")
	hctx.SetHeader("X-Accel-Buffering", "no")
	hctx.SetStatus(http.StatusOK)
	_, w := humachi.Unwrap(hctx)
	rc := http.NewResponseController(w)
	ctx := hctx.Context()
	last := from
	lastWrite := time.Now()
	send := func(ev events.Event, id eventID) error {
		b, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		_ = rc.SetWriteDeadline(time.Now().Add(eventsWriteTimeout))
		if _, err := w.Write([]byte("id: " + id.String() + "\ndata: " + string(b) + "\n\n")); err != nil {
			return err
		}
		last, lastWrite = id, time.Now()
		return rc.Flush()
	}
	if _, err := w.Write([]byte(": events of campaign " + id + "\n\n")); err != nil {
		return
	}
	rc.Flush()
	for {
		wake := s.journalWake(id)
		busy := s.busyAs(id) != 0
		if recs, err := s.records(id); err == nil {
			for _, ev := range events.FromRecords(id, recordsAfter(recs, last.seq)) {
				if send(ev, eventID{seq: ev.Seq}) != nil {
					return
				}
			}
		}
		if !busy && s.busyAs(id) == 0 {
			snap, err := s.read(id)
			final := s.finalEvent(id, snap, err)
			ended := err != nil || snap.err != nil || snap.status() == campaign.StatusRemoved
			if !last.state {
				if send(final, eventID{seq: last.seq, state: true}) != nil {
					return
				}
			}
			if ended {
				return
			}
		}
		if time.Since(lastWrite) >= eventsKeepAlive {
			if _, err := w.Write([]byte(": keep-alive\n\n")); err != nil || rc.Flush() != nil {
				return
			}
			lastWrite = time.Now()
		}
		select {
		case <-ctx.Done():
			return
		case <-s.closing:
			return
		case <-wake:
		case <-time.After(eventsPoll):
		}
	}
}

// records reads the campaign's journal records (an error for one that
// has none, or whose journal cannot be used).
func (s *Server) records(id string) ([]campaign.Record, error) {
	c, err := s.root.Open(id)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	recs, _, err := c.Records()
	return recs, err
}

// recordsAfter are the records after seq after.
func recordsAfter(recs []campaign.Record, after int) []campaign.Record {
	for i, r := range recs {
		if r.Seq > after {
			return recs[i:]
		}
	}
	return nil
}

// finalEvent is a stream's state event: the campaign's state as its
// files say once no operation of this service runs on it (its last, when
// it says removed or unusable).
func (s *Server) finalEvent(id string, snap snapshot, err error) events.Event {
	now := s.clock.Now()
	switch {
	case err != nil:
		// Never journalled: a create refused or failed before its
		// bring-up began.
		return events.Event{Time: now.UTC(), Level: events.LevelWarn, Type: events.State, Campaign: id,
			State: campaign.StatusRemoved.String(), Msg: fmt.Sprintf("campaign %s has no journal: nothing of it was made", id)}
	case snap.err != nil:
		return events.Event{Time: now.UTC(), Level: events.LevelWarn, Type: events.State, Campaign: id,
			State: campaign.StatusUnusable.String(), Msg: "campaign unusable: " + snap.err.Error()}
	}
	return events.Final(id, snap.status(), snap.st.Lifecycle, now)
}

// busyAs is the operation this service runs on the campaign
// (StatusCreating, StatusDeleting; 0 for none).
func (s *Server) busyAs(id string) campaign.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.campaigns[id]; e != nil && e.busying {
		return e.busy
	}
	return 0
}

// journalWake returns a channel closed the next time the adapter
// journals a record of the campaign (or an operation of this service on
// it ends).
func (s *Server) journalWake(id string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entryLocked(id)
	if e.wake == nil {
		e.wake = make(chan struct{})
	}
	return e.wake
}

// wakeLocked wakes the campaign's streams. s.mu is held.
func (e *entry) wakeLocked() {
	if e.wake != nil {
		close(e.wake)
		e.wake = nil
	}
}

// journalled is the adapter's Journalled callback: it wakes the
// campaign's streams.
func (s *Server) journalled(id string, _ campaign.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.campaigns[id]; e != nil {
		e.wakeLocked()
	}
}
