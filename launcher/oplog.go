package launcher

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/agentpen/agentpen/campaign"
)

// The service's log says what it did, never with what: one line at start
// and at stop (agentpen serve's), one per create, delete, attestation,
// expiry and reconciliation (the campaign, the outcome, the duration), one
// per request (the route's pattern, never the path; a refused one with
// its class). No line holds a token, a key, a capability or a task id:
// the spec's values are never logged, nor the error of a spec refused
// (it may quote a task id back), and the proxy's path is never logged.

// logOp logs one operation on a campaign: op ("create", "delete",
// "attest", "expire", "reconcile"), its outcome, and how long it took;
// err's text is kept unless it refuses the launcher's input.
func (s *Server) logOp(ctx context.Context, op, id, outcome string, start time.Time, err error) {
	attrs := []slog.Attr{
		slog.String("campaign", id),
		slog.String("outcome", outcome),
		slog.Int64("duration_ms", time.Since(start).Milliseconds()),
	}
	if rid := RequestID(ctx); rid != "" {
		attrs = append(attrs, slog.String("request_id", rid))
	}
	if c, ok := CallerOf(ctx); ok {
		attrs = append(attrs, slog.String("caller", c.Name))
	}
	level := slog.LevelInfo
	if err != nil {
		level = slog.LevelWarn
		if !errors.Is(err, campaign.ErrInvalid) {
			attrs = append(attrs, slog.String("error", err.Error()))
		}
	}
	s.log.LogAttrs(context.WithoutCancel(ctx), level, op, attrs...)
}

// refusalClass names the class of a refused request by its status, for
// the access log ("" for a request that was not refused).
func refusalClass(status int) string {
	switch {
	case status < 400:
		return ""
	case status == http.StatusBadRequest, status == http.StatusUnprocessableEntity:
		return "invalid"
	case status == http.StatusUnauthorized:
		return "unauthorized"
	case status == http.StatusNotFound:
		return "not_found"
	case status == http.StatusMethodNotAllowed:
		return "method_not_allowed"
	case status == http.StatusConflict:
		return "conflict"
	case status == http.StatusGone:
		return "gone"
	case status == http.StatusRequestEntityTooLarge:
		return "too_large"
	case status == http.StatusBadGateway:
		return "workspace_unavailable"
	case status == http.StatusServiceUnavailable:
		return "unavailable"
	case status >= 500:
		return "error"
	}
	return "refused"
}
