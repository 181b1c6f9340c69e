package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/cleanup"
	"github.com/danielgtaylor/huma/v2"
)

// CampaignView is a campaign as the API shows it: ids, state, its
// workspaces and where its reports are. It deliberately leaves out the
// Docker topology (networks, container ids): launchers reach workspaces
// through base_url only.
type CampaignView struct {
	CampaignID string `json:"campaign_id" doc:"The campaign's id, as in the spec"`
	Generation int    `json:"generation" doc:"Which bring-up of this campaign id this is (1 for the first)"`
	State      string `json:"state" enum:"creating,ready,deleting,cleanup_failed" doc:"creating, ready (workspaces reachable), deleting, cleanup_failed (DELETE again to retry)"`
	StateDir   string `json:"state_dir" doc:"The campaign's state directory on the service's host (journal, spec, reports)"`
	// Workspaces are in the spec's order.
	Workspaces  []WorkspaceView `json:"workspaces"`
	Attestation *ReportRef      `json:"attestation,omitempty" doc:"The attestation made at create (GET .../attestation for the report)"`
	Cleanup     *ReportRef      `json:"cleanup,omitempty" doc:"The last cleanup, when one failed"`
}

// WorkspaceView is one workspace: its opaque agent id, its task (for the
// trainer: never show it to the agent) and the base_url an OpenEnv client
// uses as it is.
type WorkspaceView struct {
	Index   int    `json:"index" doc:"Position in the spec's workspaces"`
	AgentID string `json:"agent_id" doc:"Opaque agent id: the only name the workspace has on the daemon"`
	TaskID  string `json:"task_id" doc:"The task the workspace is bound to (every reset serves it). For the trainer, not the agent"`
	BaseURL string `json:"base_url" doc:"OpenEnv base_url: GenericEnvClient(base_url=...) appends /ws. Its last segment is the workspace's capability: keep it secret"`
}

// ReportRef says where a report is and what it concluded.
type ReportRef struct {
	OK     bool   `json:"ok"`
	Status string `json:"status,omitempty" doc:"The cleanup's status (verified or failed)"`
	Path   string `json:"path" doc:"The report's file on the service's host"`
}

type campaignIDParam struct {
	ID string `path:"id" doc:"Campaign id" maxLength:"128"`
}

type createInput struct {
	RawBody []byte `contentType:"application/json"`
}

type campaignOutput struct {
	Location string `header:"Location"`
	Body     CampaignView
}

type listOutput struct {
	Body struct {
		Campaigns []CampaignView `json:"campaigns"`
	}
}

type workspacesOutput struct {
	Body struct {
		CampaignID string          `json:"campaign_id"`
		Workspaces []WorkspaceView `json:"workspaces"`
	}
}

type attestOutput struct {
	Body *attest.Report
}

type cleanupOutput struct {
	Body *cleanup.Report
}

