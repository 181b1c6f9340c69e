package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/agentpen/agentpen/workbench/bind"
	"github.com/agentpen/agentpen/workbench/episode"
)

// The workbench's tools over MCP. Both dialects served on /mcp (the
// standard protocol, mcp_standard.go, and OpenEnv's, mcp_openenv.go),
// OpenEnv's call_tool actions through step and {"type":"mcp"} frames on
// /ws call the tools of one environment through a toolEpisode: the
// episode starts at its first call (a reset of the bound task, or of the
// default one on an unbound server) unless a reset already started it,
// and the reset's observation (the task) leads that call's result. A
// call is an episode step like any other: the same limits, refusals and
// reward.

// errNotObject is a tool call whose arguments are not a JSON object.
var errNotObject = errors.New("arguments must be a JSON object")

// toolEpisode is one environment played through tool calls.
type toolEpisode struct {
	env Env

	mu      sync.Mutex
	started bool
}

// markStarted records that a reset (or a step) started the episode
// outside the tool calls.
func (te *toolEpisode) markStarted() {
	te.mu.Lock()
	te.started = true
	te.mu.Unlock()
}

// toolCall is what one call did: the reset that started the episode, if
// this call started it, and the step's observation.
type toolCall struct {
	name  string
	first *episode.Observation
	obs   episode.Observation
}

// call runs the tool name with the raw arguments (a JSON object, or
// empty or null for none); opts are the kwargs of the reset that starts
// the episode when none has. The error is the environment's own (a
// reset refused by the binding, a broken environment) or errNotObject;
// a refused call is an observation with Error set, as through step.
func (te *toolEpisode) call(ctx context.Context, name string, raw json.RawMessage, opts episode.ResetOptions) (toolCall, error) {
	args := map[string]json.RawMessage{}
	if t := bytes.TrimSpace(raw); len(t) > 0 && !bytes.Equal(t, nullJSON) {
		if jsonKind(t) != 'o' || json.Unmarshal(t, &args) != nil {
			return toolCall{}, errNotObject
		}
	}
	te.mu.Lock()
	defer te.mu.Unlock()
	tc := toolCall{name: name}
	if !te.started {
		first, err := te.env.Reset(ctx, opts)
		if err != nil {
			return toolCall{}, err
		}
		te.started = true
		tc.first = &first
	}
	obs, err := te.env.Step(ctx, episode.Action{Tool: name, Args: args})
	if err != nil {
		return toolCall{}, err
	}
	tc.obs = obs
	return tc, nil
}

// toolOutcome is a tool call's structured result: what the observation
// says, and the task when the call started the episode. The task id and
// the grading details are not in it (they are the trainer's: toolMeta).
type toolOutcome struct {
	Task      string  `json:"task,omitempty"`
	Output    string  `json:"output"`
	Error     string  `json:"error"`
	StepsLeft int     `json:"steps_left"`
	Done      bool    `json:"done"`
	Reward    pyFloat `json:"reward"`
}

func (tc toolCall) outcome() toolOutcome {
	o := toolOutcome{Output: tc.obs.Output, Error: tc.obs.Error, StepsLeft: tc.obs.StepsLeft, Done: tc.obs.Done, Reward: pyFloat(tc.obs.Reward)}
	if tc.first != nil {
		o.Task = tc.first.Task
	}
	return o
}

// text is the result as the model reads it: the task and the files when
// the call started the episode, the output, the refusal, and the calls
// left or the reward.
func (tc toolCall) text() string {
	var parts []string
	if tc.first != nil {
		parts = append(parts, "Task:\n"+tc.first.Task, tc.first.Output)
	}
	if tc.obs.Output != "" {
		parts = append(parts, tc.obs.Output)
	}
	if tc.obs.Error != "" {
		parts = append(parts, "Refused: "+tc.obs.Error)
	}
	if tc.obs.Done {
		r, _ := pyFloat(tc.obs.Reward).MarshalJSON()
		parts = append(parts, "The episode is over. Reward: "+string(r)+".")
	} else {
		parts = append(parts, fmt.Sprintf("Tool calls left: %d.", tc.obs.StepsLeft))
	}
	return strings.Join(parts, "\n\n")
}

// metaKey is where a tool result's _meta carries the observation's
// metadata (task_id, domain, correctness): the trainer's, as the
// top-level metadata of an OpenEnv observation is.
const metaKey = "io.agentpen/metadata"

func (tc toolCall) meta() map[string]any {
	md := tc.obs.Metadata
	if md == nil {
		md = map[string]any{}
	}
	return map[string]any{metaKey: md}
}

// toolResult is a tool call's result in OpenEnv's dialect: MCP's
// CallToolResult (content, structuredContent, isError) with OpenEnv's
// data (what MCPToolClient.call_tool returns), both the outcome.
type toolResult struct {
	Content           []textContent  `json:"content"`
	StructuredContent toolOutcome    `json:"structuredContent"`
	IsError           bool           `json:"isError"`
	Data              toolOutcome    `json:"data"`
	Meta              map[string]any `json:"_meta"`
}

type textContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func (tc toolCall) result() toolResult {
	o := tc.outcome()
	return toolResult{Content: []textContent{{"text", tc.text()}}, StructuredContent: o, IsError: o.Error != "", Data: o, Meta: tc.meta()}
}

// refusedResult is the result of a call whose episode could not start
// for its task (the binding refused it, or the workspace is unbound):
// a tool error the model can read, never the file's path.
func refusedResult(err error) (toolResult, bool) {
	msg, ok := bindingMessage(err)
	if !ok {
		return toolResult{}, false
	}
	return toolResult{Content: []textContent{{"text", "Refused: " + msg}}, StructuredContent: toolOutcome{Error: msg}, IsError: true, Data: toolOutcome{Error: msg}, Meta: map[string]any{}}, true
}

// bindingMessage is what a client is told of a reset the binding
// refused.
func bindingMessage(err error) (string, bool) {
	switch {
	case errors.Is(err, bind.ErrOtherTask):
		return bind.ErrOtherTask.Error(), true
	case errors.Is(err, bind.ErrUnbound), errors.Is(err, bind.ErrBadFile):
		return unboundMessage(err), true
	}
	return "", false
}

// listedTool is a tools/list entry: MCP's inputSchema, and OpenEnv's
// input_schema for its step action's observation.
type listedTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

type listedToolOpenEnv struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

func (s *Server) listedTools() []listedTool {
	out := make([]listedTool, 0, len(s.cfg.Tools))
	for _, t := range s.cfg.Tools {
		out = append(out, listedTool{t.Name, t.Description, t.InputSchema})
	}
	return out
}

// mcpObservation answers one of OpenEnv's MCP actions through step as
// its observation envelope: list_tools (no episode needed, nothing
// started) lists the tools; call_tool calls one on te, starting the
// episode with opts when none has.
func (s *Server) mcpObservation(ctx context.Context, te *toolEpisode, a mcpAction, opts episode.ResetOptions) (map[string]any, toolCall, error) {
	if a.kind == "list_tools" {
		tools := make([]listedToolOpenEnv, 0, len(s.cfg.Tools))
		for _, t := range s.cfg.Tools {
			tools = append(tools, listedToolOpenEnv{t.Name, t.Description, t.InputSchema})
		}
		return map[string]any{"observation": map[string]any{"tools": tools}, "reward": nil, "done": false, "metadata": map[string]any{}}, toolCall{}, nil
	}
	tc, err := te.call(ctx, a.tool, a.args, opts)
	if err != nil {
		return nil, tc, err
	}
	md := tc.obs.Metadata
	if md == nil {
		md = map[string]any{}
	}
	return map[string]any{
		"observation": map[string]any{"tool_name": a.tool, "result": tc.result(), "error": nil},
		"reward":      pyFloat(tc.obs.Reward),
		"done":        tc.obs.Done,
		"metadata":    md,
	}, tc, nil
}

// oneEpisode tells env, when it can be told (episode.Environment's
// OneEpisode), that it plays one episode at most (a stateless call's, an
// MCP session's): it makes no next one ahead when that ends.
func oneEpisode(env Env) {
	if o, ok := env.(interface{ OneEpisode() }); ok {
		o.OneEpisode()
	}
}

// oneCall tells env, when it can be told (episode.Environment's OneCall),
// that it answers one call at most (a stateless call's).
func oneCall(env Env) {
	if o, ok := env.(interface{ OneCall() }); ok {
		o.OneCall()
	}
}

// heldEnv is an environment held beyond one request (an MCP session,
// the play page's): a session slot, tracked so Shutdown cancels ctx.
type heldEnv struct {
	env    Env
	ctx    context.Context // done at shutdown
	active int             // the slots in use, this one included
	// release closes the environment, frees the slot and untracks it;
	// later calls do nothing.
	release func()
}

// holdEnv takes a session slot and builds an environment (of one
// episode: oneEpisode). Its error is an *rpcError: shutting down, the
// capacity refusal, or the factory's failure (logged).
func (s *Server) holdEnv(route string, one bool) (*heldEnv, error) {
	ctx, cancel := context.WithCancel(context.Background())
	done, err := s.track(cancel)
	if err != nil {
		cancel()
		return nil, &rpcError{Code: codeServerError, Message: "the server is shutting down"}
	}
	release, active, ok := s.reserve()
	if !ok {
		cancel()
		done()
		s.log.Info("session refused: at capacity", "route", route, "active", active, "max", s.cfg.MaxSessions)
		return nil, capacityError(active, s.cfg.MaxSessions)
	}
	env, err := s.cfg.Factory()
	if err != nil {
		release()
		cancel()
		done()
		s.log.Error("session refused: environment factory failed", "route", route, "err", err)
		return nil, factoryError(s.cfg.FactoryName)
	}
	if one {
		oneEpisode(env)
	}
	var once sync.Once
	return &heldEnv{env: env, ctx: ctx, active: active, release: func() {
		once.Do(func() {
			if err := env.Close(); err != nil {
				s.log.Error("close environment", "route", route, "err", err)
			}
			release()
			cancel()
			done()
		})
	}}, nil
}
