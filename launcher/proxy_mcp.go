package launcher

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/agentpen/agentpen/workbench/bind"
)

// mcpRoute relays MCP's streamable HTTP: its headers (Content-Type,
// Accept, Mcp-Session-Id, Mcp-Protocol-Version, Last-Event-ID) to the
// workspace, the session id back, answers of JSON or an event stream,
// streamed. No MCP request picks a task but OpenEnv's
// openenv/session/create, whose task_id the proxy refuses when it names
// another task than the workspace's (the workbench, bound to its task,
// refuses it too).
var mcpRoute = relayRoute{
	path:           "/mcp",
	requestHeaders: []string{"Content-Type", "Accept", "Mcp-Session-Id", "Mcp-Protocol-Version", "Last-Event-Id"},
	replyHeaders:   []string{"Mcp-Session-Id"},
	events:         true,
	body: func(s *Server, w http.ResponseWriter, rt *route, b []byte) ([]byte, bool) {
		if createsOtherTask(b, rt.taskID) {
			s.metrics.proxyErrors.WithLabelValues(errKindBadRequest).Inc()
			w.Header().Set("Content-Type", "application/json")
			w.Write(encode(map[string]any{"jsonrpc": "2.0", "id": rpcID(b), "error": map[string]any{"code": -32602, "message": bind.ErrOtherTask.Error(), "data": nil}}))
			return nil, false
		}
		return b, true
	},
}

// serveMCP relays /mcp to the workspace: the standard protocol
// (streamable HTTP: POST, the event stream of a GET, DELETE) and
// OpenEnv's JSON-RPC POSTs as mcpRoute says, and OpenEnv's WebSocket
// /mcp as /ws is.
func (s *Server) serveMCP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		s.relayWS(w, r, "/mcp")
		return
	}
	s.relayHTTP(w, r, mcpRoute)
}

// createsOtherTask reports whether a POST body is OpenEnv's
// openenv/session/create with a task_id naming another task than taskID.
func createsOtherTask(body []byte, taskID string) bool {
	var req struct {
		Method string                     `json:"method"`
		Params map[string]json.RawMessage `json:"params"`
	}
	return json.Unmarshal(body, &req) == nil && req.Method == "openenv/session/create" && namesOther(req.Params, taskID)
}

// rpcID is a JSON-RPC request's id, for the refusal's answer.
func rpcID(body []byte) json.RawMessage {
	var req struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(body, &req) != nil || len(req.ID) == 0 {
		return json.RawMessage("null")
	}
	return req.ID
}
