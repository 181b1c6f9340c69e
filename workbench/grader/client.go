package grader

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
	"syscall"
	"time"

	"github.com/agentpen/agentpen/workbench/episode"
)

// DefaultTimeout bounds each attempt of a Client call when
// ClientConfig.Timeout is zero.
const DefaultTimeout = 10 * time.Second

// ClientConfig configures a Client.
type ClientConfig struct {
	// URL is the grader's base URL, http:// or https://, with no user
	// info, query or fragment ("http://grader:8080"), or its unix socket,
	// unix:///abs/path.sock (requests go to http://grader over it).
	// Required.
	URL string
	// Key is the API key sent in KeyHeader. Required.
	Key string
	// Timeout bounds each attempt; zero means DefaultTimeout.
	Timeout time.Duration
	// Attempts is how many times a call is tried: 1, or 2 to try once
	// more after no response or a 502, 503 or 504 (never after a timeout
	// or another status). Zero means 2. Every call is idempotent: the
	// grader keeps no state.
	Attempts int
	// Transport carries the requests; nil means a fresh
	// http.Transport that ignores proxy settings.
	Transport http.RoundTripper
	// Logger receives every failed call with its full cause; nil
	// discards. The key never reaches it.
	Logger *slog.Logger
}

// Client is a remote episode.Grader: it asks a grader service (Server)
// to grade, so the environment using it never holds an answer key. Its
// methods are safe for concurrent use.
type Client struct {
	base     string
	key      string
	timeout  time.Duration
	attempts int
	hc       *http.Client
	log      *slog.Logger
	// clock bounds each attempt by timeout (wallClock; tests set a fake
	// one, so that an attempt times out when they say).
	clock clock
}

