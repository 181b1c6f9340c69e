package server

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"unicode/utf8"

	"github.com/agentpen/agentpen/workbench/bind"
	"github.com/agentpen/agentpen/workbench/episode"
	"github.com/agentpen/agentpen/workbench/tasks"
)

// maxBodyBytes bounds an HTTP request body, as MaxFrameBytes bounds a frame.
const maxBodyBytes = MaxFrameBytes

// readBody reads a JSON request body. empty reports a body of only
// whitespace; a body that is not JSON, or too large, is answered here and
// reported as handled.
func readBody(w http.ResponseWriter, r *http.Request) (raw []byte, empty, handled bool) {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"detail": fmt.Sprintf("request body larger than %d bytes", maxBodyBytes)})
		} else if errors.Is(err, os.ErrDeadlineExceeded) {
			w.Header().Set("Connection", "close")
			writeJSON(w, http.StatusRequestTimeout, map[string]string{"detail": "the request body did not arrive in time"})
		} else {
			writeJSON(w, http.StatusBadRequest, map[string]string{"detail": "cannot read the request body"})
		}
		return nil, false, true
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return raw, true, false
	}
	if !json.Valid(raw) {
		// FastAPI's shape: the position of the error in the body, the
		// decoder's message in ctx.
		var offset int64
		msg := "invalid JSON"
		if err := json.Unmarshal(raw, new(any)); err != nil {
			msg = err.Error()
			var syn *json.SyntaxError
			if errors.As(err, &syn) {
				offset = syn.Offset
			}
		}
		writeValidation(w, []fieldError{{
			Type: "json_invalid", Loc: []any{"body", offset}, Msg: "JSON decode error",
			Input: json.RawMessage("{}"), Ctx: map[string]any{"error": msg},
		}})
		return nil, false, true
	}
	return raw, false, false
}

func bodyObjectError(raw []byte) fieldError {
	return fieldError{
		Type: "model_attributes_type", Loc: []any{"body"},
		Msg: "Input should be a valid dictionary or object to extract fields from", Input: compactOrNull(raw),
	}
}

// withHTTPEnv builds a fresh environment for one stateless HTTP call, runs
// fn on it and closes it, whatever fn does.
func (s *Server) withHTTPEnv(w http.ResponseWriter, r *http.Request, route string, fn func(ctx context.Context, env Env)) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	done, err := s.track(cancel)
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"detail": "server shutting down"})
		return
	}
	defer done()
	select {
	case s.httpSem <- struct{}{}:
		defer func() { <-s.httpSem }()
	case <-ctx.Done():
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"detail": "server shutting down"})
		return
	}
	env, err := s.cfg.Factory()
	if err != nil {
		s.log.Error("environment factory failed", "route", route, "err", err)
		writeInternalError(w)
		return
	}
	oneEpisode(env)
	oneCall(env)
	defer func() {
		// One request's environment: only an episode that ended in it
		// leaves a result (episode.Environment.Unrecorded).
		if u, ok := env.(interface{ Unrecorded() }); ok {
			u.Unrecorded()
		}
		if err := env.Close(); err != nil {
			s.log.Error("close environment", "route", route, "err", err)
		}
	}()
	fn(ctx, env)
}

// readReset reads an HTTP reset body (/reset, /web/reset) as FastAPI
// validates ResetRequest; a body it refuses is answered here (ok false).
func readReset(w http.ResponseWriter, r *http.Request) (opts episode.ResetOptions, ok bool) {
	raw, empty, handled := readBody(w, r)
	if handled {
		return opts, false
	}
	obj := object{fields: map[string]json.RawMessage{}}
	if !empty {
		if obj, ok = decodeObject(raw); !ok {
			writeValidation(w, []fieldError{bodyObjectError(raw)})
			return opts, false
		}
	}
	opts, errs := resetRequest(obj)
	if errs != nil {
		writeValidation(w, withLocPrefix(errs, "body"))
		return opts, false
	}
	return opts, true
}