// registerOperations registers the /v1 operations with Huma.
func (s *Server) registerOperations(api huma.API) {
	tags := []string{"campaigns"}
	bad := []int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusConflict, http.StatusInternalServerError, http.StatusServiceUnavailable}
	one := []int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusNotFound, http.StatusConflict, http.StatusInternalServerError, http.StatusServiceUnavailable}

	huma.Register(api, huma.Operation{
		OperationID: "createCampaign", Method: http.MethodPost, Path: "/v1/campaigns", Tags: tags,
		Summary: "Create a campaign and attest it",
		Description: "The body is the spec agentpen up takes, validated the same way (every unknown field, then the values; " +
			"each workspace's task_id must be in the workbench catalogue). The campaign is brought up, attested, and " +
			"only then returned (201); one that does not attest is removed by exact id (500). A client that goes away " +
			"cancels the bring-up, which rolls back by exact id.",
		DefaultStatus: http.StatusCreated, Errors: bad, SkipValidateBody: true, MaxBodyBytes: campaign.MaxSpecBytes + 1,
		BodyReadTimeout: 30 * time.Second,
	}, s.createCampaign)
	huma.Register(api, huma.Operation{
		OperationID: "listCampaigns", Method: http.MethodGet, Path: "/v1/campaigns", Tags: tags,
		Summary: "List the campaigns the service holds", Errors: []int{http.StatusUnauthorized},
	}, s.listCampaigns)
	huma.Register(api, huma.Operation{
		OperationID: "getCampaign", Method: http.MethodGet, Path: "/v1/campaigns/{id}", Tags: tags,
		Summary: "Get a campaign (one that is up in the state root, made by agentpen up, is served too)", Errors: one,
	}, s.getCampaign)
	huma.Register(api, huma.Operation{
		OperationID: "deleteCampaign", Method: http.MethodDelete, Path: "/v1/campaigns/{id}", Tags: tags,
		Summary: "Remove a campaign by exact id and verify; returns the cleanup report",
		Description: "Its workspaces' capabilities are revoked first (sessions closed with 1001). 200 only when the cleanup " +
			"is verified; a cleanup that is not verified is a 500 problem naming the failed checks (the report is at " +
			"GET .../cleanup), and the campaign stays listed as cleanup_failed: DELETE again to retry.",
		Errors: one,
	}, s.deleteCampaign)
	huma.Register(api, huma.Operation{
		OperationID: "listWorkspaces", Method: http.MethodGet, Path: "/v1/campaigns/{id}/workspaces", Tags: tags,
		Summary: "List a campaign's workspaces: opaque agent ids, tasks and base_urls", Errors: one,
	}, s.listWorkspaces)
	huma.Register(api, huma.Operation{
		OperationID: "attestCampaign", Method: http.MethodPost, Path: "/v1/campaigns/{id}/attestation", Tags: tags,
		Summary: "Attest the campaign now and return the fresh report",
		Description: "Probes run inside the containers and read the grader's counters: run it before handing workspaces " +
			"to agents (an attestation while agents grade sees their calls and fails closed).",
		Errors: one,
	}, s.attestCampaign)
	huma.Register(api, huma.Operation{
		OperationID: "getAttestation", Method: http.MethodGet, Path: "/v1/campaigns/{id}/attestation", Tags: tags,
		Summary: "The stored attestation report", Errors: one,
	}, s.getAttestation)
	huma.Register(api, huma.Operation{
		OperationID: "getCleanup", Method: http.MethodGet, Path: "/v1/campaigns/{id}/cleanup", Tags: tags,
		Summary: "The stored cleanup report", Errors: one,
	}, s.getCleanup)
	// The create body is read raw (campaign.DecodeSpec gives line, column
	// and every unknown field); the document still names its schema.
	body := api.OpenAPI().Paths["/v1/campaigns"].Post.RequestBody
	body.Required = true
	body.Content = map[string]*huma.MediaType{"application/json": {
		Schema: api.OpenAPI().Components.Schemas.Schema(reflect.TypeFor[campaign.CampaignSpec](), true, "CampaignSpec"),
	}}
}

// opContext is an operation's context: it ends when the client goes
// away or when Close gives up waiting.
func (s *Server) opContext(ctx context.Context) (context.Context, func(), error) {
	sctx, done, err := s.startOp()
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(sctx, cancel)
	return ctx, func() { stop(); cancel(); done() }, nil
}

