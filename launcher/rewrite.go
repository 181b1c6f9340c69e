package launcher

import (
	"bytes"
	"encoding/json"
)

// The task binding, the proxy's wall (the workbench is bound too, by its
// bind file: package workbench/bind). A workspace serves the task its
// spec names: a reset or HTTP /step naming another task (task_id a
// non-empty string other than the bound one) is refused by the proxy and
// never relayed, and every other reset (the WebSocket reset frame's data,
// the HTTP /reset body) and every HTTP /step body (a stateless step
// builds a fresh environment, which the workbench resets to that task
// first) gets task_id set to the bound task. Frames and bodies are decoded the
// way the workbench decodes them (encoding/json; a repeated key keeps its
// last value), so what the proxy takes for a reset is what the workbench
// takes for one; what the workbench would refuse without resetting (not
// JSON, not an object, data not an object) is relayed unchanged for it to
// refuse.

// frameType is a client frame's "type" as the workbench decodes it ("" for
// a frame that is not a JSON object with a string type).
func frameType(msg []byte) string {
	_, typ := decodeFrame(msg)
	return typ
}

func decodeFrame(msg []byte) (map[string]json.RawMessage, string) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(msg, &obj) != nil || obj == nil {
		return nil, ""
	}
	var typ string
	if raw, ok := obj["type"]; !ok || json.Unmarshal(raw, &typ) != nil {
		return nil, ""
	}
	return obj, typ
}

// rewriteFrame returns a client frame with a reset's task_id set to
// taskID, re-encoded, or other true (and msg) for a reset naming another
// task; any other frame is returned as it is.
func rewriteFrame(msg []byte, taskID string) (out []byte, other bool) {
	obj, typ := decodeFrame(msg)
	if typ != "reset" {
		return msg, false
	}
	data := map[string]json.RawMessage{}
	if raw, ok := obj["data"]; ok {
		if json.Unmarshal(raw, &data) != nil || data == nil {
			return msg, false // not an object: refused by the workbench, no reset
		}
	}
	if namesOther(data, taskID) {
		return msg, true
	}
	data["task_id"] = encode(taskID)
	obj["data"] = encode(data)
	return encode(obj), false
}

// rewriteBody returns an HTTP /reset or /step body with task_id set to
// taskID, or other true (and body) for one naming another task. An empty
// body is an empty object for /reset (emptyIsObject) and is left alone
// for /step, which needs one.
func rewriteBody(body []byte, taskID string, emptyIsObject bool) (out []byte, other bool) {
	if len(bytes.TrimSpace(body)) == 0 {
		if !emptyIsObject {
			return body, false
		}
		body = []byte("{}")
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) != nil || obj == nil {
		return body, false
	}
	if namesOther(obj, taskID) {
		return body, true
	}
	obj["task_id"] = encode(taskID)
	return encode(obj), false
}

// namesOther reports whether a reset's arguments name a task other than
// taskID: task_id a non-empty string that is not taskID. A task_id of
// another type, or null or "", is replaced by taskID.
func namesOther(args map[string]json.RawMessage, taskID string) bool {
	var asked string
	raw, ok := args["task_id"]
	return ok && json.Unmarshal(raw, &asked) == nil && asked != "" && asked != taskID
}

// encode marshals v without HTML escaping; v is always JSON-able here.
func encode(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// listsTools reports whether a step frame is OpenEnv's list_tools action
// ({"type":"step","data":{"type":"list_tools"}}), which the workbench
// answers without an episode.
func listsTools(msg []byte) bool {
	obj, _ := decodeFrame(msg)
	var data struct {
		Type string `json:"type"`
	}
	return obj != nil && json.Unmarshal(obj["data"], &data) == nil && data.Type == "list_tools"
}
