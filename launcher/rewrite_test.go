package launcher

import (
	"encoding/json"
	"testing"
)

const bound = "software/median@7"

var rewriteCases = []struct {
	name, in string
	reset    bool // the workbench would reset on it
}{
	{"reset_other_task", `{"type":"reset","data":{"task_id":"sql/top_customer","seed":1}}`, true},
	{"reset_no_data", `{"type":"reset"}`, true},
	{"reset_empty_data", `{"type":"reset","data":{}}`, true},
	{"duplicate_type", `{"type":"state","type":"reset","data":{"task_id":"x"}}`, true},
	{"duplicate_task", `{"type":"reset","data":{"task_id":"x","task_id":"y"}}`, true},
	{"duplicate_data", `{"type":"reset","data":{"task_id":"x"},"data":{"task_id":"y"}}`, true},
	{"escaped_keys", `{"typ\u0065":"r\u0065set","d\u0061ta":{"t\u0061sk_id":"x"}}`, true},
	{"null_task", `{"type":"reset","data":{"task_id":null}}`, true},
	{"step", `{"type":"step","data":{"tool":"submit","args":{"answer":"1"}}}`, false},
	{"state", `{"type":"state"}`, false},
	{"data_null", `{"type":"reset","data":null}`, false},
	{"data_string", `{"type":"reset","data":"task"}`, false},
	{"not_json", `{"type":"reset",`, false},
	{"array", `[{"type":"reset"}]`, false},
	{"upper_type", `{"Type":"reset","data":{"task_id":"x"}}`, false},
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
			out := rewriteFrame([]byte(tt.in), bound)
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
// takes for a reset names the bound task, and one it does not is
// relayed unchanged.
func FuzzRewriteFrame(f *testing.F) {
	for _, tt := range rewriteCases {
		f.Add([]byte(tt.in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out := rewriteFrame(in, bound)
		task, reset := wouldReset(out)
		if reset && task != bound {
			t.Fatalf("%q -> %q: a reset of %v", in, out, task)
		}
		if _, wasReset := wouldReset(in); !wasReset && string(out) != string(in) {
			t.Fatalf("%q changed to %q", in, out)
		}
	})
}

func TestRewriteBody(t *testing.T) {
	for _, tt := range []struct {
		name, in, want string
		empty          bool
	}{
		{"reset", `{"task_id":"x","seed":2}`, `{"seed":2,"task_id":"software/median@7"}`, true},
		{"reset_empty", ` `, `{"task_id":"software/median@7"}`, true},
		{"step_empty", ``, ``, false},
		{"array", `[]`, `[]`, true},
		{"duplicate", `{"task_id":"x","task_id":"y"}`, `{"task_id":"software/median@7"}`, true},
		{"html_kept", `{"episode_id":"<a&b>"}`, `{"episode_id":"<a&b>","task_id":"software/median@7"}`, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(rewriteBody([]byte(tt.in), bound, tt.empty)); got != tt.want {
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
		out := rewriteBody(in, bound, false)
		if task, step := wouldStepOn(out); step && task != bound {
			t.Fatalf("%q -> %q: a step on task %q", in, out, task)
		}
	})
}
