package launcher

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/agentpen/agentpen/workbench/bind"
)

// mcpHeaders are the request headers of MCP's streamable HTTP relayed
// to the workspace; mcpReplyHeaders those relayed back.
var (
	mcpHeaders      = []string{"Content-Type", "Accept", "Mcp-Session-Id", "Mcp-Protocol-Version", "Last-Event-Id"}
	mcpReplyHeaders = []string{"Content-Type", "Mcp-Session-Id", "Cache-Control"}
)

// serveMCP relays /mcp to the workspace: the standard protocol
// (streamable HTTP: POST, the event stream of a GET, DELETE), OpenEnv's
// JSON-RPC POSTs, and OpenEnv's WebSocket /mcp (relayed as /ws is).
// Bodies pass unchanged and answers stream back as they come (an event
// stream is flushed event by event). No MCP request picks a task but
// OpenEnv's openenv/session/create, whose task_id the proxy refuses when
// it names another task than the workspace's (the workbench, bound to
// its task, refuses it too).
func (s *Server) serveMCP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		s.relayWS(w, r, "/mcp")
		return
	}
	rt, done := s.proxyRoute(w, r)
	if rt == nil {
		return
	}
	defer done()
	ctx, cancel := withRoute(r.Context(), rt)
	defer cancel()
	var body []byte
	if r.Method == http.MethodPost {
		b, ok := s.readBody(w, r)
		if !ok {
			return
		}
		if createsOtherTask(b, rt.taskID) {
			s.metrics.proxyErrors.WithLabelValues(errKindBadRequest).Inc()
			w.Header().Set("Content-Type", "application/json")
			w.Write(encode(map[string]any{"jsonrpc": "2.0", "id": rpcID(b), "error": map[string]any{"code": -32602, "message": bind.ErrOtherTask.Error(), "data": nil}}))
			return
		}
		body = b
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, "http://workbench/mcp", bytes.NewReader(body))
	if err != nil {
		writeProblem(w, http.StatusInternalServerError, "the request could not be built")
		return
	}
	copyHeaders(req.Header, r.Header, mcpHeaders)
	resp, err := rt.client.Do(req)
	if err != nil {
		s.unavailable(w, ctx, rt, err)
		return
	}
	defer resp.Body.Close()
	copyHeaders(w.Header(), resp.Header, mcpReplyHeaders)
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	rc.Flush()
	src := io.Reader(resp.Body)
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		src = io.LimitReader(resp.Body, maxObservationBytes)
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			rc.Flush()
		}
		if err != nil {
			if err != io.EOF {
				s.metrics.proxyErrors.WithLabelValues(errKindBackendLost).Inc()
			}
			return
		}
	}
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