func (s *Server) handleReset(w http.ResponseWriter, r *http.Request) {
	opts, ok := readReset(w, r)
	if !ok {
		return
	}
	s.withHTTPEnv(w, r, "/reset", func(ctx context.Context, env Env) {
		s.activity()
		obs, err := env.Reset(ctx, opts)
		if s.writeRefusedReset(w, err, opts.TaskID) {
			return
		}
		if err != nil {
			s.log.Error("reset failed", "route", "/reset", "err", err)
			writeInternalError(w)
			return
		}
		writeJSON(w, http.StatusOK, envelope(obs))
	})
}

func (s *Server) handleStep(w http.ResponseWriter, r *http.Request) {
	raw, empty, handled := readBody(w, r)
	if handled {
		return
	}
	if empty {
		writeValidation(w, []fieldError{{Type: "missing", Loc: []any{"body"}, Msg: "Field required", Input: nullJSON}})
		return
	}
	obj, ok := decodeObject(raw)
	if !ok {
		writeValidation(w, []fieldError{bodyObjectError(raw)})
		return
	}
	if errs := stepRequest(obj); errs != nil {
		writeValidation(w, withLocPrefix(errs, "body"))
		return
	}
	// A stateless step builds a fresh environment; a task_id in the body
	// (an extra key, as /reset takes it) picks the task it is reset to
	// first, instead of the default one. agentpen's episode proxy sets it
	// to the workspace's task.
	var taskID string
	if v, ok := obj.fields["task_id"]; ok && jsonKind(v) == 's' {
		json.Unmarshal(v, &taskID)
	}
	actionObj, isObject := decodeObject(obj.fields["action"])
	if a, isMCP, errs := decodeMCPAction(actionObj); isObject && isMCP {
		if errs != nil {
			writeValidation(w, withURLs(errs))
			return
		}
		s.stepMCP(w, r, a, taskID)
		return
	}
	action, errs := validateActionObject(actionObj, isObject, obj.fields["action"])
	if errs != nil {
		writeValidation(w, withURLs(errs))
		return
	}
	s.withHTTPEnv(w, r, "/step", func(ctx context.Context, env Env) {
		s.activity()
		if taskID != "" {
			if _, err := env.Reset(ctx, episode.ResetOptions{TaskID: taskID}); err != nil {
				if s.writeRefusedReset(w, err, taskID) {
					return
				}
				s.log.Error("reset failed", "route", "/step", "err", err)
				writeInternalError(w)
				return
			}
		}
		obs, err := env.Step(ctx, action)
		if s.writeRefusedReset(w, err, "") {
			return // the step's own reset (no task_id) was refused
		}
		if err != nil {
			s.log.Error("step failed", "route", "/step", "err", err)
			writeInternalError(w)
			return
		}
		writeJSON(w, http.StatusOK, envelope(obs))
	})
}

// stepMCP answers one of OpenEnv's MCP actions through a stateless
// HTTP /step: list_tools without an environment, call_tool on a fresh
// one (reset to taskID, or the bound or default task, first).
func (s *Server) stepMCP(w http.ResponseWriter, r *http.Request, a mcpAction, taskID string) {
	if a.kind == "list_tools" {
		env, _, _ := s.mcpObservation(r.Context(), nil, a, episode.ResetOptions{})
		writeJSON(w, http.StatusOK, env)
		return
	}
	s.withHTTPEnv(w, r, "/step", func(ctx context.Context, env Env) {
		s.activity()
		out, _, err := s.mcpObservation(ctx, &toolEpisode{env: env}, a, episode.ResetOptions{TaskID: taskID})
		if s.writeRefusedReset(w, err, taskID) {
			return
		}
		if err != nil {
			s.log.Error("step failed", "route", "/step", "err", err)
			writeInternalError(w)
			return
		}
		writeJSON(w, http.StatusOK, out)
	})
}

