package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentpen/agentpen/workbench/episode"
)

// object is a decoded JSON object that remembers its key order, so errors
// about extra keys come out in the order the client wrote them, as
// pydantic's do.
type object struct {
	keys   []string
	fields map[string]json.RawMessage
}

// decodeObject decodes raw as a JSON object; ok is false when raw is valid
// JSON of another type. A repeated key keeps its last value, as Python's
// json does.
func decodeObject(raw []byte) (obj object, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return object{}, false
	}
	obj.fields = map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return object{}, false
		}
		key, isKey := tok.(string)
		if !isKey {
			return object{}, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return object{}, false
		}
		if _, seen := obj.fields[key]; !seen {
			obj.keys = append(obj.keys, key)
		}
		obj.fields[key] = v
	}
	return obj, true
}

func (o object) raw() json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(o.fields[k])
	}
	b.WriteByte('}')
	return b.Bytes()
}

// jsonKind is the first byte's idea of a JSON value's type.
func jsonKind(v json.RawMessage) byte {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return 0
	}
	switch c := v[0]; {
	case c == '"':
		return 's'
	case c == '{':
		return 'o'
	case c == '[':
		return 'a'
	case c == 't' || c == 'f':
		return 'b'
	case c == 'n':
		return 'n'
	default:
		return 'd'
	}
}

var nullJSON = json.RawMessage("null")

// actionFields are the fields of the workbench action, in pydantic's order
// (the base Action's metadata first).
var actionFields = map[string]bool{"metadata": true, "tool": true, "args": true}

// validateAction validates an action as WorkbenchAction.model_validate
// does: {"tool": str, "args": object (default {}), "metadata": object
// (default {})}, nothing else. The errors carry locs relative to the action
// and no url; callers add what their route needs.
func validateAction(raw json.RawMessage) (episode.Action, []fieldError) {
	obj, ok := decodeObject(raw)
	return validateActionObject(obj, ok, raw)
}

// validateActionObject is validateAction on an action decodeObject has
// read (ok false: raw is no object), so a large frame is decoded once.
func validateActionObject(obj object, ok bool, raw json.RawMessage) (episode.Action, []fieldError) {
	if !ok {
		return episode.Action{}, []fieldError{{
			Type:  "model_type",
			Loc:   []any{},
			Msg:   "Input should be a valid dictionary or instance of WorkbenchAction",
			Input: compactOrNull(raw),
			Ctx:   map[string]any{"class_name": "WorkbenchAction"},
		}}
	}
	var errs []fieldError
	if v, ok := obj.fields["metadata"]; ok && jsonKind(v) != 'o' {
		errs = append(errs, dictTypeError("metadata", v))
	}
	var a episode.Action
	if v, ok := obj.fields["tool"]; !ok {
		errs = append(errs, fieldError{Type: "missing", Loc: []any{"tool"}, Msg: "Field required", Input: obj.raw()})
	} else if jsonKind(v) != 's' || json.Unmarshal(v, &a.Tool) != nil {
		errs = append(errs, fieldError{Type: "string_type", Loc: []any{"tool"}, Msg: "Input should be a valid string", Input: v})
	}
	a.Args = map[string]json.RawMessage{}
	if v, ok := obj.fields["args"]; ok {
		if jsonKind(v) != 'o' || json.Unmarshal(v, &a.Args) != nil {
			errs = append(errs, dictTypeError("args", v))
		}
	}
	for _, k := range obj.keys {
		if !actionFields[k] {
			errs = append(errs, fieldError{Type: "extra_forbidden", Loc: []any{k}, Msg: "Extra inputs are not permitted", Input: obj.fields[k]})
		}
	}
	if errs != nil {
		return episode.Action{}, errs
	}
	return a, nil
}

func dictTypeError(field string, v json.RawMessage) fieldError {
	return fieldError{Type: "dict_type", Loc: []any{field}, Msg: "Input should be a valid dictionary", Input: v}
}

func compactOrNull(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return nullJSON
	}
	return b.Bytes()
}

const maxEpisodeIDChars = 255

// resetRequest validates an HTTP /reset body as FastAPI validates
// ResetRequest (seed ≥ 0 or null, episode_id a string of at most 255
// characters or null, any other keys allowed). Locs are relative to the
// body. task_id must be a string or null (a deviation; see the package doc).
func resetRequest(obj object) (episode.ResetOptions, []fieldError) {
	var opts episode.ResetOptions
	var errs []fieldError
	if v, ok := obj.fields["seed"]; ok && jsonKind(v) != 'n' {
		n, fe := pyInt(v)
		switch {
		case fe != nil:
			fe.Loc = []any{"seed"}
			errs = append(errs, *fe)
		case n < 0:
			errs = append(errs, fieldError{Type: "greater_than_equal", Loc: []any{"seed"}, Msg: "Input should be greater than or equal to 0", Input: v, Ctx: map[string]any{"ge": 0}})
		default:
			opts.Seed = &n
		}
	}
	if v, ok := obj.fields["episode_id"]; ok && jsonKind(v) != 'n' {
		var s string
		switch {
		case jsonKind(v) != 's' || json.Unmarshal(v, &s) != nil:
			errs = append(errs, fieldError{Type: "string_type", Loc: []any{"episode_id"}, Msg: "Input should be a valid string", Input: v})
		case utf8.RuneCountInString(s) > maxEpisodeIDChars:
			errs = append(errs, fieldError{Type: "string_too_long", Loc: []any{"episode_id"}, Msg: "String should have at most 255 characters", Input: v, Ctx: map[string]any{"max_length": maxEpisodeIDChars}})
		default:
			opts.EpisodeID = s
		}
	}
	if v, ok := obj.fields["task_id"]; ok && jsonKind(v) != 'n' {
		if jsonKind(v) != 's' || json.Unmarshal(v, &opts.TaskID) != nil {
			errs = append(errs, fieldError{Type: "string_type", Loc: []any{"task_id"}, Msg: "Input should be a valid string", Input: v})
		}
	}
	return opts, errs
}

