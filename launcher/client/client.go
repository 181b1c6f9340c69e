// Package client is a Go client of the launcher API that `agentpen serve`
// runs: typed calls for the campaign routes, with the service's own
// types (api.CampaignView, the reports, store.Result), and every
// error answer as an *Error carrying its RFC 9457 problem.
//
// It does not speak the episode protocol: a workspace's base_url is for
// an OpenEnv client (package workbench/client speaks it in Go).
package client

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agentpen/agentpen/api"
	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/cleanup"
	"github.com/agentpen/agentpen/custody"
	"github.com/agentpen/agentpen/events"
	"github.com/agentpen/agentpen/store"
)

// Client calls the launcher API at URL with a bearer token.
type Client struct {
	url   string
	token string
	http  *http.Client
}

// New returns a client of the service at baseURL
// ("http://127.0.0.1:8700") presenting token; hc nil means a client with
// no overall timeout (a create waits for the bring-up and attestation).
func New(baseURL, token string, hc *http.Client) *Client {
	if hc == nil {
		hc = &http.Client{}
	}
	return &Client{url: strings.TrimRight(baseURL, "/"), token: token, http: hc}
}

// Error is an error answer of the service.
type Error struct {
	Status int    `json:"status"`
	Title  string `json:"title"`
	Detail string `json:"detail"`
	// Errors are the problem's details (a failed check, an invalid
	// field), as the service gives them.
	Errors []struct {
		Message  string `json:"message"`
		Location string `json:"location"`
		Value    any    `json:"value"`
	} `json:"errors"`
}

func (e *Error) Error() string {
	return fmt.Sprintf("agentpen: %d %s: %s", e.Status, e.Title, e.Detail)
}

// IsNotFound reports whether err is the service's 404.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}

// Create creates a campaign from spec (the JSON agentpen up takes) and
// returns it once it is up and attested.
func (c *Client) Create(ctx context.Context, spec []byte) (*api.CampaignView, error) {
	var v api.CampaignView
	return &v, c.do(ctx, http.MethodPost, "/v1/campaigns", spec, &v)
}

// CreateAsync creates a campaign from spec and returns at once (202,
// Prefer: respond-async) with the campaign reading creating; Events
// follows it.
func (c *Client) CreateAsync(ctx context.Context, spec []byte) (*api.CampaignView, error) {
	var v api.CampaignView
	resp, err := c.send(ctx, http.MethodPost, "/v1/campaigns", spec, http.Header{"Prefer": {"respond-async"}})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return &v, json.NewDecoder(resp.Body).Decode(&v)
}

// Lifetime is a change of a campaign's lifetime (PATCH): a nil field
// stays as it is; 0 means none, where the service allows it.
type Lifetime struct {
	TTLSeconds             *int `json:"ttl_seconds,omitempty"`
	IdleTimeoutSeconds     *int `json:"idle_timeout_seconds,omitempty"`
	LauncherTimeoutSeconds *int `json:"launcher_timeout_seconds,omitempty"`
}

// Patch changes the campaign's lifetime and returns the campaign.
func (c *Client) Patch(ctx context.Context, id string, l Lifetime) (*api.CampaignView, error) {
	b, err := json.Marshal(l)
	if err != nil {
		return nil, err
	}
	var v api.CampaignView
	return &v, c.do(ctx, http.MethodPatch, campaignPath(id, ""), b, &v)
}

// Keepalive says the launcher that created the campaign is still there
// (a campaign tied to its launcher: launcher_timeout_seconds).
func (c *Client) Keepalive(ctx context.Context, id string) (*api.KeepaliveView, error) {
	var v api.KeepaliveView
	return &v, c.do(ctx, http.MethodPost, campaignPath(id, "/keepalive"), nil, &v)
}

// ErrStopEvents, returned by an Events callback, ends the stream without
// an error.
var ErrStopEvents = errors.New("stop following the events")

