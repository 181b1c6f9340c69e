package campaign

import (
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
	f.Fuzz(func(t *testing.T, in string) {
		spec, err := DecodeSpec(strings.NewReader(in))
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
