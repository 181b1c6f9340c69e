package campaign

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
)

// MaxSpecBytes bounds a campaign spec document.
const MaxSpecBytes = 1 << 20

// SyntaxError is a spec that is not the JSON it should be: malformed, or
// a value of the wrong type, at a line and column (both from 1).
type SyntaxError struct {
	Line, Column int
	// Field is the path of the value of the wrong type ("" for malformed
	// JSON).
	Field string
	Err   error
}

func (e *SyntaxError) Error() string {
	where := fmt.Sprintf("line %d, column %d", e.Line, e.Column)
	if e.Field != "" {
		where += ", " + e.Field
	}
	return where + ": " + e.Err.Error()
}

// Unwrap makes every SyntaxError match ErrInvalid; the cause is in Err.
func (e *SyntaxError) Unwrap() []error { return []error{ErrInvalid, e.Err} }

// DecodeSpec reads one campaign spec: JSON, at most MaxSpecBytes, with
// nothing after it. Malformed JSON, a key that repeats one before it in
// the same object (at any depth: encoding/json would keep the last) and
// values of the wrong type are a *SyntaxError with the line and column
// (and the key's path); fields the spec does not have
// are refused, every one of them named with its path ("server.imgae"),
// as a ValidationErrors. Field names are matched exactly (encoding/json
// alone would also take "Server" for "server"). It does not validate the
// values: NewPlan does.
func DecodeSpec(r io.Reader) (CampaignSpec, error) {
	var spec CampaignSpec
	data, err := io.ReadAll(io.LimitReader(r, MaxSpecBytes+1))
	if err != nil {
		return spec, fmt.Errorf("read spec: %w", err)
	}
	if len(data) > MaxSpecBytes {
		return spec, &ValidationError{Field: "(spec)", Msg: fmt.Sprintf("larger than %d bytes", MaxSpecBytes)}
	}
	var generic any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&generic); err != nil {
		return spec, syntaxError(data, err)
	}
	if tok, err := dec.Token(); err != io.EOF {
		off := dec.InputOffset()
		if err != nil {
			return spec, syntaxError(data, err)
		}
		line, col := position(data, off-1)
		return spec, &SyntaxError{Line: line, Column: col, Err: fmt.Errorf("unexpected %v after the spec", tok)}
	}
	if err := duplicateKey(data); err != nil {
		return spec, err
	}
	if unknown := UnknownFields(generic, reflect.TypeFor[CampaignSpec](), ""); len(unknown) > 0 {
		var errs ValidationErrors
		for _, path := range unknown {
			errs = append(errs, &ValidationError{Field: path, Msg: "unknown field"})
		}
		return spec, errs
	}
	dec = json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&spec); err != nil {
		return spec, syntaxError(data, err)
	}
	return spec, nil
}

// duplicateKey returns a *SyntaxError for the first object key in data
// (well-formed JSON) that repeats a key before it in the same object, at
// any depth, naming its path and where both are; nil when keys are unique.
func duplicateKey(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var walk func(path string) error
	walk = func(path string) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]int64{}
			for dec.More() {
				before := dec.InputOffset()
				kt, err := dec.Token()
				if err != nil {
					return err
				}
				key, _ := kt.(string)
				start := keyStart(data, before)
				p := join(path, key)
				if first, ok := seen[key]; ok {
					line, col := position(data, start)
					fl, fc := position(data, first)
					return &SyntaxError{Line: line, Column: col, Field: p, Err: fmt.Errorf("duplicate key (first at line %d, column %d)", fl, fc)}
				}
				seen[key] = start
				if err := walk(p); err != nil {
					return err
				}
			}
			_, err = dec.Token()
		case json.Delim('['):
			for i := 0; dec.More(); i++ {
				if err := walk(fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			}
			_, err = dec.Token()
		}
		return err
	}
	err := walk("")
	if _, ok := err.(*SyntaxError); ok {
		return err
	}
	if err != nil {
		// DecodeSpec decoded data already; an error here is a bug.
		return &SyntaxError{Line: 1, Column: 1, Err: err}
	}
	return nil
}

// keyStart is the offset of the opening quote of the object key that
// follows offset off (past white space and a comma).
func keyStart(data []byte, off int64) int64 {
	for off < int64(len(data)) && data[off] != '"' {
		off++
	}
	return off
}

// syntaxError places a decoding error at its line and column.
func syntaxError(data []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		line, col := position(data, se.Offset-1)
		return &SyntaxError{Line: line, Column: col, Err: errors.New(se.Error())}
	case errors.As(err, &te):
		line, col := position(data, te.Offset-1)
		return &SyntaxError{Line: line, Column: col, Field: te.Field, Err: fmt.Errorf("want %s, got %s", te.Type, te.Value)}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		line, col := position(data, int64(len(data)))
		return &SyntaxError{Line: line, Column: col, Err: errors.New("unexpected end of the spec")}
	}
	return &SyntaxError{Line: 1, Column: 1, Err: err}
}

// position turns the offset of a byte into its line and column (both from
// 1; the column counts bytes). encoding/json reports offsets just past the
// byte at fault, so callers pass offset-1.
func position(data []byte, off int64) (line, col int) {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(off) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}

// UnknownFields walks a decoded JSON value against the Go type it is meant
// for and returns the path of every object key the type has no field for,
// sorted ("server.imgae", "workspaces[2].taks_id"). Maps take any key.
func UnknownFields(v any, t reflect.Type, path string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []string
	switch val := v.(type) {
	case map[string]any:
		switch t.Kind() {
		case reflect.Struct:
			fields := jsonFields(t)
			for k, sub := range val {
				p := join(path, k)
				f, ok := fields[k]
				if !ok {
					out = append(out, p)
					continue
				}
				out = append(out, UnknownFields(sub, f.Type, p)...)
			}
		case reflect.Map:
			for k, sub := range val {
				out = append(out, UnknownFields(sub, t.Elem(), join(path, k))...)
			}
		}
	case []any:
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			for i, sub := range val {
				out = append(out, UnknownFields(sub, t.Elem(), fmt.Sprintf("%s[%d]", path, i))...)
			}
		}
	}
	slices.Sort(out)
	return out
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// jsonFields maps the JSON names of a struct's fields to the fields.
func jsonFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		out[name] = f
	}
	return out
}