// How Events reconnects after a dropped connection: at most
// eventsRetries times in a row (a connection that delivers an event
// resets the count), waiting eventsBackoff, doubled each time up to
// eventsMaxBackoff.
const (
	eventsRetries    = 10
	eventsBackoff    = 250 * time.Millisecond
	eventsMaxBackoff = 5 * time.Second
)

// Events follows the campaign's events (after lastID, the id of the
// last event received: "12" or "12:state"; "" for all) and calls fn for
// each, until the stream ends with the state event that says the
// campaign is removed (or unusable), or fn returns an error (ErrStopEvents
// ends it with none). The stream stays open while the campaign lives: a
// state event follows each run of events once the campaign is settled.
// A connection that drops is resumed with Last-Event-ID, so fn sees each
// event once; an error answer (a 404) ends it.
func (c *Client) Events(ctx context.Context, id, lastID string, fn func(events.Event) error) error {
	failures, wait := 0, eventsBackoff
	for {
		delivered, ended, err := c.eventsOnce(ctx, id, &lastID, fn)
		var ae *Error
		switch {
		case errors.Is(err, ErrStopEvents):
			return nil
		case errors.As(err, &ae), ctx.Err() != nil:
			return err
		case err == nil && ended:
			return nil
		}
		if delivered {
			failures, wait = 0, eventsBackoff
		}
		if failures++; failures > eventsRetries {
			return fmt.Errorf("agentpen: the events of %s: the connection dropped %d times in a row: %w", id, failures-1, cmp.Or(err, io.ErrUnexpectedEOF))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, eventsMaxBackoff)
	}
}