// stepRequest validates the StepRequest fields of an HTTP /step body:
// action an object, timeout_s a number > 0 or null, request_id a string of
// at most 255 characters or null; other keys are allowed and ignored.
func stepRequest(obj object) []fieldError {
	var errs []fieldError
	if v, ok := obj.fields["action"]; !ok {
		errs = append(errs, fieldError{Type: "missing", Loc: []any{"action"}, Msg: "Field required", Input: obj.raw()})
	} else if jsonKind(v) != 'o' {
		errs = append(errs, dictTypeError("action", v))
	}
	if v, ok := obj.fields["timeout_s"]; ok && jsonKind(v) != 'n' {
		var f float64
		if jsonKind(v) != 'd' || json.Unmarshal(v, &f) != nil {
			errs = append(errs, fieldError{Type: "float_type", Loc: []any{"timeout_s"}, Msg: "Input should be a valid number", Input: v})
		} else if f <= 0 {
			errs = append(errs, fieldError{Type: "greater_than", Loc: []any{"timeout_s"}, Msg: "Input should be greater than 0", Input: v, Ctx: map[string]any{"gt": pyFloat(0)}})
		}
	}
	if v, ok := obj.fields["request_id"]; ok && jsonKind(v) != 'n' {
		var s string
		if jsonKind(v) != 's' || json.Unmarshal(v, &s) != nil {
			errs = append(errs, fieldError{Type: "string_type", Loc: []any{"request_id"}, Msg: "Input should be a valid string", Input: v})
		} else if utf8.RuneCountInString(s) > 255 {
			errs = append(errs, fieldError{Type: "string_too_long", Loc: []any{"request_id"}, Msg: "String should have at most 255 characters", Input: v, Ctx: map[string]any{"max_length": 255}})
		}
	}
	return errs
}

func (s *Server) handleState(w http.ResponseWriter, r *http.Request) {
	s.withHTTPEnv(w, r, "/state", func(_ context.Context, env Env) {
		writeJSON(w, http.StatusOK, stateOf(env.State()))
	})
}

//go:embed schema.json
var schemaJSON []byte

func (s *Server) handleSchema(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(schemaJSON)
}

// metadataKeys are the fields of OpenEnv's EnvironmentMetadata, all always
// present.
var metadataKeys = []string{"name", "description", "readme_content", "version", "author", "documentation_url"}

func (s *Server) handleMetadata(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.metadata())
}

// metadata is Config.Metadata with the six OpenEnv keys always present.
func (s *Server) metadata() map[string]any {
	md := map[string]any{}
	for _, k := range metadataKeys {
		md[k] = nil
	}
	for k, v := range s.cfg.Metadata {
		md[k] = v
	}
	return md
}

func (s *Server) handleHealth(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "healthy"})
}

// writeRefusedReset answers a reset refused for its task, and reports
// whether err was one: a task_id the catalogue does not have, or another
// than the one the workspace is bound to, is a 422 on body.task_id; a
// workspace whose binding cannot be read yet (package bind) is a 503.
func (s *Server) writeRefusedReset(w http.ResponseWriter, err error, taskID string) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, tasks.ErrUnknownTask):
		writeTaskError(w, taskID, fmt.Sprintf("unknown task_id %q", taskID))
	case errors.Is(err, bind.ErrOtherTask):
		writeTaskError(w, taskID, bind.ErrOtherTask.Error())
	case errors.Is(err, bind.ErrUnbound), errors.Is(err, bind.ErrBadFile):
		s.logUnbound(err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"detail": unboundMessage(err)})
	default:
		return false
	}
	return true
}

// logUnbound logs why a reset was refused for the binding: a bind file
// that is there but not trusted is an error an operator must see.
func (s *Server) logUnbound(err error) {
	if errors.Is(err, bind.ErrBadFile) {
		s.log.Error("reset refused: the task binding cannot be read", "err", err)
	} else {
		s.log.Warn("reset refused: not bound to a task yet", "err", err)
	}
}

// unboundMessage is what a client is told when the binding cannot be
// read: that the workspace is not bound, never the file's path or what
// is wrong with it (the server logs that).
func unboundMessage(err error) string {
	if errors.Is(err, bind.ErrBadFile) {
		return "this workspace's task binding cannot be read: every reset is refused"
	}
	return bind.ErrUnbound.Error()
}

// writeTaskError is the 422 of a reset refused for its task_id.
func writeTaskError(w http.ResponseWriter, taskID, msg string) {
	in, _ := json.Marshal(taskID)
	writeValidation(w, []fieldError{{
		Type: "value_error", Loc: []any{"body", "task_id"}, Msg: "Value error, " + msg,
		Input: in, Ctx: map[string]any{"error": msg},
	}})
}
