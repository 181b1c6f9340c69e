package grader

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// decodeAny runs the decoder of route r (0 score, 1 cases, 2 judge) and
// returns what it accepted, re-encoded.
func decodeAny(r byte, body []byte) ([]byte, string, error) {
	switch r % 3 {
	case 0:
		req, err := decodeScore(body)
		if err != nil {
			return nil, "", err
		}
		b, err := json.Marshal(req)
		return b, req.TaskID, err
	case 1:
		req, err := decodeCases(body)
		if err != nil {
			return nil, "", err
		}
		b, err := json.Marshal(req)
		return b, req.TaskID, err
	default:
		req, err := decodeJudge(body)
		if err != nil {
			return nil, "", err
		}
		if req.Hidden == nil || req.VisiblePassed == nil {
			return nil, "", errInvalid
		}
		b, err := json.Marshal(req)
		return b, req.TaskID, err
	}
}

// FuzzDecodeRequest: the request decoders never panic; they never accept
// a body that is not valid UTF-8 JSON or whose task id fails
// checkTaskID; and what they accept re-encodes to a body they accept
// again, unchanged (a fixed point). Seeds are the refusal table and the
// valid bodies.
func FuzzDecodeRequest(f *testing.F) {
	for _, tt := range requestCases {
		if len(tt.body) < 4096 {
			f.Add(byte(routeIndex(tt.route)), []byte(tt.body))
		}
	}
	for route, body := range validBodies {
		f.Add(byte(routeIndex(route)), []byte(body))
	}
	f.Add(byte(2), []byte(`{"task_id":"a","visible_passed":[],"hidden":[{"value":null},{},null,{"value":{"k":[1,2.50,"\u00e9"]}}]}`))
	f.Add(byte(0), []byte(`{"task_id":"a","answer":"\ud800"}`))
	f.Fuzz(func(t *testing.T, route byte, body []byte) {
		out, id, err := decodeAny(route, body)
		if err != nil {
			return
		}
		if !utf8.Valid(body) || !json.Valid(body) {
			t.Fatalf("accepted a body that is not valid UTF-8 JSON: %q", body)
		}
		if checkTaskID(id) != nil {
			t.Fatalf("accepted task id %q", id)
		}
		again, _, err := decodeAny(route, out)
		if err != nil {
			t.Fatalf("re-encoded body %s refused: %v", out, err)
		}
		if !bytes.Equal(again, out) {
			t.Fatalf("not a fixed point:\n%s\n%s", out, again)
		}
	})
}

func routeIndex(route string) int {
	switch route {
	case RouteScore:
		return 0
	case RouteCases:
		return 1
	}
	return 2
}

// TestHiddenOutputWire: {"value": null} is a printed null, {} and a null
// element are no value, and the client encodes them back the same way.
func TestHiddenOutputWire(t *testing.T) {
	t.Parallel()
	req, err := decodeJudge([]byte(`{"task_id":"a","visible_passed":[true],"hidden":[{"value":null},{},null,{"value":[1, 2]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, h := range req.Hidden {
		if h.Value == nil {
			got = append(got, "none")
		} else {
			got = append(got, string(h.Value))
		}
	}
	want := []string{"null", "none", "none", "[1, 2]"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("hidden = %q, want %q", got, want)
		}
	}
	b, _ := json.Marshal(req.Hidden)
	if string(b) != `[{"value":null},{},{},{"value":[1,2]}]` {
		t.Errorf("re-encoded hidden = %s", b)
	}
}