// eventsOnce reads one connection of the event stream after *lastID,
// which it moves past every event it hands to fn; ended says the stream
// ended after a final state event.
func (c *Client) eventsOnce(ctx context.Context, id string, lastID *string, fn func(events.Event) error) (delivered, ended bool, err error) {
	h := http.Header{"Accept": {"text/event-stream"}}
	if *lastID != "" {
		h.Set("Last-Event-ID", *lastID)
	}
	resp, err := c.send(ctx, http.MethodGet, campaignPath(id, "/events"), nil, h)
	if err != nil {
		return false, false, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var data []string
	var evID string
	final := false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id:"):
			evID = strings.TrimPrefix(strings.TrimPrefix(line, "id:"), " ")
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		case line == "" && len(data) > 0:
			var ev events.Event
			if err := json.Unmarshal([]byte(strings.Join(data, "\n")), &ev); err != nil {
				return delivered, false, fmt.Errorf("agentpen: an event: %w", err)
			}
			data = nil
			if evID != "" {
				*lastID = evID
			}
			evID, delivered = "", true
			final = ev.Type == events.State && (ev.State == "removed" || ev.State == "unusable")
			if err := fn(ev); err != nil {
				return delivered, false, err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return delivered, false, err
	}
	return delivered, final, nil
}

// List lists the campaigns.
func (c *Client) List(ctx context.Context) ([]api.CampaignView, error) {
	var out struct {
		Campaigns []api.CampaignView `json:"campaigns"`
	}
	return out.Campaigns, c.do(ctx, http.MethodGet, "/v1/campaigns", nil, &out)
}

// Get reads one campaign.
func (c *Client) Get(ctx context.Context, id string) (*api.CampaignView, error) {
	var v api.CampaignView
	return &v, c.do(ctx, http.MethodGet, campaignPath(id, ""), nil, &v)
}

// Workspaces lists a ready campaign's workspaces and their base_urls.
func (c *Client) Workspaces(ctx context.Context, id string) ([]api.Workspace, error) {
	var out struct {
		Workspaces []api.Workspace `json:"workspaces"`
	}
	return out.Workspaces, c.do(ctx, http.MethodGet, campaignPath(id, "/workspaces"), nil, &out)
}

// Claim binds task (and attempt, "" for none) to a workspace of the
// campaign's pool and returns it with its base_url (POST
// /v1/campaigns/{id}/workspaces); Pool says warm or cold.
func (c *Client) Claim(ctx context.Context, id, task, attempt string) (*api.ClaimView, error) {
	body, err := json.Marshal(map[string]string{"task_id": task, "attempt_id": attempt})
	if err != nil {
		return nil, err
	}
	if attempt == "" {
		body, _ = json.Marshal(map[string]string{"task_id": task})
	}
	var v api.ClaimView
	return &v, c.do(ctx, http.MethodPost, campaignPath(id, "/workspaces"), body, &v)
}

// Attest attests the campaign now and returns the fresh report (its OK
// says whether it passed).
func (c *Client) Attest(ctx context.Context, id string) (*attest.Report, error) {
	var r attest.Report
	return &r, c.do(ctx, http.MethodPost, campaignPath(id, "/attestation"), nil, &r)
}

// Attestation reads the latest generation's stored attestation.
func (c *Client) Attestation(ctx context.Context, id string) (*attest.Report, error) {
	var r attest.Report
	return &r, c.do(ctx, http.MethodGet, campaignPath(id, "/attestation"), nil, &r)
}

// Cleanup reads the latest generation's stored cleanup report.
func (c *Client) Cleanup(ctx context.Context, id string) (*cleanup.Report, error) {
	var r cleanup.Report
	return &r, c.do(ctx, http.MethodGet, campaignPath(id, "/cleanup"), nil, &r)
}

// Verification verifies the campaign's signed reports on the service's
// host, as agentpen verify does: every check, ok only when all held.
func (c *Client) Verification(ctx context.Context, id string) (*custody.Result, error) {
	var r custody.Result
	return &r, c.do(ctx, http.MethodGet, campaignPath(id, "/verification"), nil, &r)
}

// Delete removes the campaign and returns its verified cleanup report; a
// cleanup that is not verified is an *Error (500) naming the failed
// checks, and Cleanup reads its report.
func (c *Client) Delete(ctx context.Context, id string) (*cleanup.Report, error) {
	var r cleanup.Report
	return &r, c.do(ctx, http.MethodDelete, campaignPath(id, ""), nil, &r)
}

// Episodes reads every episode result of the campaign, oldest first
// (all pages); workspace >= 0 keeps that workspace's.
func (c *Client) Episodes(ctx context.Context, id string, workspace int) ([]store.Result, error) {
	var all []store.Result
	after := 0
	for {
		q := url.Values{"after": {strconv.Itoa(after)}, "limit": {strconv.Itoa(api.MaxEpisodesPage)}}
		if workspace >= 0 {
			q.Set("workspace", strconv.Itoa(workspace))
		}
		var page struct {
			Episodes []store.Result `json:"episodes"`
			Next     int            `json:"next"`
		}
		if err := c.do(ctx, http.MethodGet, campaignPath(id, "/episodes")+"?"+q.Encode(), nil, &page); err != nil {
			return all, err
		}
		all = append(all, page.Episodes...)
		if page.Next == 0 {
			return all, nil
		}
		after = page.Next
	}
}

func campaignPath(id, rest string) string {
	return "/v1/campaigns/" + url.PathEscape(id) + rest
}

// do sends one request and decodes a 2xx answer into out, or returns the
// error answer as an *Error.
func (c *Client) do(ctx context.Context, method, path string, body []byte, out any) error {
	resp, err := c.send(ctx, method, path, body, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("agentpen: %s %s: %w", method, path, err)
	}
	if out == nil || len(b) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("agentpen: %s %s: the answer: %w", method, path, err)
	}
	return nil
}

// send sends one request; an answer that is not 2xx is read into an
// *Error.
func (c *Client) send(ctx context.Context, method, path string, body []byte, header http.Header) (*http.Response, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url+path, r)
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("agentpen: %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	e := &Error{Status: resp.StatusCode}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if json.Unmarshal(b, e) != nil || e.Title == "" {
		e.Title, e.Detail = http.StatusText(resp.StatusCode), strings.TrimSpace(string(b))
	}
	e.Status = resp.StatusCode
	return nil, e
}
