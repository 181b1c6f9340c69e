// Package probe is the tiny client behind `workbench probe`: one HTTP
// request, one JSON result ({url, method, status, ok, error, latency_ms,
// outcome}), or a Batch of probes run concurrently in one process (HTTP
// requests, TCP connects, a search for a visible Docker socket, the
// custody evidence of the process serving a socket or port, read from
// /proc, and an audit of the git repositories under a path, as an
// agent's uid, for history past their base: package gitaudit). The adapter runs it inside containers with docker exec to check
// readiness and to attest connectivity, since the images carry no curl.
// Every failed connection says whether it timed out or was refused
// (Outcome*), so silence is never mistaken for a refusal.
//
// It never uses a proxy from the environment, never follows a redirect to
// another scheme or host:port (the result is then the redirect itself),
// follows at most five redirects on the same host, and reads at most
// 1 MiB of the reply body, which it does not print. A result is ok when
// the final status is one of Config.Expect (any 2xx when empty).
package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"
)

// DefaultTimeout bounds a probe when Config.Timeout is zero.
const DefaultTimeout = 5 * time.Second

// maxRedirects is how many same-host redirects a probe follows.
const maxRedirects = 5

// Config is one probe.
type Config struct {
	// URL is an http:// or https:// URL with a host. Required.
	URL string
	// Method is GET, HEAD or POST; empty means GET. A POST has an empty
	// body.
	Method string
	// Header is sent with the request (and with same-host redirects);
	// nil sends none.
	Header http.Header
	// Timeout bounds the whole probe, redirects included; zero means
	// DefaultTimeout.
	Timeout time.Duration
	// Expect are the statuses that count as ok; empty means any 2xx.
	Expect []int
	// Unix, when set, is the absolute path of a unix socket the request
	// goes to (the URL's host is then only a name, "http://grader/health").
	Unix string
	// Transport carries the request; nil means a fresh transport that
	// ignores proxy settings.
	Transport http.RoundTripper

	// keepBody makes Check store up to 64 KiB of the reply body in *body
	// (for a batch probe that asks for it).
	keepBody bool
	body     *[]byte
}

// Result is what one probe found.
type Result struct {
	// URL is the URL probed, its password (if any) redacted.
	URL string `json:"url"`
	// Method is the method used.
	Method string `json:"method"`
	// Status is the final HTTP status; 0 when there was no response.
	Status int `json:"status"`
	// OK reports whether Status is expected.
	OK bool `json:"ok"`
	// Error says why the probe is not ok; empty when it is.
	Error string `json:"error"`
	// LatencyMS is the time from the request to the end of the reply
	// body, in milliseconds.
	LatencyMS float64 `json:"latency_ms"`
	// Outcome is OutcomeReply when a reply came (whatever its status), or
	// what stopped the request: OutcomeTimeout, OutcomeRefused,
	// OutcomeUnreachable, OutcomeDNS or OutcomeError. A probe that timed
	// out is thus told apart from one that was refused.
	Outcome string `json:"outcome"`
}

// ErrInvalid is returned (wrapped) by Check for a Config it cannot use.
var ErrInvalid = errors.New("invalid probe")

