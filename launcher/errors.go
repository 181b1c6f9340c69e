package launcher

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/store"
	"github.com/danielgtaylor/huma/v2"
)

// Every error the service answers is an RFC 9457 problem
// (application/problem+json) in Huma's ErrorModel: type, title, status,
// detail, and errors[] with one {message, location, value} per bad field,
// its location a path from the request's root ("body.workspaces[1].task_id",
// "path.id"). The routes Huma does not serve (the proxy, the router's 404
// and 405, the auth middleware) write the same model with writeProblem.

// problem builds the model for status with detail and field errors.
func problem(status int, detail string, errs ...*huma.ErrorDetail) *huma.ErrorModel {
	return &huma.ErrorModel{Status: status, Title: http.StatusText(status), Detail: detail, Errors: errs}
}

// writeProblem answers with a problem outside Huma's handlers.
func writeProblem(w http.ResponseWriter, status int, detail string, errs ...*huma.ErrorDetail) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(problem(status, detail, errs...))
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

// specProblem maps a spec's validation error onto a 400 problem with one
// entry per bad field, located under body.
func specProblem(err error) error {
	var se *campaign.SyntaxError
	if errors.As(err, &se) {
		loc := "body"
		if se.Field != "" {
			loc += "." + se.Field
		}
		return problem(http.StatusBadRequest, "the campaign spec is not valid JSON of the right shape",
			&huma.ErrorDetail{Message: se.Error(), Location: loc})
	}
	// A document that is a spec but breaks a rule is unprocessable
	// content (422), each field named; one that is not a spec at all
	// (above) is a bad request (400).
	errs := campaign.FieldErrors(err)
	if len(errs) == 0 {
		return problem(http.StatusUnprocessableEntity, "the campaign spec is invalid: "+err.Error())
	}
	out := make([]*huma.ErrorDetail, len(errs))
	for i, ve := range errs {
		d := &huma.ErrorDetail{Message: ve.Msg, Location: "body." + ve.Field}
		if ve.Field == "(spec)" {
			d.Location = "body"
		}
		if ve.Value != "" {
			d.Value = ve.Value
		}
		out[i] = d
	}
	return problem(http.StatusUnprocessableEntity, "the campaign spec is invalid: "+plural(len(out), "field"), out...)
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// operationProblem maps an adapter error onto a problem by its kind:
// bad input 400, no such campaign 404, a conflict or a lock 409, an
// unreachable daemon 503, a service shutting down 503, anything else 500.
// The detail is the error's text: the adapter's errors name resources and
// ids, never a secret.
func operationProblem(what string, err error) error {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, errClosing), errors.Is(err, context.Canceled):
		status = http.StatusServiceUnavailable
	case errors.Is(err, campaign.ErrInvalid):
		return specProblem(err)
	case errors.Is(err, store.ErrNoCampaign), errors.Is(err, adapter.ErrNotUp):
		status = http.StatusNotFound
	case errors.Is(err, adapter.ErrConflict), errors.Is(err, store.ErrLocked), errors.Is(err, store.ErrEmptyCampaign),
		errors.Is(err, campaign.ErrJournalCorrupt), errors.Is(err, campaign.ErrUntrusted), errors.Is(err, errUnusable):
		status = http.StatusConflict
	case errors.Is(err, adapter.ErrDaemonUnreachable):
		status = http.StatusServiceUnavailable
	}
	return problem(status, what+": "+strings.TrimSpace(err.Error()))
}
