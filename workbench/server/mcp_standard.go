package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/agentpen/agentpen/workbench/episode"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The standard MCP protocol (streamable HTTP, the official Go SDK) on
// /mcp: an initialize makes a session, and one session is one episode,
// its own environment from the factory (counted against MaxSessions with
// the WebSocket sessions), closed when the session ends (DELETE, idle
// for IdleTimeout, or shutdown). The sessions are those of MCP's
// initialize handshake (protocol versions up to 2025-11-25): a client of
// a newer, sessionless version falls back to the handshake (its
// server/discover is not an initialize, so OpenEnv's dialect answers it
// "method not found").

// handshakeVersions are the protocol versions served: those with the
// initialize handshake and Mcp-Session-Id.
var handshakeVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// sessionHeader is MCP's session header (streamable HTTP).
const sessionHeader = "Mcp-Session-Id"

// standardMCP serves the standard protocol.
type standardMCP struct {
	s *Server
	h *sdk.StreamableHTTPHandler
}

// newSession is what a request that may open a session carries to
// getServer through its context: the session's id and episode, and the
// SDK server made for it.
type newSession struct {
	id  string
	ep  *toolEpisode
	srv *sdk.Server
}

type newSessionKey struct{}

func (s *Server) newStandardMCP() *standardMCP {
	m := &standardMCP{s: s}
	m.h = sdk.NewStreamableHTTPHandler(m.server, &sdk.StreamableHTTPOptions{
		JSONResponse:        true,
		SessionTimeout:      s.cfg.IdleTimeout,
		MaxRequestBodyBytes: maxBodyBytes,
		Logger:              s.log,
	})
	return m
}

// server makes the SDK server of a new session: the tools, each calling
// the session's episode. A request that opens no session gets none (the
// SDK answers 400).
func (m *standardMCP) server(r *http.Request) *sdk.Server {
	ns, _ := r.Context().Value(newSessionKey{}).(*newSession)
	if ns == nil {
		return nil
	}
	if ns.srv != nil { // asked again for the same request
		return ns.srv
	}
	srv := sdk.NewServer(&sdk.Implementation{Name: "agentpen-workbench", Version: m.s.cfg.Version}, &sdk.ServerOptions{
		Instructions: "One session is one episode of this workspace's task. The first tool call starts it: " +
			"its result begins with the task. submit ends it; its result has the reward.",
		Logger:                    m.s.log,
		GetSessionID:              func() string { return ns.id },
		SupportedProtocolVersions: handshakeVersions,
		Capabilities:              &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{}},
	})
	for _, t := range m.s.cfg.Tools {
		name := t.Name
		srv.AddTool(&sdk.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema},
			func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return m.call(ctx, ns.ep, name, req.Params.Arguments)
			})
	}
	ns.srv = srv
	return srv
}

// call runs one tool call of a session's episode as an SDK result.
func (m *standardMCP) call(ctx context.Context, ep *toolEpisode, name string, args json.RawMessage) (*sdk.CallToolResult, error) {
	m.s.activity()
	tc, err := ep.call(ctx, name, args, episode.ResetOptions{})
	if err == errNotObject {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Invalid params: " + err.Error()}
	}
	if err != nil {
		if r, ok := refusedResult(err); ok {
			m.s.logRefusedBinding(err)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: r.Content[0].Text}}, StructuredContent: r.StructuredContent, IsError: true}, nil
		}
		m.s.log.Error("mcp tool call failed", "tool", name, "err", err)
		return nil, fmt.Errorf("the environment failed: %w", err)
	}
	return &sdk.CallToolResult{
		Content:           []sdk.Content{&sdk.TextContent{Text: tc.text()}},
		StructuredContent: tc.outcome(),
		IsError:           tc.obs.Error != "",
		Meta:              tc.meta(),
	}, nil
}

// serveHTTP serves one request of the standard protocol. One that opens
// a session (a POST without a session id: an initialize) takes a slot
// and builds the session's environment first; the session is tracked
// until it ends, then its environment is closed and its slot freed.
func (m *standardMCP) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.Header.Get(sessionHeader) != "" {
		m.h.ServeHTTP(w, r)
		return
	}
	s := m.s
	held, err := s.holdEnv("/mcp", true)
	if err != nil {
		writeRPCError(w, http.StatusServiceUnavailable, nil, err.(*rpcError))
		return
	}
	env := held.env
	ns := &newSession{id: newSessionID(), ep: &toolEpisode{env: env}}
	started := time.Now()
	end := func(reason string) {
		st := env.State()
		held.release()
		s.log.Info("mcp session end", "episode_id", st.EpisodeID, "steps", st.StepCount, "reason", reason,
			"duration", time.Since(started).Round(time.Millisecond))
	}
	m.h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), newSessionKey{}, ns)))
	var ss *sdk.ServerSession
	if ns.srv != nil {
		for x := range ns.srv.Sessions() {
			ss = x
		}
	}
	if ss == nil {
		end("no session was made")
		return
	}
	s.log.Info("mcp session start", "remote", r.RemoteAddr, "active", held.active)
	go func() {
		stop := context.AfterFunc(held.ctx, func() { ss.Close() })
		ss.Wait()
		reason := "closed"
		if !stop() {
			reason = reasonShutdown
		}
		end(reason)
	}()
}

func newSessionID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// isStandardMCP reports whether a /mcp request is the standard
// protocol's: a request of a session (its header), a GET or DELETE
// without a WebSocket upgrade, or an initialize.
func isStandardMCP(r *http.Request, body []byte) bool {
	if r.Header.Get(sessionHeader) != "" {
		return true
	}
	if r.Method != http.MethodPost {
		return !strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
	}
	var probe struct {
		Method string `json:"method"`
	}
	return json.Unmarshal(body, &probe) == nil && probe.Method == "initialize"
}
