package grader

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"unicode/utf8"
)

// MaxBodyBytes bounds a request body. A judge request carries up to
// sandbox.DefaultOutputBytes (1 MiB) of printed value per hidden case,
// and the catalogue's code tasks have at most 8 hidden cases, so 16 MiB
// leaves room; a body beyond it is refused (413), never graded.
const MaxBodyBytes = 16 << 20

// maxResponseBytes bounds a response the client reads.
const maxResponseBytes = 16 << 20

// maxTaskIDBytes bounds a task id ("domain/family@N").
const maxTaskIDBytes = 200

// errInvalid marks a request the server refuses with 422 (or 400 for a
// body that is not JSON at all); its text is public and never repeats
// what the client sent.
var errInvalid = errors.New("invalid request")

// errNotJSON marks a body that is not one JSON value.
var errNotJSON = errors.New("body is not JSON")

// fieldError is a refusal of one field, by name.
type fieldError struct {
	Field string
	Msg   string
}

func (e *fieldError) Error() string { return e.Field + ": " + e.Msg }
func (e *fieldError) Unwrap() error { return errInvalid }

// scoreRequest is POST /v1/score's body.
type scoreRequest struct {
	TaskID string `json:"task_id"`
	Answer string `json:"answer"`
}

// casesRequest is POST /v1/cases's body.
type casesRequest struct {
	TaskID string `json:"task_id"`
}

// judgeRequest is POST /v1/judge's body: whether each visible case passed
// and what each hidden case printed.
type judgeRequest struct {
	TaskID        string         `json:"task_id"`
	VisiblePassed []bool         `json:"visible_passed"`
	Hidden        []hiddenOutput `json:"hidden"`
}

// hiddenOutput is one hidden case's output: {"value": V} when the case
// printed the JSON value V (which may be null), {} when it printed none.
type hiddenOutput struct {
	Value json.RawMessage `json:"value,omitempty"`
}

// verdict is the body of a score or judge reply.
type verdict struct {
	Credit float64 `json:"credit"`
	Reason string  `json:"reason"`
}

// casesReply is the body of a cases reply: the hidden cases' arguments.
type casesReply struct {
	Inputs [][]any `json:"inputs"`
}

// apiError is the body of every refusal: a stable code and a fixed public
// message.
type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// decodeStrict decodes body, one JSON object, into v: valid UTF-8, no
// duplicate fields, no trailing data, exactly the top-level fields named
// in fields (all required), and no unknown field deeper down. Numbers are
// kept exact (json.Number) where v holds an any.
func decodeStrict(body []byte, v any, fields ...string) error {
	if !utf8.Valid(body) {
		return &fieldError{"body", "must be valid UTF-8"}
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		if !json.Valid(body) {
			return errNotJSON
		}
		return &fieldError{"body", "must be a JSON object"}
	}
	if !json.Valid(body) {
		return errNotJSON
	}
	// Field presence and duplicates, on the top level only.
	var got map[string]json.RawMessage
	if err := json.Unmarshal(body, &got); err != nil {
		return &fieldError{"body", "must be a JSON object"}
	}
	if err := noDuplicateKeys(body); err != nil {
		return err
	}
	for _, name := range fields {
		if _, ok := got[name]; !ok {
			return &fieldError{name, "is required"}
		}
	}
	if len(got) != len(fields) {
		return &fieldError{"body", "has an unknown field"}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return describeDecodeError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return &fieldError{"body", "must hold exactly one JSON value"}
	}
	return nil
}

// noDuplicateKeys refuses an object that names a key twice at its top
// level: which of the two counts would depend on the decoder.
func noDuplicateKeys(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if _, err := dec.Token(); err != nil { // {
		return errNotJSON
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return errNotJSON
		}
		key, _ := tok.(string)
		if seen[key] {
			return &fieldError{"body", "names a field twice"}
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return errNotJSON
		}
	}
	return nil
}

// describeDecodeError names the field a decode error is about, without
// the value the client sent.
func describeDecodeError(err error) error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		field := typeErr.Field
		if field == "" {
			field = "body"
		}
		return &fieldError{field, "has the wrong type (want " + typeErr.Type.String() + ")"}
	}
	// An unknown field below the top level, or a number out of range.
	return &fieldError{"body", "has an unknown field or a value out of range"}
}

// checkTaskID checks a task id's form: 1..200 bytes of letters, digits
// and "_-./@". Whether it names a task is the catalogue's to say.
func checkTaskID(id string) error {
	if id == "" || len(id) > maxTaskIDBytes {
		return &fieldError{"task_id", fmt.Sprintf("must be 1 to %d bytes", maxTaskIDBytes)}
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == '/' || c == '@'
		if !ok {
			return &fieldError{"task_id", "may hold only letters, digits and _-./@"}
		}
	}
	return nil
}

// decodeScore decodes and checks a score request.
func decodeScore(body []byte) (scoreRequest, error) {
	var r scoreRequest
	if err := decodeStrict(body, &r, "task_id", "answer"); err != nil {
		return scoreRequest{}, err
	}
	if err := checkTaskID(r.TaskID); err != nil {
		return scoreRequest{}, err
	}
	return r, nil
}

// decodeCases decodes and checks a cases request.
func decodeCases(body []byte) (casesRequest, error) {
	var r casesRequest
	if err := decodeStrict(body, &r, "task_id"); err != nil {
		return casesRequest{}, err
	}
	if err := checkTaskID(r.TaskID); err != nil {
		return casesRequest{}, err
	}
	return r, nil
}

// decodeJudge decodes and checks a judge request. Each hidden value is
// one valid JSON value (the decoder checked it) or absent.
func decodeJudge(body []byte) (judgeRequest, error) {
	var r judgeRequest
	if err := decodeStrict(body, &r, "task_id", "visible_passed", "hidden"); err != nil {
		return judgeRequest{}, err
	}
	if err := checkTaskID(r.TaskID); err != nil {
		return judgeRequest{}, err
	}
	if r.VisiblePassed == nil {
		return judgeRequest{}, &fieldError{"visible_passed", "must be a list of booleans"}
	}
	if r.Hidden == nil {
		return judgeRequest{}, &fieldError{"hidden", "must be a list of outputs"}
	}
	return r, nil
}

// checkVerdict checks a verdict the client received: a finite credit in
// [0, 1] and a reason of valid UTF-8.
func checkVerdict(v verdict) error {
	if math.IsNaN(v.Credit) || v.Credit < 0 || v.Credit > 1 {
		return fmt.Errorf("credit %v: must be in [0, 1]", v.Credit)
	}
	if !utf8.ValidString(v.Reason) || len(v.Reason) > 1000 {
		return errors.New("reason: must be valid UTF-8 of at most 1000 bytes")
	}
	return nil
}
