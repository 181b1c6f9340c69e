package launcher

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/store"
	"github.com/danielgtaylor/huma/v2"
)

// collectLoop collects the results of every campaign that is up, every
// interval, until Close.
func (s *Server) collectLoop(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	failing := map[string]string{} // campaign id -> the last error logged
	for {
		select {
		case <-s.closing:
			return
		case <-t.C:
		}
		list, err := s.root.List()
		if err != nil {
			continue
		}
		for _, l := range list {
			if l.Err != nil || !l.State.Status.Up() {
				delete(failing, l.ID)
				continue
			}
			if err := s.collect(l.ID); err != nil {
				if failing[l.ID] != err.Error() {
					s.log.Warn("results: not collected", "campaign", l.ID, "err", err)
				}
				failing[l.ID] = err.Error()
				continue
			}
			delete(failing, l.ID)
		}
	}
}

// collect collects one campaign's new results and counts them.
func (s *Server) collect(id string) error {
	c, err := s.root.Open(id)
	if err != nil {
		return err
	}
	defer c.Close()
	got, err := s.be.CollectResults(c)
	s.metrics.collected(got)
	return err
}

type episodesInput struct {
	ID        string `path:"id" doc:"Campaign id"`
	Workspace int    `query:"workspace" default:"-1" minimum:"-1" doc:"Only this workspace's episodes (its index in the spec); -1 for all"`
	After     int    `query:"after" default:"0" minimum:"0" doc:"Skip this many results of the campaign's (the next field of the previous page)"`
	Limit     int    `query:"limit" default:"100" minimum:"1" maximum:"1000" doc:"At most this many results"`
}

type episodesOutput struct {
	Body struct {
		CampaignID string         `json:"campaign_id"`
		Episodes   []store.Result `json:"episodes" doc:"Episode results, oldest first"`
		Next       int            `json:"next" doc:"The after of the next page; 0 when this page is the last"`
	}
}

func (s *Server) registerEpisodes(hapi huma.API, errs []int) {
	huma.Register(hapi, huma.Operation{
		OperationID: "listEpisodes", Method: http.MethodGet, Path: "/v1/campaigns/{id}/episodes", Tags: []string{"campaigns"},
		Summary: "The campaign's episode results: reward, its parts, steps, how each ended",
		Description: "One result per episode a workspace's workbench ended (graded, voided by a grading error, out of steps, " +
			"finished, replaced by a reset, closed), through a base_url or a CLI socket, collected into the campaign's state about once a " +
			"second and before any removal: they outlive the campaign (a removed campaign still answers). Paged: " +
			"pass next as after until it is 0. Provenance: each result is what the workspace's workbench reported, a " +
			"line of a file in its run directory, which the daemon's user (what a container escape yields) can write: " +
			"checked (its workspace's own task, every field present and in range, no other), never proven; workspace, " +
			"agent_id and generation say where it was read, collected_at when. An episode whose grading failed ends " +
			"error, with a reason (grader_failed, case_prepare_failed, case_run_failed or grading_failed) and no reward. " +
			"runs counts the runs of its code (the agent's, its tests', the graded cases of its answer) by why each stopped " +
			"(exited, timeout, output_limit, signal, cancelled, internal_error; memory and processes only inferred from the " +
			"run's error output, as the limits send no signal), and stop says why the last that did not exit 0 stopped; " +
			"both are absent when they would say nothing.",
		Errors: errs,
	}, s.listEpisodes)
}

func (s *Server) listEpisodes(ctx context.Context, in *episodesInput) (*episodesOutput, error) {
	if err := campaign.CheckID("id", in.ID); err != nil {
		return nil, pathProblem(err)
	}
	c, err := s.root.Open(in.ID)
	if err != nil {
		return nil, campaignProblem(in.ID, "read", err)
	}
	defer c.Close()
	if st, err := c.Read(); err == nil && st.Status.Up() {
		// What ended since the last collection is in this answer too.
		got, err := s.be.CollectResults(c)
		s.metrics.collected(got)
		if err != nil {
			s.log.Warn("results: not collected", "campaign", in.ID, "err", err)
		}
	}
	rs, err := c.Results()
	if err != nil {
		return nil, operationProblem("read the results", fmt.Errorf("campaign %q: %w", in.ID, err))
	}
	out := &episodesOutput{}
	out.Body.CampaignID, out.Body.Episodes = in.ID, []store.Result{}
	for i := in.After; i < len(rs); i++ {
		if in.Workspace >= 0 && rs[i].Workspace != in.Workspace {
			continue
		}
		if len(out.Body.Episodes) == in.Limit {
			out.Body.Next = i
			break
		}
		out.Body.Episodes = append(out.Body.Episodes, rs[i])
	}
	return out, nil
}
