package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
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
// journalled, for as long as this service runs an operation on the
// campaign (a create, a delete, an expiry, a reconciliation); then one
// final event, of type state, says what the campaign is, and the stream
// ends. The journal is read again when the adapter says it appended to
// it (Config.Adapter's Journalled callback), and every eventsPoll in any
// case, so what another process does (agentpen up, down) is streamed
// too.

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
	LastEventID string `header:"Last-Event-ID" doc:"Resume after this event (a journal sequence number): the events after it are sent"`
}

// registerEvents registers the event stream.
func (s *Server) registerEvents(hapi huma.API) {
	schema := hapi.OpenAPI().Components.Schemas.Schema(reflect.TypeFor[events.Event](), true, "Event")
	huma.Register(hapi, huma.Operation{
		OperationID: "campaignEvents", Method: http.MethodGet, Path: "/v1/campaigns/{id}/events", Tags: []string{"campaigns"},
		Summary: "Stream the campaign's events (server-sent events): what already happened, then each new event, then its state",
		Description: "Every event is read from the campaign's journal: a client that connects late first gets what already " +
			"happened (after Last-Event-ID when it sends one: each event's id is its journal record's sequence number). " +
			"The stream follows the campaign while this service creates, deletes, expires or reconciles it, then ends with " +
			"one event of type state (no id) naming the campaign's state; a client closes on it. Each message's data is " +
			"an Event, the schema of agentpen's --log-format json records.",
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
	after := 0
	if in.LastEventID != "" {
		if after, err = strconv.Atoi(in.LastEventID); err != nil || after < 0 {
			return nil, problem(http.StatusBadRequest, "Last-Event-ID: not an event id (a journal sequence number)",
				&huma.ErrorDetail{Message: "not a non-negative integer", Location: "header.Last-Event-ID", Value: in.LastEventID})
		}
	}
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
		s.streamEvents(hctx, id, after)
	}}, nil
}

// streamEvents writes the campaign's events after seq after, following
// its journal while this service operates on it, then its state.
func (s *Server) streamEvents(hctx huma.Context, id string, after int) {
	hctx.SetHeader("Content-Type", "text/event-stream")
	hctx.SetHeader("Cache-Control", "no-cache")
	hctx.SetHeader("X-Accel-Buffering", "no")
	hctx.SetStatus(http.StatusOK)
	_, w := humachi.Unwrap(hctx)
	rc := http.NewResponseController(w)
	ctx := hctx.Context()
	send := func(ev events.Event) error {
		b, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		_ = rc.SetWriteDeadline(time.Now().Add(eventsWriteTimeout))
		msg := "data: " + string(b) + "\n\n"
		if ev.Seq > 0 {
			msg = "id: " + strconv.Itoa(ev.Seq) + "\n" + msg
		}
		if _, err := w.Write([]byte(msg)); err != nil {
			return err
		}
		return rc.Flush()
	}
	if _, err := w.Write([]byte(": events of campaign " + id + "\n\n")); err != nil {
		return
	}
	rc.Flush()
	lastWrite := time.Now()
	for {
		wake := s.journalWake(id)
		busy := s.busyAs(id) != 0
		if recs, err := s.records(id); err == nil {
			for _, ev := range events.FromRecords(id, recordsAfter(recs, after)) {
				if send(ev) != nil {
					return
				}
				after, lastWrite = ev.Seq, time.Now()
			}
		}
		if !busy {
			snap, err := s.read(id)
			send(s.finalEvent(id, snap, err))
			return
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

// finalEvent is a stream's last event: the campaign's state as its files
// say once no operation of this service runs on it.
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
