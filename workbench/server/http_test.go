package server

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentpen/agentpen/workbench/episode"
	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "update golden files")

func do(t *testing.T, method, url, body string) (int, string, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// sameJSON compares two JSON texts as values.
func sameJSON(t *testing.T, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("body %q is not JSON: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want %q: %v", want, err)
	}
	if d := cmp.Diff(w, g); d != "" {
		t.Errorf("body mismatch (-want +got):\n%s\ngot: %s", d, got)
	}
}

func TestHTTPRoutes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, method, path, body string
		status                   int
		want                     string // exact JSON; "" to skip
		wantText                 string // exact text body instead
	}{
		{name: "health", method: "GET", path: "/health", status: 200, want: `{"status":"healthy"}`},
		{name: "metadata_six_keys", method: "GET", path: "/metadata", status: 200,
			want: `{"name":"AgentWorkbenchEnvironment","description":null,"readme_content":null,"version":"1.0.0","author":null,"documentation_url":null}`},
		{name: "state_fresh_env", method: "GET", path: "/state", status: 200, want: `{"episode_id":null,"step_count":0}`},
		{name: "reset_empty_body", method: "POST", path: "/reset", status: 200,
			want: `{"observation":{"task":"solve fake/default","tools":"echo, submit","output":"workspace of ep-N","error":"","steps_left":5},"reward":0.0,"done":false,"metadata":{"task_id":"fake/default","domain":"fake"}}`},
		{name: "reset_kwargs", method: "POST", path: "/reset", body: `{"seed":42,"episode_id":"ep-001","task_id":"data/x","other":1}`, status: 200,
			want: `{"observation":{"task":"solve data/x","tools":"echo, submit","output":"workspace of ep-001","error":"","steps_left":5},"reward":0.0,"done":false,"metadata":{"task_id":"data/x","domain":"fake"}}`},
		{name: "reset_nulls", method: "POST", path: "/reset", body: `{"seed":null,"episode_id":null,"task_id":null}`, status: 200},
		{name: "reset_negative_seed", method: "POST", path: "/reset", body: `{"seed":-1}`, status: 422,
			want: `{"detail":[{"type":"greater_than_equal","loc":["body","seed"],"msg":"Input should be greater than or equal to 0","input":-1,"ctx":{"ge":0}}]}`},
		{name: "reset_fractional_seed", method: "POST", path: "/reset", body: `{"seed":1.5}`, status: 422,
			want: `{"detail":[{"type":"int_from_float","loc":["body","seed"],"msg":"Input should be a valid integer, got a number with a fractional part","input":1.5}]}`},
		{name: "reset_seed_list", method: "POST", path: "/reset", body: `{"seed":[1]}`, status: 422,
			want: `{"detail":[{"type":"int_type","loc":["body","seed"],"msg":"Input should be a valid integer","input":[1]}]}`},
		{name: "reset_long_episode_id", method: "POST", path: "/reset", body: `{"episode_id":"` + strings.Repeat("é", 256) + `"}`, status: 422,
			want: `{"detail":[{"type":"string_too_long","loc":["body","episode_id"],"msg":"String should have at most 255 characters","input":"` + strings.Repeat("é", 256) + `","ctx":{"max_length":255}}]}`},
		{name: "reset_two_errors", method: "POST", path: "/reset", body: `{"episode_id":5,"seed":"x"}`, status: 422,
			want: `{"detail":[{"type":"int_parsing","loc":["body","seed"],"msg":"Input should be a valid integer, unable to parse string as an integer","input":"x"},{"type":"string_type","loc":["body","episode_id"],"msg":"Input should be a valid string","input":5}]}`},
		{name: "reset_unknown_task", method: "POST", path: "/reset", body: `{"task_id":"nope/nope"}`, status: 422,
			want: `{"detail":[{"type":"value_error","loc":["body","task_id"],"msg":"Value error, unknown task_id \"nope/nope\"","input":"nope/nope","ctx":{"error":"unknown task_id \"nope/nope\""}}]}`},
		{name: "reset_task_not_string", method: "POST", path: "/reset", body: `{"task_id":7}`, status: 422,
			want: `{"detail":[{"type":"string_type","loc":["body","task_id"],"msg":"Input should be a valid string","input":7}]}`},
		{name: "reset_body_not_object", method: "POST", path: "/reset", body: `[1]`, status: 422,
			want: `{"detail":[{"type":"model_attributes_type","loc":["body"],"msg":"Input should be a valid dictionary or object to extract fields from","input":[1]}]}`},
		{name: "reset_bad_json", method: "POST", path: "/reset", body: `{"seed":`, status: 422},
		{name: "step_echo", method: "POST", path: "/step", body: `{"action":{"tool":"echo","args":{"n":1},"metadata":{"k":"v"}},"timeout_s":30,"request_id":"r1","extra":true}`, status: 200,
			want: `{"observation":{"task":"","tools":"","output":"{\"n\":1}","error":"","steps_left":4},"reward":0.0,"done":false,"metadata":{"task_id":"fake/default","domain":"fake"}}`},
		{name: "step_submit_reward_float", method: "POST", path: "/step", body: `{"action":{"tool":"submit","args":{"answer":"ep-N"}}}`, status: 200},
		{name: "step_with_task", method: "POST", path: "/step", body: `{"action":{"tool":"echo","args":{"n":1}},"task_id":"data/x"}`, status: 200,
			want: `{"observation":{"task":"","tools":"","output":"{\"n\":1}","error":"","steps_left":4},"reward":0.0,"done":false,"metadata":{"task_id":"data/x","domain":"fake"}}`},
		{name: "step_unknown_task", method: "POST", path: "/step", body: `{"action":{"tool":"echo"},"task_id":"nope/nope"}`, status: 422,
			want: `{"detail":[{"type":"value_error","loc":["body","task_id"],"msg":"Value error, unknown task_id \"nope/nope\"","input":"nope/nope","ctx":{"error":"unknown task_id \"nope/nope\""}}]}`},
		{name: "step_empty_body", method: "POST", path: "/step", status: 422,
			want: `{"detail":[{"type":"missing","loc":["body"],"msg":"Field required","input":null}]}`},
		{name: "step_missing_action", method: "POST", path: "/step", body: `{"timeout_s":1}`, status: 422,
			want: `{"detail":[{"type":"missing","loc":["body","action"],"msg":"Field required","input":{"timeout_s":1}}]}`},
		{name: "step_action_not_object", method: "POST", path: "/step", body: `{"action":"list_files"}`, status: 422,
			want: `{"detail":[{"type":"dict_type","loc":["body","action"],"msg":"Input should be a valid dictionary","input":"list_files"}]}`},
		{name: "step_bad_timeout", method: "POST", path: "/step", body: `{"action":{"tool":"echo"},"timeout_s":0}`, status: 422,
			want: `{"detail":[{"type":"greater_than","loc":["body","timeout_s"],"msg":"Input should be greater than 0","input":0,"ctx":{"gt":0.0}}]}`},
		{name: "step_extra_forbidden", method: "POST", path: "/step", body: `{"action":{"tool":"echo","bogus":1,"zzz":2}}`, status: 422,
			want: `{"detail":[{"type":"extra_forbidden","loc":["bogus"],"msg":"Extra inputs are not permitted","input":1,"url":"https://errors.pydantic.dev/2.13/v/extra_forbidden"},{"type":"extra_forbidden","loc":["zzz"],"msg":"Extra inputs are not permitted","input":2,"url":"https://errors.pydantic.dev/2.13/v/extra_forbidden"}]}`},
		{name: "step_missing_tool", method: "POST", path: "/step", body: `{"action":{"args":{}}}`, status: 422,
			want: `{"detail":[{"type":"missing","loc":["tool"],"msg":"Field required","input":{"args":{}},"url":"https://errors.pydantic.dev/2.13/v/missing"}]}`},
		{name: "step_bad_types", method: "POST", path: "/step", body: `{"action":{"tool":5,"args":[],"metadata":"m"}}`, status: 422,
			want: `{"detail":[{"type":"dict_type","loc":["metadata"],"msg":"Input should be a valid dictionary","input":"m","url":"https://errors.pydantic.dev/2.13/v/dict_type"},{"type":"string_type","loc":["tool"],"msg":"Input should be a valid string","input":5,"url":"https://errors.pydantic.dev/2.13/v/string_type"},{"type":"dict_type","loc":["args"],"msg":"Input should be a valid dictionary","input":[],"url":"https://errors.pydantic.dev/2.13/v/dict_type"}]}`},
		{name: "step_env_error", method: "POST", path: "/step", body: `{"action":{"tool":"boom"}}`, status: 500, wantText: "Internal Server Error"},
		{name: "not_found", method: "GET", path: "/nope", status: 404, want: `{"detail":"Not Found"}`},
		{name: "method_not_allowed", method: "GET", path: "/reset", status: 405, want: `{"detail":"Method Not Allowed"}`},
		{name: "method_not_allowed_health", method: "POST", path: "/health", status: 405, want: `{"detail":"Method Not Allowed"}`},
	}
	w := newFakeWorld()
	_, ts := startServer(t, w, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := w.built()
			reqBody := strings.ReplaceAll(tt.body, "ep-N", "ep-"+itoa(before))
			status, ctype, body := do(t, tt.method, ts.URL+tt.path, reqBody)
			if status != tt.status {
				t.Fatalf("status %d, want %d; body %s", status, tt.status, body)
			}
			// Fresh env ids are "ep-<n>"; name the one this call built.
			body = strings.ReplaceAll(body, "ep-"+itoa(before), "ep-N")
			switch {
			case tt.wantText != "":
				if body != tt.wantText || !strings.HasPrefix(ctype, "text/plain") {
					t.Errorf("got %q (%s), want %q text/plain", body, ctype, tt.wantText)
				}
			case tt.want != "":
				if ctype != "application/json" {
					t.Errorf("content type %q, want application/json", ctype)
				}
				sameJSON(t, body, tt.want)
			}
			if tt.name == "step_submit_reward_float" && !strings.Contains(body, `"reward":1.0,"done":true`) {
				t.Errorf("reward not rendered as a float: %s", body)
			}
			if tt.name == "reset_bad_json" {
				var v struct {
					Detail []fieldError `json:"detail"`
				}
				if err := json.Unmarshal([]byte(body), &v); err != nil || len(v.Detail) != 1 || v.Detail[0].Type != "json_invalid" || v.Detail[0].Loc[0] != "body" {
					t.Errorf("bad JSON body: got %s, want one json_invalid error at body", body)
				}
			}
		})
	}
	// Every HTTP call that built an environment closed it (checked again at
	// cleanup), and the reset kwargs reached the environment.
	var sawKwargs bool
	for _, o := range w.lastResets() {
		if o.Seed != nil && *o.Seed == 42 && o.EpisodeID == "ep-001" && o.TaskID == "data/x" {
			sawKwargs = true
		}
	}
	if !sawKwargs {
		t.Errorf("reset kwargs seed=42 episode_id=ep-001 task_id=data/x never reached an environment: %+v", w.lastResets())
	}
	w.checkAllClosed(t)
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestSchemaGolden pins the /schema shapes; regenerate with -update.
func TestSchemaGolden(t *testing.T) {
	t.Parallel()
	w := newFakeWorld()
	_, ts := startServer(t, w, nil)
	status, _, body := do(t, "GET", ts.URL+"/schema", "")
	if status != 200 {
		t.Fatalf("status %d", status)
	}
	var v map[string]map[string]any
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"action", "observation", "state"} {
		if v[k]["type"] != "object" || v[k]["properties"] == nil {
			t.Errorf("schema %q: want an object schema with properties, got %v", k, v[k])
		}
	}
	// Every field the wire carries is in the schemas.
	obsJSON, _ := json.Marshal(episode.Observation{})
	var obs map[string]any
	json.Unmarshal(obsJSON, &obs)
	props := v["observation"]["properties"].(map[string]any)
	for k := range obs {
		if _, ok := props[k]; !ok {
			t.Errorf("observation field %q missing from the schema", k)
		}
	}
	golden := filepath.Join("testdata", "schema.golden.json")
	if *update {
		if err := os.WriteFile(golden, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, body, string(want))
}