// pyInt reads v as pydantic's lax int does from JSON: an integer, a float
// without a fractional part, or a string holding an integer.
func pyInt(v json.RawMessage) (int64, *fieldError) {
	switch jsonKind(v) {
	case 'd':
		s := string(bytes.TrimSpace(v))
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n, nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsInf(f, 0) || f > math.MaxInt64 || f < math.MinInt64 {
			return 0, &fieldError{Type: "int_parsing", Msg: "Input should be a valid integer, unable to parse string as an integer", Input: v}
		}
		if f != math.Trunc(f) {
			return 0, &fieldError{Type: "int_from_float", Msg: "Input should be a valid integer, got a number with a fractional part", Input: v}
		}
		return int64(f), nil
	case 's':
		var s string
		if json.Unmarshal(v, &s) == nil {
			if n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64); err == nil {
				return n, nil
			}
		}
		return 0, &fieldError{Type: "int_parsing", Msg: "Input should be a valid integer, unable to parse string as an integer", Input: v}
	default:
		return 0, &fieldError{Type: "int_type", Msg: "Input should be a valid integer", Input: v}
	}
}

// resetKwargs reads WebSocket reset data as the Python environment's
// reset(seed, episode_id, task_id, **kwargs) would take it: no model
// validation (a negative seed passes), unknown keys ignored, and a value
// the environment could not use is an error for EXECUTION_ERROR.
func resetKwargs(obj object) (episode.ResetOptions, error) {
	var opts episode.ResetOptions
	if v, ok := obj.fields["seed"]; ok && jsonKind(v) != 'n' {
		n, fe := pyInt(v)
		if fe != nil || jsonKind(v) == 's' {
			return opts, fmt.Errorf("seed must be an integer, got %s", compactOrNull(v))
		}
		opts.Seed = &n
	}
	if v, ok := obj.fields["episode_id"]; ok && jsonKind(v) != 'n' {
		if jsonKind(v) != 's' || json.Unmarshal(v, &opts.EpisodeID) != nil {
			return opts, fmt.Errorf("episode_id must be a string, got %s", compactOrNull(v))
		}
	}
	if v, ok := obj.fields["task_id"]; ok && jsonKind(v) != 'n' {
		if jsonKind(v) != 's' || json.Unmarshal(v, &opts.TaskID) != nil {
			return opts, fmt.Errorf("task_id must be a string, got %s", compactOrNull(v))
		}
	}
	return opts, nil
}

// mcpAction is one of OpenEnv's MCP actions through step: list_tools, or
// call_tool with its tool's name and arguments.
type mcpAction struct {
	kind string
	tool string
	args json.RawMessage
}

// mcpActionFields are the fields of ListToolsAction and CallToolAction.
var mcpActionFields = map[string]map[string]bool{
	"list_tools": {"type": true, "metadata": true},
	"call_tool":  {"type": true, "metadata": true, "tool_name": true, "arguments": true},
}

// decodeMCPAction reads an action (decoded by decodeObject) with a
// "type" key as OpenEnv reads its MCP actions (ListToolsAction,
// CallToolAction: extra keys forbidden, tool_name required, arguments an
// object); isMCP is false for an action without one (a workbench action,
// for validateActionObject).
func decodeMCPAction(obj object) (a mcpAction, isMCP bool, errs []fieldError) {
	rawType, ok := obj.fields["type"]
	if !ok {
		return a, false, nil
	}
	if jsonKind(rawType) != 's' || json.Unmarshal(rawType, &a.kind) != nil || mcpActionFields[a.kind] == nil {
		return a, true, []fieldError{{Type: "literal_error", Loc: []any{"type"}, Msg: "Input should be 'list_tools' or 'call_tool'",
			Input: rawType, Ctx: map[string]any{"expected": "'list_tools' or 'call_tool'"}}}
	}
	if v, ok := obj.fields["metadata"]; ok && jsonKind(v) != 'o' {
		errs = append(errs, dictTypeError("metadata", v))
	}
	if a.kind == "call_tool" {
		if v, ok := obj.fields["tool_name"]; !ok {
			errs = append(errs, fieldError{Type: "missing", Loc: []any{"tool_name"}, Msg: "Field required", Input: obj.raw()})
		} else if jsonKind(v) != 's' || json.Unmarshal(v, &a.tool) != nil {
			errs = append(errs, fieldError{Type: "string_type", Loc: []any{"tool_name"}, Msg: "Input should be a valid string", Input: v})
		}
		if v, ok := obj.fields["arguments"]; ok {
			if jsonKind(v) != 'o' {
				errs = append(errs, dictTypeError("arguments", v))
			}
			a.args = v
		}
	}
	for _, k := range obj.keys {
		if !mcpActionFields[a.kind][k] {
			errs = append(errs, fieldError{Type: "extra_forbidden", Loc: []any{k}, Msg: "Extra inputs are not permitted", Input: obj.fields[k]})
		}
	}
	return a, true, errs
}
