package server

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/agentpen/agentpen/workbench/episode"
)

// pyFloat is a float64 rendered as Python's json renders a float: 1.0 not 1,
// 1e-05, and null for NaN and the infinities (pydantic's default).
type pyFloat float64

func (f pyFloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return []byte("null"), nil
	}
	abs := math.Abs(v)
	if v != 0 && (abs < 1e-4 || abs >= 1e16) {
		return []byte(strconv.FormatFloat(v, 'e', -1, 64)), nil
	}
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return []byte(s), nil
}

// observationEnvelope is serialize_observation's dict plus the top-level
// metadata of OpenEnv PR #805: the HTTP reset/step body and the WebSocket
// observation's data.
type observationEnvelope struct {
	Observation episode.Observation `json:"observation"`
	Reward      pyFloat             `json:"reward"`
	Done        bool                `json:"done"`
	Metadata    map[string]any      `json:"metadata"`
}

func envelope(o episode.Observation) observationEnvelope {
	md := o.Metadata
	if md == nil {
		md = map[string]any{}
	}
	return observationEnvelope{Observation: o, Reward: pyFloat(o.Reward), Done: o.Done, Metadata: md}
}

// wireState is State as OpenEnv's base State model dumps it: an empty
// episode id is null.
type wireState struct {
	EpisodeID *string `json:"episode_id"`
	StepCount int     `json:"step_count"`
}

func stateOf(st episode.State) wireState {
	w := wireState{StepCount: st.StepCount}
	if st.EpisodeID != "" {
		id := st.EpisodeID
		w.EpisodeID = &id
	}
	return w
}

// fieldError is one item of a pydantic ValidationError.errors() list.
type fieldError struct {
	Type  string          `json:"type"`
	Loc   []any           `json:"loc"`
	Msg   string          `json:"msg"`
	Input json.RawMessage `json:"input"`
	Ctx   map[string]any  `json:"ctx,omitempty"`
	// URL is set on the errors of model validation (pydantic's errors()),
	// and left out of FastAPI's request-body errors.
	URL string `json:"url,omitempty"`
}

// pydanticURL is the documentation link pydantic puts on each error.
func pydanticURL(typ string) string { return "https://errors.pydantic.dev/2.13/v/" + typ }

// withURLs returns errs with each item's url set, as pydantic's
// ValidationError.errors() has them.
func withURLs(errs []fieldError) []fieldError {
	out := make([]fieldError, len(errs))
	for i, e := range errs {
		e.URL = pydanticURL(e.Type)
		out[i] = e
	}
	return out
}

// withLocPrefix returns errs with prefix put in front of each loc, as
// FastAPI reports a body field ("body", "seed").
func withLocPrefix(errs []fieldError, prefix ...any) []fieldError {
	out := make([]fieldError, len(errs))
	for i, e := range errs {
		e.Loc = append(append([]any(nil), prefix...), e.Loc...)
		out[i] = e
	}
	return out
}

// writeJSON answers v, whole and at once: sized and flushed, so the client
// has it before the handler's work after the answer (a stateless call's
// environment closing) ends.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Every value written here is built from JSON-able types; a failure
		// is a bug, reported as Starlette reports an unhandled error.
		writeInternalError(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
	http.NewResponseController(w).Flush()
}

// writeInternalError is Starlette's answer to an unhandled exception.
func writeInternalError(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusInternalServerError)
	w.Write([]byte("Internal Server Error"))
}

// writeValidation writes FastAPI's 422 body.
func writeValidation(w http.ResponseWriter, errs []fieldError) {
	writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"detail": errs})
}