func TestPyFloat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   float64
		want string
	}{
		{"zero", 0, "0.0"},
		{"one", 1, "1.0"},
		{"fraction", 0.7, "0.7"},
		{"rounded", 0.8999, "0.8999"},
		{"tiny", 1e-05, "1e-05"},
		{"huge", 1e16, "1e+16"},
		{"big_integral", 1234567, "1234567.0"},
		{"negative", -0.5, "-0.5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, _ := pyFloat(tt.in).MarshalJSON()
			if string(b) != tt.want {
				t.Errorf("got %s, want %s", b, tt.want)
			}
		})
	}
}

// TestStatelessAnswerBeforeClose: a stateless call's client has its whole
// answer while the call's environment is still closing (an episode's end
// takes its processes and files away: tens of milliseconds that are no
// client's wait), and the environment is closed once all the same.
func TestStatelessAnswerBeforeClose(t *testing.T) {
	t.Parallel()
	w := newFakeWorld()
	w.closing = make(chan struct{})
	_, ts := startServer(t, w, nil)
	answered := make(chan string, 1)
	go func() {
		resp, err := http.Post(ts.URL+"/step", "application/json", strings.NewReader(`{"action":{"tool":"list_files","args":{}}}`))
		if err != nil {
			answered <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		answered <- fmt.Sprint(string(b), err)
	}()
	select {
	case body := <-answered:
		if !strings.Contains(body, `"observation"`) {
			t.Errorf("answer %s", body)
		}
	case <-time.After(10 * time.Second):
		t.Error("no answer while the environment closes")
	}
	close(w.closing)
}