func (s *Server) createCampaign(ctx context.Context, in *createInput) (*campaignOutput, error) {
	spec, _, err := ValidateSpecBytes(in.RawBody)
	if err != nil {
		return nil, specProblem(err)
	}
	ctx, done, err := s.opContext(ctx)
	if err != nil {
		return nil, operationProblem("create", err)
	}
	defer done()
	id := spec.CampaignID
	e := &entry{id: id, state: StateCreating}
	s.mu.Lock()
	if _, taken := s.campaigns[id]; taken {
		s.mu.Unlock()
		return nil, problem(http.StatusConflict, fmt.Sprintf("campaign %q exists: delete it first", id))
	}
	s.campaigns[id] = e
	e.op.Lock()
	s.gaugesLocked()
	s.mu.Unlock()
	defer e.op.Unlock()
	drop := func() {
		s.mu.Lock()
		delete(s.campaigns, id)
		s.gaugesLocked()
		s.mu.Unlock()
	}

	start := time.Now()
	c, err := s.be.BringUp(ctx, spec)
	if err != nil {
		drop()
		s.metrics.bringUp.WithLabelValues("failed").Observe(time.Since(start).Seconds())
		s.log.Warn("create failed", "campaign", id, "request_id", RequestID(ctx), "cancelled", ctx.Err() != nil)
		return nil, operationProblem("bring-up", err)
	}
	rep, err := s.be.Attest(ctx, id, s.cfg.Attest)
	if err != nil || !rep.OK {
		// Fail closed, as agentpen up: a campaign that does not attest is
		// never handed out; it is removed by exact id, even when the client
		// went away meanwhile.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*adapter.DefaultCleanupTimeout)
		defer cancel()
		crep, cerr := s.be.Cleanup(rctx, id)
		drop()
		s.metrics.bringUp.WithLabelValues("not_attested").Observe(time.Since(start).Seconds())
		var details []*huma.ErrorDetail
		if rep != nil {
			for _, line := range rep.FailureLines() {
				details = append(details, &huma.ErrorDetail{Message: line, Location: "attestation"})
			}
		}
		removal := "removed by exact id: cleanup " + string(statusOf(crep))
		if cerr != nil {
			removal += " (" + cerr.Error() + ")"
		}
		detail := "the campaign did not attest and was not handed out; " + removal
		if err != nil {
			detail = "the campaign could not be attested (" + err.Error() + "); " + removal
		}
		return nil, problem(http.StatusInternalServerError, detail, details...)
	}
	s.metrics.bringUp.WithLabelValues("ready").Observe(time.Since(start).Seconds())
	s.mu.Lock()
	e.camp, e.state = c, StateReady
	e.attest = &ReportRef{OK: rep.OK, Path: filepath.Join(c.Dir, attest.FileName)}
	s.publishLocked(e)
	view := s.viewLocked(e)
	s.mu.Unlock()
	s.log.Info("campaign created", "campaign", id, "workspaces", len(c.Workspaces), "request_id", RequestID(ctx),
		"took_ms", time.Since(start).Milliseconds())
	return &campaignOutput{Location: "/v1/campaigns/" + id, Body: view}, nil
}

func statusOf(r *cleanup.Report) cleanup.Status {
	if r == nil {
		return "not run"
	}
	return r.Status
}

// viewLocked renders an entry. s.mu is held.
func (s *Server) viewLocked(e *entry) CampaignView {
	v := CampaignView{CampaignID: e.id, State: e.state, StateDir: s.be.CampaignDir(e.id), Attestation: e.attest, Cleanup: e.cleanup, Workspaces: []WorkspaceView{}}
	if e.camp == nil {
		return v
	}
	p := e.camp.Plan
	v.Generation = p.Generation
	if e.state != StateReady {
		return v // revoked: no base_url to hand out
	}
	for i, ws := range e.camp.Workspaces {
		capab := capability(s.cfg.Key, p.CampaignID, p.Instance, ws.AgentID)
		v.Workspaces = append(v.Workspaces, WorkspaceView{
			Index: i, AgentID: ws.AgentID, TaskID: p.Agents[i].Spec.TaskID,
			BaseURL: s.cfg.PublicURL + episodePrefix + "/" + capab,
		})
	}
	return v
}

// entryFor validates the id and finds (or loads) the campaign.
func (s *Server) entryFor(id string) (*entry, error) {
	if err := campaign.CheckID("id", id); err != nil {
		return nil, pathProblem(err)
	}
	e, err := s.lookup(id)
	if err != nil {
		return nil, operationProblem("campaign "+id, err)
	}
	return e, nil
}

// pathProblem is a 400 for a bad path parameter.
func pathProblem(err error) error {
	var ve *campaign.ValidationError
	if errors.As(err, &ve) {
		return problem(http.StatusBadRequest, "invalid campaign id", &huma.ErrorDetail{Message: ve.Msg, Location: "path." + ve.Field, Value: ve.Value})
	}
	return problem(http.StatusBadRequest, err.Error())
}

func (s *Server) listCampaigns(ctx context.Context, _ *struct{}) (*listOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &listOutput{}
	out.Body.Campaigns = []CampaignView{}
	for _, e := range s.campaigns {
		out.Body.Campaigns = append(out.Body.Campaigns, s.viewLocked(e))
	}
	slices.SortFunc(out.Body.Campaigns, func(a, b CampaignView) int { return strings.Compare(a.CampaignID, b.CampaignID) })
	return out, nil
}

func (s *Server) getCampaign(ctx context.Context, in *campaignIDParam) (*campaignOutput, error) {
	e, err := s.entryFor(in.ID)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return &campaignOutput{Location: "/v1/campaigns/" + e.id, Body: s.viewLocked(e)}, nil
}

