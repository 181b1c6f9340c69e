package launcher

import (
	"encoding/json"
	"testing"
)

const bound = "software/median@7"

var rewriteCases = []struct {
	name, in string
	reset    bool // the workbench would reset on it
	other    bool // it names another task: refused
}{
	{"reset_other_task", `{"type":"reset","data":{"task_id":"sql/top_customer","seed":1}}`, true, true},
	{"reset_bound_task", `{"type":"reset","data":{"task_id":"software/median@7","seed":1}}`, true, false},
	{"reset_no_data", `{"type":"reset"}`, true, false},
	{"reset_empty_data", `{"type":"reset","data":{}}`, true, false},
	{"duplicate_type", `{"type":"state","type":"reset","data":{"task_id":"x"}}`, true, true},
	{"duplicate_task", `{"type":"reset","data":{"task_id":"x","task_id":"y"}}`, true, true},
	{"duplicate_task_bound_last", `{"type":"reset","data":{"task_id":"x","task_id":"software/median@7"}}`, true, false},
	{"duplicate_data", `{"type":"reset","data":{"task_id":"x"},"data":{"task_id":"y"}}`, true, true},
	{"escaped_keys", `{"typ\u0065":"r\u0065set","d\u0061ta":{"t\u0061sk_id":"x"}}`, true, true},
	{"null_task", `{"type":"reset","data":{"task_id":null}}`, true, false},
	{"empty_task", `{"type":"reset","data":{"task_id":""}}`, true, false},
	{"number_task", `{"type":"reset","data":{"task_id":7}}`, true, false},
	{"step", `{"type":"step","data":{"tool":"submit","args":{"answer":"1"}}}`, false, false},
	{"state", `{"type":"state"}`, false, false},
	{"data_null", `{"type":"reset","data":null}`, false, false},
	{"data_string", `{"type":"reset","data":"task"}`, false, false},
	{"not_json", `{"type":"reset",`, false, false},
	{"array", `[{"type":"reset"}]`, false, false},
	{"upper_type", `{"Type":"reset","data":{"task_id":"x"}}`, false, false},
}

// wouldReset decodes a frame as the workbench does (encoding/json, the
// last of repeated keys) and returns its reset's task_id.
func wouldReset(frame []byte) (task any, reset bool) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(frame, &obj) != nil || obj == nil {
		return nil, false
	}
	var typ string
	if json.Unmarshal(obj["type"], &typ) != nil || typ != "reset" {
		return nil, false
	}
	data := map[string]any{}
	if raw, ok := obj["data"]; ok {
		if json.Unmarshal(raw, &data) != nil || data == nil {
			return nil, false
		}
	}
	return data["task_id"], true
}

func TestRewriteFrame(t *testing.T) {
	for _, tt := range rewriteCases {
		t.Run(tt.name, func(t *testing.T) {
			out, other := rewriteFrame([]byte(tt.in), bound)
			if other != tt.other {
				t.Fatalf("other task %v, want %v", other, tt.other)
			}
			if other {
				return
			}
			task, reset := wouldReset(out)
			if reset != tt.reset {
				t.Fatalf("%s: reset %v, want %v", out, reset, tt.reset)
			}
			if reset && task != bound {
				t.Errorf("%s: task %v, want %s", out, task, bound)
			}
			if !reset && string(out) != tt.in {
				t.Errorf("a frame that is no reset changed: %s", out)
			}
		})
	}
}

// FuzzRewriteFrame: whatever the client sends, a frame the workbench
// takes for a reset names the bound task once relayed, one naming
// another task is refused (never relayed), and one the workbench does
// not take for a reset is relayed unchanged.
func FuzzRewriteFrame(f *testing.F) {
	for _, tt := range rewriteCases {
		f.Add([]byte(tt.in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, other := rewriteFrame(in, bound)
		asked, wasReset := wouldReset(in)
		if other {
			if s, ok := asked.(string); !wasReset || !ok || s == "" || s == bound {
				t.Fatalf("%q refused as naming another task; the workbench would reset on %v (%v)", in, asked, wasReset)
			}
			return
		}
		task, reset := wouldReset(out)
		if reset && task != bound {
			t.Fatalf("%q -> %q: a reset of %v", in, out, task)
		}
		if !wasReset && string(out) != string(in) {
			t.Fatalf("%q changed to %q", in, out)
		}
	})
}

func TestRewriteBody(t *testing.T) {
	for _, tt := range []struct {
		name, in, want string
		empty          bool
	}{
		{"reset", `{"seed":2}`, `{"seed":2,"task_id":"software/median@7"}`, true},
		{"reset_other", `{"task_id":"x","seed":2}`, `other`, true},
		{"reset_null", `{"task_id":null}`, `{"task_id":"software/median@7"}`, true},
		{"reset_empty", ` `, `{"task_id":"software/median@7"}`, true},
		{"step_empty", ``, ``, false},
		{"array", `[]`, `[]`, true},
		{"duplicate", `{"task_id":"x","task_id":"y"}`, `other`, true},
		{"duplicate_bound_last", `{"task_id":"x","task_id":"software/median@7"}`, `{"task_id":"software/median@7"}`, true},
		{"html_kept", `{"episode_id":"<a&b>"}`, `{"episode_id":"<a&b>","task_id":"software/median@7"}`, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, other := rewriteBody([]byte(tt.in), bound, tt.empty)
			got := string(out)
			if other {
				got = "other"
			}
			if got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

// wouldStepOn decodes an HTTP /step body as the workbench does (valid
// JSON, an object, the last of repeated keys, action an object) and
// returns the task_id it resets the fresh environment to before the step
// ("" for its default task); step is false when the workbench refuses
// the body without stepping.
func wouldStepOn(body []byte) (task string, step bool) {
	if !json.Valid(body) {
		return "", false
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) != nil || obj == nil {
		return "", false
	}
	var action map[string]json.RawMessage
	if json.Unmarshal(obj["action"], &action) != nil || action == nil {
		return "", false
	}
	json.Unmarshal(obj["task_id"], &task) // a string, else ""
	return task, true
}

var stepBodies = []string{
	`{"action":{"tool":"list_files","args":{}}}`,
	`{"action":{"tool":"list_files","args":{}},"task_id":"sql/top_customer"}`,
	`{"action":{},"task_id":null}`,
	`{"action":{},"task_id":7}`,
	`{"action":{},"task_id":"x","task_id":"y"}`,
	`{"act\u0069on":{},"t\u0061sk_id":"x"}`,
	`{"action":null}`,
	`[{"action":{}}]`,
	``,
	`{"action":{}} {}`,
}

// FuzzRewriteBodyStep: whatever body a client sends to HTTP /step, a
// body the workbench steps on resets it to the bound task first: no
// stateless step plays the default task.
func FuzzRewriteBodyStep(f *testing.F) {
	for _, b := range stepBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, other := rewriteBody(in, bound, false)
		if other {
			var obj map[string]json.RawMessage
			var task string
			if json.Unmarshal(in, &obj) != nil || json.Unmarshal(obj["task_id"], &task) != nil || task == "" || task == bound {
				t.Fatalf("%q refused as naming another task (task_id %q)", in, task)
			}
			return
		}
		if task, step := wouldStepOn(out); step && task != bound {
			t.Fatalf("%q -> %q: a step on task %q", in, out, task)
		}
	})
}