// clock is the time a Client's attempts are bounded on.
type clock interface {
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

type wallClock struct{}

func (wallClock) AfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

// errAttemptTimeout is the cause of an attempt cut at Client.timeout.
var errAttemptTimeout = errors.New("attempt timed out")

var _ episode.Grader = (*Client)(nil)

// NewClient validates cfg and returns a Client.
func NewClient(cfg ClientConfig) (*Client, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("grader: ClientConfig.URL: %w", err)
	}
	// A unix socket: unix:///abs/path.sock; requests go to http://grader
	// over it.
	sock := ""
	if u.Scheme == "unix" {
		if u.Host != "" || !path.IsAbs(u.Path) || path.Clean(u.Path) != u.Path || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return nil, fmt.Errorf("grader: ClientConfig.URL %q: want unix:///absolute/path.sock", u.Redacted())
		}
		sock = u.Path
		u = &url.URL{Scheme: "http", Host: "grader"}
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("grader: ClientConfig.URL %q: scheme must be http, https or unix", u.Redacted())
	case u.Host == "":
		return nil, fmt.Errorf("grader: ClientConfig.URL %q: has no host", u.Redacted())
	case u.User != nil:
		return nil, fmt.Errorf("grader: ClientConfig.URL %q: must not carry user info (the key goes in a header)", u.Redacted())
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return nil, fmt.Errorf("grader: ClientConfig.URL %q: must have no query or fragment", u.Redacted())
	}
	if cfg.Key == "" {
		return nil, fmt.Errorf("grader: ClientConfig.Key is empty: %w", ErrNoKey)
	}
	if strings.ContainsAny(cfg.Key, "\r\n\x00") {
		return nil, errors.New("grader: ClientConfig.Key: must not contain CR, LF or NUL")
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("grader: ClientConfig.Timeout %v: must not be negative", cfg.Timeout)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	switch cfg.Attempts {
	case 0:
		cfg.Attempts = 2
	case 1, 2:
	default:
		return nil, fmt.Errorf("grader: ClientConfig.Attempts %d: must be 1 or 2", cfg.Attempts)
	}
	tr := cfg.Transport
	if tr == nil {
		t := &http.Transport{
			Proxy:               nil,
			MaxIdleConnsPerHost: 8,
			IdleConnTimeout:     90 * time.Second,
		}
		if sock != "" {
			var d net.Dialer
			t.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) { return d.DialContext(ctx, "unix", sock) }
		}
		tr = t
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Client{
		base:     strings.TrimSuffix(u.String(), "/"),
		key:      cfg.Key,
		timeout:  cfg.Timeout,
		attempts: cfg.Attempts,
		clock:    wallClock{},
		hc: &http.Client{
			Transport: tr,
			// A grader never redirects; a redirect is answered as the
			// status it is, and the key never follows it anywhere.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		log: log,
	}, nil
}

// Error is a failed grader call. Its text names the route and the status
// or the kind of failure, never the grader's address, the key or the
// request: the environment shows it to the agent as a refusal.
type Error struct {
	// Route is the route called ("/v1/score").
	Route string
	// Status is the HTTP status; 0 when there was no response.
	Status int
	// Code is the grader's error code ("unauthorized"); empty when the
	// reply had none.
	Code string
	// Message is the grader's public message, or what went wrong.
	Message string
	// Err is the underlying cause, for logs and errors.Is; nil when the
	// grader answered.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "grader POST %s: ", e.Route)
	if e.Status != 0 {
		fmt.Fprintf(&b, "status %d", e.Status)
		if e.Code != "" {
			fmt.Fprintf(&b, " (%s)", e.Code)
		}
		if e.Message != "" {
			b.WriteString(": ")
		}
	}
	b.WriteString(e.Message)
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// ScoreAnswer asks the grader to grade a non-code answer.
func (c *Client) ScoreAnswer(ctx context.Context, taskID, answer string) (float64, string, error) {
	var reply verdictReply
	if err := c.call(ctx, RouteScore, scoreRequest{TaskID: taskID, Answer: answer}, &reply); err != nil {
		return 0, "", err
	}
	v, err := reply.verdict()
	if err == nil {
		err = checkVerdict(v)
	}
	if err != nil {
		return 0, "", c.fail(&Error{Route: RouteScore, Message: "bad reply", Err: err})
	}
	return v.Credit, v.Reason, nil
}

// HiddenInputs asks the grader for a code task's hidden case arguments.
// Numbers come back as json.Number, so they encode exactly as sent.
func (c *Client) HiddenInputs(ctx context.Context, taskID string) ([][]any, error) {
	var reply struct {
		Inputs *[][]any `json:"inputs"`
	}
	if err := c.call(ctx, RouteCases, casesRequest{TaskID: taskID}, &reply); err != nil {
		return nil, err
	}
	if reply.Inputs == nil {
		return nil, c.fail(&Error{Route: RouteCases, Message: "bad reply", Err: errors.New("no inputs")})
	}
	for i, in := range *reply.Inputs {
		if in == nil {
			return nil, c.fail(&Error{Route: RouteCases, Message: "bad reply", Err: fmt.Errorf("inputs[%d]: not a list", i)})
		}
	}
	return *reply.Inputs, nil
}

// Judge asks the grader to grade a code task from its cases' outputs.
func (c *Client) Judge(ctx context.Context, taskID string, visiblePassed []bool, hidden []episode.Output) (float64, string, error) {
	req := judgeRequest{TaskID: taskID, VisiblePassed: visiblePassed, Hidden: make([]hiddenOutput, len(hidden))}
	if req.VisiblePassed == nil {
		req.VisiblePassed = []bool{}
	}
	for i, o := range hidden {
		if o.Value != nil {
			req.Hidden[i].Value = json.RawMessage(o.Value)
		}
	}
	var reply verdictReply
	if err := c.call(ctx, RouteJudge, req, &reply); err != nil {
		return 0, "", err
	}
	v, err := reply.verdict()
	if err == nil {
		err = checkVerdict(v)
	}
	if err != nil {
		return 0, "", c.fail(&Error{Route: RouteJudge, Message: "bad reply", Err: err})
	}
	return v.Credit, v.Reason, nil
}

// verdictReply is a verdict as received: both fields must be there, so a
// 200 that is not a verdict ({}, null, another service's reply) is a
// failed call, never a grade of 0.
type verdictReply struct {
	Credit *float64 `json:"credit"`
	Reason *string  `json:"reason"`
}

func (r verdictReply) verdict() (verdict, error) {
	if r.Credit == nil || r.Reason == nil {
		return verdict{}, errors.New("not a verdict: credit or reason missing")
	}
	return verdict{Credit: *r.Credit, Reason: *r.Reason}, nil
}

// call posts body to route and decodes a 200 reply into out, trying once
// more when allowed (see ClientConfig.Attempts).
func (c *Client) call(ctx context.Context, route string, body, out any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(body); err != nil {
		// An output that is not valid JSON never leaves the episode, but
		// say so rather than send it.
		return c.fail(&Error{Route: route, Message: "the request cannot be encoded", Err: err})
	}
	var err *Error
	for attempt := 1; attempt <= c.attempts; attempt++ {
		var retry bool
		err, retry = c.attempt(ctx, route, buf.Bytes(), out)
		if err == nil {
			return nil
		}
		if !retry || ctx.Err() != nil {
			break
		}
	}
	return c.fail(err)
}

// attempt makes one request. retry reports whether trying again may help:
// no response at all (not a timeout), or 502, 503 or 504.
func (c *Client) attempt(ctx context.Context, route string, body []byte, out any) (_ *Error, retry bool) {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer c.clock.AfterFunc(c.timeout, func() { cancel(errAttemptTimeout) })()
	timedOut := func() bool { return context.Cause(actx) == errAttemptTimeout }
	req, err := http.NewRequestWithContext(actx, http.MethodPost, c.base+route, bytes.NewReader(body))
	if err != nil {
		return &Error{Route: route, Message: "cannot build the request", Err: err}, false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(KeyHeader, c.key)
	resp, err := c.hc.Do(req)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return &Error{Route: route, Message: "cancelled", Err: ctx.Err()}, false
		case timedOut() || isTimeout(err):
			// A timeout is never retried: the grader may still be working on it.
			return &Error{Route: route, Message: fmt.Sprintf("no reply within %v", c.timeout), Err: err}, false
		}
		msg := "no response"
		var errno syscall.Errno
		if errors.As(err, &errno) {
			msg += " (" + errno.Error() + ")"
		}
		return &Error{Route: route, Message: msg, Err: err}, true
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		if timedOut() && ctx.Err() == nil {
			return &Error{Route: route, Status: resp.StatusCode, Message: fmt.Sprintf("reply not read within %v", c.timeout), Err: err}, false
		}
		return &Error{Route: route, Status: resp.StatusCode, Message: "reply cut short", Err: err}, true
	}
	if len(data) > maxResponseBytes {
		return &Error{Route: route, Status: resp.StatusCode, Message: "reply too large"}, false
	}
	if resp.StatusCode != http.StatusOK {
		var ae apiError
		e := &Error{Route: route, Status: resp.StatusCode}
		if json.Unmarshal(data, &ae) == nil && ae.Code != "" {
			e.Code, e.Message = clip(ae.Code, 64), clip(ae.Message, 300)
		} else {
			e.Message = http.StatusText(resp.StatusCode)
		}
		switch resp.StatusCode {
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return e, true
		}
		return e, false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(out); err != nil {
		return &Error{Route: route, Status: resp.StatusCode, Message: "bad reply", Err: err}, false
	}
	return nil, false
}

// isTimeout reports a timeout of any layer (dial, transport, context).
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// fail logs a failed call with its cause and returns it.
func (c *Client) fail(e *Error) error {
	c.log.Warn("grader call failed", "route", e.Route, "status", e.Status, "code", e.Code, "err", e.Err, "message", e.Message)
	return e
}

// clip shortens s to at most n bytes of valid UTF-8 without control
// characters, for a message from the grader.
func clip(s string, n int) string {
	s = strings.ToValidUTF8(s, "?")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
