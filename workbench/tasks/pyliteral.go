package tasks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// PyLiteral returns v as a Python literal that evaluates (even with no
// builtins) to what json.loads of v's JSON gives: v goes through JSON
// first, so a Go value and its JSON mean the same. Strings are Go-quoted:
// for valid UTF-8 Go's escapes (\n, \x00, \u2028, ...) mean the same in
// Python. Dict keys are sorted.
func PyLiteral(v any) (string, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return "", err
	}
	var b strings.Builder
	if err := writePyLiteral(&b, x); err != nil {
		return "", err
	}
	return b.String(), nil
}

// writePyLiteral writes a value decoded from JSON with UseNumber (nil,
// bool, json.Number, string, []any, map[string]any).
func writePyLiteral(b *strings.Builder, v any) error {
	switch x := v.(type) {
	case nil:
		b.WriteString("None")
	case bool:
		b.WriteString(map[bool]string{true: "True", false: "False"}[x])
	case json.Number:
		b.WriteString(x.String())
	case string:
		if !utf8.ValidString(x) {
			return fmt.Errorf("string %q is not UTF-8", x)
		}
		b.WriteString(strconv.Quote(x))
	case []any:
		b.WriteString("[")
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			if err := writePyLiteral(b, e); err != nil {
				return err
			}
		}
		b.WriteString("]")
	case map[string]any:
		b.WriteString("{")
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			if err := writePyLiteral(b, k); err != nil {
				return err
			}
			b.WriteString(": ")
			if err := writePyLiteral(b, x[k]); err != nil {
				return err
			}
		}
		b.WriteString("}")
	default:
		return fmt.Errorf("%T is not a JSON value", v)
	}
	return nil
}