// Validate checks cfg and returns its URL, parsed.
func (c Config) Validate() (*url.URL, error) {
	u, err := url.Parse(c.URL)
	if err != nil {
		return nil, fmt.Errorf("url: %w: %w", ErrInvalid, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("url %q: scheme must be http or https: %w", u.Redacted(), ErrInvalid)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("url %q: has no host: %w", u.Redacted(), ErrInvalid)
	}
	if c.Unix != "" && (!path.IsAbs(c.Unix) || path.Clean(c.Unix) != c.Unix || u.Scheme != "http") {
		return nil, fmt.Errorf("unix socket %q: want an absolute clean path, and an http URL: %w", c.Unix, ErrInvalid)
	}
	switch c.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodPost:
	default:
		return nil, fmt.Errorf("method %q: must be GET, HEAD or POST: %w", c.Method, ErrInvalid)
	}
	if c.Timeout < 0 {
		return nil, fmt.Errorf("timeout %v: must not be negative: %w", c.Timeout, ErrInvalid)
	}
	for _, s := range c.Expect {
		if s < 100 || s > 599 {
			return nil, fmt.Errorf("expected status %d: must be 100..599: %w", s, ErrInvalid)
		}
	}
	for name, vals := range c.Header {
		if !validHeaderName(name) {
			return nil, fmt.Errorf("header name %q: %w", name, ErrInvalid)
		}
		for _, v := range vals {
			// The value may be a secret: it is never repeated.
			if strings.ContainsAny(v, "\r\n\x00") {
				return nil, fmt.Errorf("header %s: value must not contain CR, LF or NUL: %w", name, ErrInvalid)
			}
		}
	}
	return u, nil
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// Check runs the probe. Its error is only for an invalid cfg; a failed
// probe is a Result with OK false and Error set.
func Check(ctx context.Context, cfg Config) (Result, error) {
	u, err := cfg.Validate()
	if err != nil {
		return Result{}, err
	}
	method := cfg.Method
	if method == "" {
		method = http.MethodGet
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	res := Result{URL: u.Redacted(), Method: method}
	tr := cfg.Transport
	if tr == nil {
		t := &http.Transport{Proxy: nil, DisableKeepAlives: true}
		if cfg.Unix != "" {
			var d net.Dialer
			t.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) { return d.DialContext(ctx, "unix", cfg.Unix) }
		}
		defer t.CloseIdleConnections()
		tr = t
	}
	var offHost string
	hc := &http.Client{
		Transport: tr,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if req.URL.Scheme != u.Scheme || req.URL.Host != u.Host {
				offHost = req.URL.Scheme + "://" + req.URL.Host
				return http.ErrUseLastResponse
			}
			if len(via) > maxRedirects {
				return fmt.Errorf("more than %d redirects", maxRedirects)
			}
			return nil
		},
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var body io.Reader
	if method == http.MethodPost {
		body = http.NoBody
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return Result{}, fmt.Errorf("request: %w: %w", ErrInvalid, err)
	}
	for name, vals := range cfg.Header {
		for _, v := range vals {
			req.Header.Add(name, v)
		}
	}
	start := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		res.LatencyMS = ms(time.Since(start))
		res.Error = describe(err, ctx, timeout)
		res.Outcome = Classify(ctx, err)
		return res, nil
	}
	res.Outcome = OutcomeReply
	var readErr error
	if cfg.keepBody && cfg.body != nil {
		*cfg.body, readErr = io.ReadAll(io.LimitReader(resp.Body, maxBody))
	} else {
		_, readErr = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	}
	resp.Body.Close()
	res.LatencyMS = ms(time.Since(start))
	res.Status = resp.StatusCode
	res.OK = expected(resp.StatusCode, cfg.Expect)
	switch {
	case offHost != "":
		res.OK = false
		res.Error = fmt.Sprintf("status %d: redirect to %s not followed (another host)", resp.StatusCode, offHost)
	case readErr != nil:
		res.OK = false
		res.Error = "reading the reply: " + describe(readErr, ctx, timeout)
	case !res.OK:
		res.Error = fmt.Sprintf("status %d, want %s", resp.StatusCode, want(cfg.Expect))
	}
	return res, nil
}

func expected(status int, expect []int) bool {
	if len(expect) == 0 {
		return status >= 200 && status <= 299
	}
	for _, s := range expect {
		if s == status {
			return true
		}
	}
	return false
}

func want(expect []int) string {
	if len(expect) == 0 {
		return "2xx"
	}
	parts := make([]string, len(expect))
	for i, s := range expect {
		parts[i] = fmt.Sprint(s)
	}
	return strings.Join(parts, " or ")
}

// describe is a transport error without the wrapping that repeats the
// URL.
func describe(err error, ctx context.Context, timeout time.Duration) string {
	if ctx.Err() != nil {
		return fmt.Sprintf("no reply within %v", timeout)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}

func ms(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1000
}
