package server

import (
	"context"
	"encoding/json"
	"io/fs"
	"net/http"
	"sync"
	"time"

	"github.com/agentpen/agentpen/internal/webui"
	"github.com/agentpen/agentpen/workbench/episode"
	"github.com/agentpen/agentpen/workbench/playpage"
	"github.com/coder/websocket"
)

// The play page: OpenEnv's web interface (docs/openenv-protocol.md §1:
// /web redirects to /web/, GET /web/metadata, POST /web/reset, POST
// /web/step, GET /web/state, WebSocket /ws/ui) on one shared environment
// (as OpenEnv's: whoever opens the page plays the same episode), with a
// page of plain HTML and JavaScript (package playpage, and the shared
// pieces of internal/webui) instead of OpenEnv's Gradio app.

// PlayPage returns the play page's own files (index.html, play.js).
func PlayPage() fs.FS { return playpage.Files() }

// webLogMax bounds the action log (OpenEnv's MAX_ACTION_LOGS); an
// episode has far fewer steps.
const webLogMax = 1000

// uiWriteTimeout bounds one push to a /ws/ui client; one that does not
// read is dropped.
const uiWriteTimeout = 2 * time.Second

// webPlay is the play page's shared environment and its episode state.
type webPlay struct {
	mu      sync.Mutex
	env     Env // nil until the first /web/reset
	started bool
	state   webState
	clients map[*websocket.Conn]bool // /ws/ui
}

// webState is OpenEnv's EpisodeState, plus the task (the reset's
// instruction, so a page opened later shows it), the reward and done.
type webState struct {
	EpisodeID          *string        `json:"episode_id"`
	StepCount          int            `json:"step_count"`
	CurrentObservation any            `json:"current_observation"`
	ActionLogs         []webActionLog `json:"action_logs"`
	IsReset            bool           `json:"is_reset"`
	Task               string         `json:"task"`
	Reward             pyFloat        `json:"reward"`
	Done               bool           `json:"done"`
}

// webActionLog is OpenEnv's ActionLog.
type webActionLog struct {
	Timestamp   string              `json:"timestamp"`
	Action      episode.Action      `json:"action"`
	Observation episode.Observation `json:"observation"`
	Reward      pyFloat             `json:"reward"`
	Done        bool                `json:"done"`
	StepCount   int                 `json:"step_count"`
}

func (s *Server) webRoutes(r interface {
	Get(string, http.HandlerFunc)
	Post(string, http.HandlerFunc)
	Handle(string, http.Handler)
}) {
	page := webui.Handler(PlayPage())
	r.Get("/web", func(w http.ResponseWriter, r *http.Request) {
		// Relative (http.Redirect would make it absolute), so it stays
		// under a launcher's base_url.
		w.Header().Set("Location", "web/")
		w.WriteHeader(http.StatusTemporaryRedirect)
	})
	r.Get("/web/metadata", s.handleWebMetadata)
	r.Get("/web/state", s.handleWebState)
	r.Post("/web/reset", s.handleWebReset)
	r.Post("/web/step", s.handleWebStep)
	r.Get("/ws/ui", s.handleWebUI)
	r.Handle("/web/*", page)
}

func (s *Server) handleWebMetadata(w http.ResponseWriter, _ *http.Request) {
	md := s.metadata()
	tools := make([]listedToolOpenEnv, 0, len(s.cfg.Tools))
	for _, t := range s.cfg.Tools {
		tools = append(tools, listedToolOpenEnv{t.Name, t.Description, t.InputSchema})
	}
	md["tools"] = tools
	writeJSON(w, http.StatusOK, md)
}

func (s *Server) handleWebState(w http.ResponseWriter, _ *http.Request) {
	p := &s.web
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.env == nil {
		writeJSON(w, http.StatusOK, stateOf(episode.State{}))
		return
	}
	writeJSON(w, http.StatusOK, stateOf(p.env.State()))
}

// webEnv returns the shared environment, building it at the first use:
// it takes a session slot and lives until shutdown. Called with p.mu held.
func (s *Server) webEnv() (Env, error) {
	p := &s.web
	if p.env != nil {
		return p.env, nil
	}
	held, err := s.holdEnv("/web", false)
	if err != nil {
		return nil, err
	}
	env := held.env
	p.env = env
	context.AfterFunc(held.ctx, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		held.release()
		p.env, p.started = nil, false
	})
	return env, nil
}

