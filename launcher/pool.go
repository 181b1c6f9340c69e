package launcher

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/api"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/workbench/tasks"
	"github.com/danielgtaylor/huma/v2"
)

// claimInput is a claim of a pooled workspace.
type claimInput struct {
	ID   string `path:"id" doc:"Campaign id"`
	Body struct {
		TaskID    string `json:"task_id" pattern:"^[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,127}$" doc:"The task to bind the workspace to (workbench tasks lists the catalogue)"`
		AttemptID string `json:"attempt_id,omitempty" pattern:"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$" doc:"Distinguishes two claims of the same task (a task and attempt is claimed once)"`
	}
}

type claimOutput struct {
	Body api.ClaimView
}

func (s *Server) registerPool(hapi huma.API, errs []int) {
	huma.Register(hapi, huma.Operation{
		OperationID: "claimWorkspace", Method: http.MethodPost, Path: "/v1/campaigns/{id}/workspaces", Tags: []string{"campaigns"},
		Summary: "Bind a task to a workspace of the campaign's pool and return its base_url",
		Description: "The campaign's spec must ask for a pool (pool > 0) and the campaign be ready. A ready, attested, " +
			"never-used workspace is bound to task_id (its bind file, then a claim record in the journal) and served at " +
			"once (pool: warm); when the pool is drained one is made, awaited and attested for the claim (pool: cold). " +
			"The pool refills in the background. A workspace is claimed once and never handed out again; it goes with " +
			"its campaign. A claim racing a DELETE or an expiry ends in one answer: it was bound before the removal " +
			"began (and went with the campaign), or it is a 409 and nothing was bound. A task and attempt already " +
			"claimed is a 409.",
		DefaultStatus: http.StatusCreated, Errors: errs,
	}, s.claimWorkspace)
}

func (s *Server) claimWorkspace(ctx context.Context, in *claimInput) (*claimOutput, error) {
	if err := campaign.CheckID("id", in.ID); err != nil {
		return nil, pathProblem(err)
	}
	if err := tasks.Known(in.Body.TaskID); err != nil {
		return nil, problem(http.StatusBadRequest, "unknown task", &huma.ErrorDetail{Message: err.Error(), Location: "body.task_id", Value: in.Body.TaskID})
	}
	id := in.ID
	ctx, e, snap, release, err := s.operateShared(ctx, id, "claim")
	if err != nil {
		return nil, err
	}
	defer release()
	if snap.status() != campaign.StatusReady {
		return nil, problem(http.StatusConflict, fmt.Sprintf("campaign %q is %s: only a ready campaign hands out workspaces; nothing was claimed", id, snap.status()))
	}
	c, err := s.root.Open(id)
	if err != nil {
		return nil, campaignProblem(id, "claim", err)
	}
	defer c.Close()
	start := time.Now()
	cl, err := s.be.Claim(ctx, c, in.Body.TaskID, in.Body.AttemptID, s.cfg.Attest)
	s.kickRefill(id)
	if err != nil {
		s.logOp(ctx, "claim", id, "refused", start, err)
		var ve *campaign.ValidationError
		switch {
		case errors.As(err, &ve):
			return nil, problem(http.StatusBadRequest, err.Error())
		case errors.Is(err, adapter.ErrNotUp), errors.Is(err, adapter.ErrNoPool), errors.Is(err, adapter.ErrConflict):
			return nil, problem(http.StatusConflict, err.Error()+"; nothing was claimed")
		}
		return nil, operationProblem("claim", err)
	}
	ws := cl.Workspace.Workspace
	s.mu.Lock()
	if e.camp != nil {
		capab := capability(s.cfg.Key, e.camp.Plan.CampaignID, e.camp.Plan.Instance, ws.AgentID)
		rt := newRoute(e.camp.Plan.CampaignID, ws.AgentID, ws.TaskID, s.dialer(cl.Workspace), capab)
		s.routes[capKey(capab)] = rt
		e.routes = append(e.routes, rt)
		e.camp.Workspaces = append(e.camp.Workspaces, cl.Workspace)
		ws.BaseURL = s.cfg.PublicURL + episodePrefix + "/" + capab
		s.gaugesLocked()
	}
	s.mu.Unlock()
	if ws.BaseURL == "" {
		// Not served by this service yet: load it (the claim is in the
		// journal), then describe the workspace as the view does.
		v, err := s.view(id)
		if err != nil {
			return nil, campaignProblem(id, "claim", err)
		}
		for _, w := range v.Workspaces {
			if w.AgentID == ws.AgentID {
				ws.BaseURL = w.BaseURL
			}
		}
	}
	ws.Socket = ""
	how := "cold"
	if cl.Warm {
		how = "warm"
	}
	s.logOp(ctx, "claim", id, how, start, nil)
	return &claimOutput{Body: api.ClaimView{CampaignID: id, Workspace: ws, Pool: how, Slot: cl.Slot, ClaimedAt: cl.At.UTC()}}, nil
}

// kickRefill refills the campaign's pool in the background, once at a
// time per campaign, until it is whole, the campaign is not ready, or a
// refill fails (the next claim tries again).
func (s *Server) kickRefill(id string) {
	sctx, done, err := s.startOp()
	if err != nil {
		return
	}
	s.mu.Lock()
	e := s.entryLocked(id)
	if e.refilling {
		s.mu.Unlock()
		done()
		return
	}
	e.refilling = true
	s.mu.Unlock()
	go func() {
		defer done()
		defer func() {
			s.mu.Lock()
			e.refilling = false
			s.mu.Unlock()
		}()
		for sctx.Err() == nil {
			c, err := s.root.Open(id)
			if err != nil {
				return
			}
			start := time.Now()
			n, err := s.be.Refill(sctx, c, s.cfg.Attest)
			c.Close()
			if err != nil {
				s.logOp(context.Background(), "refill", id, "failed", start, err)
				s.view(id) // a refill that did not attest fails the campaign closed
				return
			}
			if n == 0 {
				return
			}
			s.logOp(context.Background(), "refill", id, fmt.Sprintf("%d made", n), start, nil)
		}
	}()
}
