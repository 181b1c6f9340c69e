package launcher

import (
	"bytes"
	"encoding/json"
)

// The task binding. A workspace serves the task its spec names, whatever
// the client asks for: the proxy sets task_id in every reset (the
// WebSocket reset frame's data, the HTTP /reset body) and in every HTTP
// /step body (a stateless step builds a fresh environment, which the
// workbench resets to that task first). Frames and bodies are decoded the
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
// taskID, re-encoded; any other frame is returned as it is.
func rewriteFrame(msg []byte, taskID string) []byte {
	obj, typ := decodeFrame(msg)
	if typ != "reset" {
		return msg
	}
	data := map[string]json.RawMessage{}
	if raw, ok := obj["data"]; ok {
		if json.Unmarshal(raw, &data) != nil || data == nil {
			return msg // not an object: refused by the workbench, no reset
		}
	}
	data["task_id"] = encode(taskID)
	obj["data"] = encode(data)
	return encode(obj)
}

// rewriteBody returns an HTTP /reset or /step body with task_id set to
// taskID. An empty body is an empty object for /reset (emptyIsObject)
// and is left alone for /step, which needs one.
func rewriteBody(body []byte, taskID string, emptyIsObject bool) []byte {
	if len(bytes.TrimSpace(body)) == 0 {
		if !emptyIsObject {
			return body
		}
		body = []byte("{}")
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) != nil || obj == nil {
		return body
	}
	obj["task_id"] = encode(taskID)
	return encode(obj)
}

// encode marshals v without HTML escaping; v is always JSON-able here.
func encode(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
