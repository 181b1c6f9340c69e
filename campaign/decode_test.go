package campaign

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestDecodeSpec(t *testing.T) {
	tests := []struct {
		name       string
		in         string
		wantLine   int
		wantCol    int
		wantFields []string
		wantMsg    string
	}{
		{name: "ok", in: `{"campaign_id":"c","server":{"image":"x"},"workspaces":[{"task_id":"t","image":"x"}]}`},
		{name: "malformed", in: "{\n  \"campaign_id\": \"c\",\n  \"server\": {\"image\": \"x\"\n}", wantLine: 4, wantCol: 2, wantMsg: "unexpected end"},
		{name: "bad_token", in: "{\n  \"campaign_id\": c\n}", wantLine: 2, wantCol: 18, wantMsg: "invalid character"},
		{name: "wrong_type", in: "{\"campaign_id\":\"c\",\n \"workspaces\": [{\"task_id\": 7}]}", wantLine: 2, wantCol: 29, wantMsg: "want string", wantFields: []string{"workspaces.task_id"}},
		{name: "every_unknown_field", in: `{"campaign_id":"c","bogus":1,"server":{"imgae":"x"},"workspaces":[{"task_id":"t"},{"taks_id":"t","labels":{"any":"key"}}]}`,
			wantFields: []string{"bogus", "server.imgae", "workspaces[1].taks_id"}},
		{name: "case_differs", in: `{"Campaign_ID":"c"}`, wantFields: []string{"Campaign_ID"}},
		{name: "trailing_data", in: `{"campaign_id":"c"} {"x":1}`, wantLine: 1, wantCol: 21, wantMsg: "after the spec"},
		{name: "empty", in: ``, wantLine: 1, wantCol: 1, wantMsg: "unexpected end"},
		{name: "duplicate_key", in: "{\"campaign_id\":\"a\",\n  \"campaign_id\":\"b\"}", wantLine: 2, wantCol: 3,
			wantMsg: "line 2, column 3, campaign_id: duplicate key (first at line 1, column 2)", wantFields: []string{"campaign_id"}},
		{name: "duplicate_nested_key", in: `{"campaign_id":"c","workspaces":[{"task_id":"t"},{"task_id":"t","labels":{"a":"1", "b":"2" ,"a":"3"}}]}`, wantLine: 1, wantCol: 93,
			wantMsg: "duplicate key (first at line 1, column 75)", wantFields: []string{"workspaces[1].labels.a"}},
		{name: "duplicate_after_unknown", in: `{"bogus":1,"server":{"image":"x","image":"y"}}`, wantLine: 1, wantCol: 34,
			wantMsg: "duplicate key", wantFields: []string{"server.image"}},
		{name: "same_key_other_objects", in: `{"campaign_id":"c","server":{"image":"x"},"workspaces":[{"task_id":"t","image":"x"},{"task_id":"t","image":"x"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeSpec(strings.NewReader(tt.in))
			if tt.wantLine == 0 && tt.wantFields == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err %v does not match ErrInvalid", err)
			}
			var se *SyntaxError
			if tt.wantLine != 0 {
				if !errors.As(err, &se) || se.Line != tt.wantLine || se.Column != tt.wantCol || !strings.Contains(err.Error(), tt.wantMsg) {
					t.Fatalf("err %v, want line %d column %d saying %q", err, tt.wantLine, tt.wantCol, tt.wantMsg)
				}
				if tt.wantFields != nil && se.Field != tt.wantFields[0] {
					t.Fatalf("field %q, want %q", se.Field, tt.wantFields[0])
				}
				return
			}
			var ve ValidationErrors
			if !errors.As(err, &ve) {
				t.Fatalf("err %T %v, want ValidationErrors", err, err)
			}
			var got []string
			for _, e := range ve {
				got = append(got, e.Field)
			}
			if !slices.Equal(got, tt.wantFields) {
				t.Fatalf("unknown fields %v, want %v", got, tt.wantFields)
			}
		})
	}
}

func FuzzDecodeSpec(f *testing.F) {
	f.Add(`{"campaign_id":"c","server":{"image":"x"},"workspaces":[{"task_id":"t","image":"x"}]}`)
	f.Add(`{"x":[1,2,{"y":null}]}`)
	f.Add("{\n\"a\":")
	f.Add(`{"campaign_id":"a","campaign_id":"b"}`)
	f.Add(`{"server":{"labels":{"k":"1","k":"2"}}}`)
	f.Add(`{"workspaces":[{"task_id":"t"},{"task_id":"t","task_id":"u"}]}`)
	f.Fuzz(func(t *testing.T, in string) {
		spec, err := DecodeSpec(strings.NewReader(in))
		if err == nil && keyTokens(t, in) != mapKeys(t, in) {
			t.Fatalf("accepted a document with a repeated key: %s", in)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("an error that is not ErrInvalid: %v", err)
			}
			var se *SyntaxError
			if errors.As(err, &se) && (se.Line < 1 || se.Column < 1) {
				t.Fatalf("position %d:%d", se.Line, se.Column)
			}
			return
		}
		_ = spec
	})
}

// keyTokens counts the object keys of the JSON document in.
func keyTokens(t *testing.T, in string) int {
	dec := json.NewDecoder(strings.NewReader(in))
	n := 0
	var inObject []bool
	expectKey := false
	for {
		tok, err := dec.Token()
		if err != nil {
			return n
		}
		switch tok {
		case json.Delim('{'):
			inObject = append(inObject, true)
			expectKey = true
			continue
		case json.Delim('['):
			inObject = append(inObject, false)
		case json.Delim('}'), json.Delim(']'):
			inObject = inObject[:len(inObject)-1]
		default:
			if expectKey {
				n++
				expectKey = false
				continue
			}
		}
		expectKey = len(inObject) > 0 && inObject[len(inObject)-1]
	}
}

// mapKeys counts the keys of every object of in decoded into maps (where
// a repeated key collapses).
func mapKeys(t *testing.T, in string) int {
	var v any
	if err := json.Unmarshal([]byte(in), &v); err != nil {
		t.Fatalf("DecodeSpec accepted what encoding/json refuses: %v", err)
	}
	var count func(any) int
	count = func(v any) int {
		n := 0
		switch v := v.(type) {
		case map[string]any:
			for _, sub := range v {
				n += 1 + count(sub)
			}
		case []any:
			for _, sub := range v {
				n += count(sub)
			}
		}
		return n
	}
	return count(v)
}