func (s *Server) handleWebReset(w http.ResponseWriter, r *http.Request) {
	opts, ok := readReset(w, r)
	if !ok {
		return
	}
	p := &s.web
	p.mu.Lock()
	defer p.mu.Unlock()
	env, err := s.webEnv()
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"detail": err.Error()})
		return
	}
	s.activity()
	obs, err := env.Reset(r.Context(), opts)
	if s.writeRefusedReset(w, err, opts.TaskID) {
		return
	}
	if err != nil {
		s.log.Error("reset failed", "route", "/web/reset", "err", err)
		writeInternalError(w)
		return
	}
	p.started = true
	st := env.State()
	p.state = webState{EpisodeID: stateOf(st).EpisodeID, CurrentObservation: obs, ActionLogs: []webActionLog{}, IsReset: true, Task: obs.Task}
	s.pushWebState()
	writeJSON(w, http.StatusOK, envelope(obs))
}

func (s *Server) handleWebStep(w http.ResponseWriter, r *http.Request) {
	raw, empty, handled := readBody(w, r)
	if handled {
		return
	}
	obj, ok := decodeObject(raw)
	if empty || !ok {
		writeValidation(w, []fieldError{bodyObjectError(raw)})
		return
	}
	if errs := stepRequest(obj); errs != nil {
		writeValidation(w, withLocPrefix(errs, "body"))
		return
	}
	action, errs := validateAction(obj.fields["action"])
	if errs != nil {
		writeValidation(w, withURLs(errs))
		return
	}
	p := &s.web
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.env == nil || !p.started {
		// The page shows the task a reset returns: a step first would
		// start an episode whose task nobody saw.
		writeJSON(w, http.StatusConflict, map[string]string{"detail": "no episode is running: reset first"})
		return
	}
	s.activity()
	obs, err := p.env.Step(r.Context(), action)
	if err != nil {
		s.log.Error("step failed", "route", "/web/step", "err", err)
		writeInternalError(w)
		return
	}
	st := p.env.State()
	p.state.StepCount = st.StepCount
	p.state.CurrentObservation = obs
	p.state.IsReset = false
	p.state.Reward, p.state.Done = pyFloat(obs.Reward), obs.Done
	p.state.ActionLogs = append(p.state.ActionLogs, webActionLog{
		Timestamp: time.Now().UTC().Format(time.RFC3339Nano), Action: action, Observation: obs,
		Reward: pyFloat(obs.Reward), Done: obs.Done, StepCount: st.StepCount,
	})
	if n := len(p.state.ActionLogs); n > webLogMax {
		p.state.ActionLogs = p.state.ActionLogs[n-webLogMax:]
	}
	s.pushWebState()
	writeJSON(w, http.StatusOK, envelope(obs))
}

// uiUpdate is what /ws/ui pushes.
func (s *Server) uiUpdate() map[string]any {
	st := s.web.state
	if st.ActionLogs == nil {
		st.ActionLogs = []webActionLog{}
	}
	return map[string]any{"type": "state_update", "episode_state": st}
}

// pushWebState sends the state to every /ws/ui client (p.mu held); a
// client that does not take it within uiWriteTimeout is dropped.
func (s *Server) pushWebState() {
	p := &s.web
	for c := range p.clients {
		if err := writeUI(c, s.uiUpdate()); err != nil {
			c.Close(websocket.StatusPolicyViolation, "too slow")
			delete(p.clients, c)
		}
	}
}

func writeUI(c *websocket.Conn, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), uiWriteTimeout)
	defer cancel()
	return c.Write(ctx, websocket.MessageText, b)
}

// handleWebUI serves /ws/ui: the episode state now and after every reset
// and step; what the client sends is read and ignored (keepalive).
func (s *Server) handleWebUI(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	c.SetReadLimit(4 << 10)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	done, err := s.track(cancel)
	if err != nil {
		c.Close(websocket.StatusGoingAway, reasonShutdown)
		return
	}
	defer done()
	p := &s.web
	p.mu.Lock()
	if p.clients == nil {
		p.clients = map[*websocket.Conn]bool{}
	}
	p.clients[c] = true
	err = writeUI(c, s.uiUpdate())
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.clients, c)
		p.mu.Unlock()
	}()
	if err != nil {
		return
	}
	for {
		if _, _, err := c.Read(ctx); err != nil {
			if ctx.Err() != nil {
				c.Close(websocket.StatusGoingAway, reasonShutdown)
			}
			return
		}
	}
}