func (s *Server) listWorkspaces(ctx context.Context, in *campaignIDParam) (*workspacesOutput, error) {
	e, err := s.entryFor(in.ID)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.state != StateReady {
		return nil, problem(http.StatusConflict, fmt.Sprintf("campaign %q is %s: its workspaces are not reachable", e.id, e.state))
	}
	out := &workspacesOutput{}
	out.Body.CampaignID = e.id
	out.Body.Workspaces = s.viewLocked(e).Workspaces
	return out, nil
}

func (s *Server) deleteCampaign(ctx context.Context, in *campaignIDParam) (*cleanupOutput, error) {
	e, err := s.entryFor(in.ID)
	if err != nil {
		return nil, err
	}
	ctx, done, err := s.opContext(ctx)
	if err != nil {
		return nil, operationProblem("delete", err)
	}
	defer done()
	// The removal runs to its end even when the client goes away: a half
	// removed campaign helps nobody. The adapter bounds it.
	rep, err := s.remove(context.WithoutCancel(ctx), e)
	if err == nil {
		s.log.Info("campaign deleted", "campaign", e.id, "cleanup", rep.Status, "request_id", RequestID(ctx))
		return &cleanupOutput{Body: rep}, nil
	}
	if rep == nil {
		return nil, operationProblem("delete", err)
	}
	var details []*huma.ErrorDetail
	for _, c := range rep.FailedChecks {
		details = append(details, &huma.ErrorDetail{Message: "failed check", Location: "cleanup." + c})
	}
	for _, l := range rep.LeftAlone {
		details = append(details, &huma.ErrorDetail{Message: "left alone: " + l.Reason, Location: "cleanup.left_alone", Value: string(l.Kind) + " " + l.Name})
	}
	return nil, problem(http.StatusInternalServerError,
		fmt.Sprintf("cleanup of %s is %s, NOT verified: the report at GET /v1/campaigns/%s/cleanup (%s) says why; DELETE again to retry",
			e.id, rep.Status, e.id, s.cleanupPath(e.id)), details...)
}

func (s *Server) cleanupPath(id string) string {
	return filepath.Join(s.be.CampaignDir(id), adapter.CleanupReportFile)
}

func (s *Server) attestCampaign(ctx context.Context, in *campaignIDParam) (*attestOutput, error) {
	e, err := s.entryFor(in.ID)
	if err != nil {
		return nil, err
	}
	ctx, done, err := s.opContext(ctx)
	if err != nil {
		return nil, operationProblem("attest", err)
	}
	defer done()
	e.op.Lock()
	defer e.op.Unlock()
	rep, err := s.be.Attest(ctx, e.id, s.cfg.Attest)
	if err != nil {
		return nil, operationProblem("attest", err)
	}
	s.mu.Lock()
	e.attest = &ReportRef{OK: rep.OK, Path: filepath.Join(s.be.CampaignDir(e.id), attest.FileName)}
	s.mu.Unlock()
	return &attestOutput{Body: rep}, nil
}

func (s *Server) getAttestation(ctx context.Context, in *campaignIDParam) (*attestOutput, error) {
	var rep attest.Report
	if err := s.readReport(in.ID, attest.FileName, &rep); err != nil {
		return nil, err
	}
	return &attestOutput{Body: &rep}, nil
}

func (s *Server) getCleanup(ctx context.Context, in *campaignIDParam) (*cleanupOutput, error) {
	var rep cleanup.Report
	if err := s.readReport(in.ID, adapter.CleanupReportFile, &rep); err != nil {
		return nil, err
	}
	return &cleanupOutput{Body: &rep}, nil
}

// readReport reads a stored report of a campaign in the state root.
func (s *Server) readReport(id, name string, v any) error {
	if err := campaign.CheckID("id", id); err != nil {
		return pathProblem(err)
	}
	b, err := os.ReadFile(filepath.Join(s.be.CampaignDir(id), name))
	if errors.Is(err, os.ErrNotExist) {
		return problem(http.StatusNotFound, fmt.Sprintf("campaign %q has no %s", id, name))
	}
	if err != nil {
		return problem(http.StatusInternalServerError, "read report: "+err.Error())
	}
	if err := json.Unmarshal(b, v); err != nil {
		return problem(http.StatusInternalServerError, fmt.Sprintf("report %s: %v", name, err))
	}
	return nil
}
