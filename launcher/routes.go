package launcher

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/agentpen/agentpen/api"
	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/cleanup"
	"github.com/agentpen/agentpen/custody"
	"github.com/agentpen/agentpen/store"
	"github.com/danielgtaylor/huma/v2"
)

type campaignIDParam struct {
	ID string `path:"id" doc:"Campaign id"`
}

type campaignOutput struct {
	Location string `header:"Location"`
	Body     api.CampaignView
}

type listOutput struct {
	Body struct {
		Campaigns []api.CampaignView `json:"campaigns"`
	}
}

type workspacesOutput struct {
	Body struct {
		CampaignID string          `json:"campaign_id"`
		Workspaces []api.Workspace `json:"workspaces"`
	}
}

type attestOutput struct {
	Body *attest.Report
}

type cleanupOutput struct {
	Body *cleanup.Report
}

// registerOperations registers the /v1 operations with Huma.
func (s *Server) registerOperations(hapi huma.API) {
	tags := []string{"campaigns"}
	bad := []int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusConflict, http.StatusUnprocessableEntity, http.StatusInternalServerError, http.StatusServiceUnavailable}
	one := []int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusNotFound, http.StatusConflict, http.StatusInternalServerError, http.StatusServiceUnavailable}

	huma.Register(hapi, huma.Operation{
		OperationID: "createCampaign", Method: http.MethodPost, Path: "/v1/campaigns", Tags: tags,
		Summary: "Create a campaign and attest it",
		Description: "The body is the spec agentpen up takes, validated the same way (every unknown field, then the values; " +
			"each workspace's task_id must be in the workbench catalogue; the key variable set; every image on the daemon, " +
			"a tag resolved to its image id). The campaign is brought up, attested, and only then returned (201); one that " +
			"does not attest is removed by exact id (500). A client that goes away (a client timeout included) cancels " +
			"the bring-up, which rolls back by exact id. With Prefer: respond-async the spec is checked the same way, " +
			"and the answer is 202 with Location at once: the campaign reads creating until it is ready or failed, " +
			"GET /v1/campaigns/{id}/events streams its progress, and no client going away stops it. The campaign is the " +
			"caller's: its token's name is journalled as its owner, and only that token and the operator's see it. An id " +
			"that another launcher's campaign holds (in any state, removed included), or one agentpen up made, is a 409 " +
			"that says the id is taken and nothing else of it.",
		DefaultStatus: http.StatusCreated, Errors: bad, SkipValidateBody: true, MaxBodyBytes: campaign.MaxSpecBytes + 1,
		BodyReadTimeout: 30 * time.Second,
	}, s.createCampaign)
	// The asynchronous answer: the same view, reading creating.
	created := hapi.OpenAPI().Paths["/v1/campaigns"].Post.Responses["201"]
	hapi.OpenAPI().Paths["/v1/campaigns"].Post.Responses["202"] = &huma.Response{
		Description: "Accepted (Prefer: respond-async): the campaign reads creating; Location names it, GET .../events streams its progress",
		Headers:     created.Headers, Content: created.Content,
	}
	huma.Register(hapi, huma.Operation{
		OperationID: "listCampaigns", Method: http.MethodGet, Path: "/v1/campaigns", Tags: tags,
		Summary: "List the campaigns the caller's token created (the operator's: every campaign of the state root), each with the state its journal says", Errors: []int{http.StatusUnauthorized},
	}, s.listCampaigns)
	huma.Register(hapi, huma.Operation{
		OperationID: "getCampaign", Method: http.MethodGet, Path: "/v1/campaigns/{id}", Tags: tags,
		Summary: "Get a campaign of the state root, with the state its journal says (one agentpen up made is served too)", Errors: one,
	}, s.getCampaign)
	huma.Register(hapi, huma.Operation{
		OperationID: "deleteCampaign", Method: http.MethodDelete, Path: "/v1/campaigns/{id}", Tags: tags,
		Summary: "Remove a campaign by exact id and verify; returns the cleanup report",
		Description: "Removes whatever its journal records as live, in any state (a bring-up or a removal that was killed " +
			"included), as agentpen down does. Its workspaces' capabilities are revoked first (sessions closed with 1001). " +
			"200 only when the cleanup is verified; a cleanup that is not verified is a 500 problem naming the failed checks " +
			"(the report is at GET .../cleanup), and the campaign reads cleanup_failed: DELETE again to retry. A campaign " +
			"already removed answers 200 with its stored report, removing nothing.",
		Errors: one,
	}, s.deleteCampaign)
	huma.Register(hapi, huma.Operation{
		OperationID: "listWorkspaces", Method: http.MethodGet, Path: "/v1/campaigns/{id}/workspaces", Tags: tags,
		Summary: "List a campaign's workspaces: opaque agent ids, tasks and base_urls", Errors: one,
	}, s.listWorkspaces)
	huma.Register(hapi, huma.Operation{
		OperationID: "attestCampaign", Method: http.MethodPost, Path: "/v1/campaigns/{id}/attestation", Tags: tags,
		Summary: "Attest the campaign now and return the fresh report",
		Description: "Probes run inside the containers and read the grader's counters: run it before handing workspaces " +
			"to agents (an attestation while agents grade sees their calls and fails closed). A report that is not ok " +
			"makes the campaign attestation_failed: its workspaces are no longer served (open sessions are closed with " +
			"1001) until an attestation passes again; DELETE removes it. Only a campaign that is up (ready or " +
			"attestation_failed) is attested (409 otherwise).",
		Errors: one,
	}, s.attestCampaign)
	huma.Register(hapi, huma.Operation{
		OperationID: "getAttestation", Method: http.MethodGet, Path: "/v1/campaigns/{id}/attestation", Tags: tags,
		Summary: "The stored attestation report of the latest generation", Errors: one,
	}, s.getAttestation)
	huma.Register(hapi, huma.Operation{
		OperationID: "getCleanup", Method: http.MethodGet, Path: "/v1/campaigns/{id}/cleanup", Tags: tags,
		Summary: "The stored cleanup report of the latest generation (404 while that generation has none)", Errors: one,
	}, s.getCleanup)
	huma.Register(hapi, huma.Operation{
		OperationID: "verifyCampaign", Method: http.MethodGet, Path: "/v1/campaigns/{id}/verification", Tags: tags,
		Summary: "Verify the campaign's signed reports now, as agentpen verify does",
		Description: "Every check of agentpen verify CAMPAIGN_ID, made on the service's host with the key the reports are " +
			"signed with: each report's envelope (the one the journal recorded), signature, statement, predicate " +
			"(the report file is the signed one: a changed field is named), subjects and journal record, and the " +
			"journal's chain. ok only when a report was verified and every check held; failed names the checks " +
			"that did not. Read-only.",
		Errors: one,
	}, s.verifyCampaign)
	s.registerEpisodes(hapi, one)
	s.registerPool(hapi, one)
	s.registerCatalogue(hapi)
	s.registerEvents(hapi)
	s.registerLifetime(hapi)
	s.registerTether(hapi, one)
	// The create body is read raw (campaign.DecodeSpec gives line, column
	// and every unknown field); the document still names its schema.
	body := hapi.OpenAPI().Paths["/v1/campaigns"].Post.RequestBody
	body.Required = true
	body.Content = map[string]*huma.MediaType{"application/json": {
		Schema: hapi.OpenAPI().Components.Schemas.Schema(reflect.TypeFor[campaign.CampaignSpec](), true, "CampaignSpec"),
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

// existsProblem is the 409 of a create whose id has live resources, in
// the API's terms.
func existsProblem(id string, snap snapshot) error {
	if snap.err != nil {
		return unusableProblem(id, snap)
	}
	return problem(http.StatusConflict, fmt.Sprintf("campaign %q already exists: its generation %d is %s with %d resources live; DELETE /v1/campaigns/%s removes it, then create it again",
		id, snap.st.Latest().N, snap.status(), len(snap.st.Live()), id))
}

// unusableProblem is the 409 of every operation on an unusable campaign:
// what is wrong with its files, and that nothing was done.
func unusableProblem(id string, snap snapshot) error {
	return problem(http.StatusConflict, fmt.Sprintf("campaign %q is unusable, nothing was done: %v (an operator repairs it or moves it aside: docs/troubleshooting.md)", id, snap.err))
}

func statusOf(r *cleanup.Report) cleanup.Status {
	if r == nil {
		return "not run"
	}
	return r.Status
}

// campaignProblem maps an error of reading or operating on a campaign
// onto a problem; a campaign the state root has no journal of is a 404
// that names it once.
func campaignProblem(id, what string, err error) error {
	var ve *campaign.ValidationError
	switch {
	case errors.As(err, &ve):
		return pathProblem(err)
	case errors.Is(err, store.ErrNoCampaign):
		return problem(http.StatusNotFound, noSuchCampaign(id))
	}
	return operationProblem(what, err)
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
	caller, _ := CallerOf(ctx)
	list, err := s.root.List()
	if err != nil {
		return nil, operationProblem("list", err)
	}
	out := &listOutput{}
	out.Body.Campaigns = []api.CampaignView{}
	seen := map[string]bool{}
	for _, l := range list {
		owner, creating := s.creatingFor(l.ID)
		if !creating {
			owner = l.State.Latest().Owner
		}
		if !caller.Operator() && (l.Err != nil || !caller.Sees(owner)) {
			continue // another launcher's, or unusable: the operator's alone
		}
		seq := s.seqOf(l.ID)
		v, fresh := s.render(l.ID, s.snapshotOf(l.ID, l.State, l.Err), seq, true)
		if !fresh {
			// An operation ended under the read: read this one again.
			if v2, err := s.view(l.ID); err == nil {
				v = v2
			}
		}
		out.Body.Campaigns = append(out.Body.Campaigns, v)
		seen[l.ID] = true
	}
	// Campaigns this service is creating whose journal is not written yet.
	s.mu.Lock()
	for id, e := range s.campaigns {
		if e.busying && e.busy == campaign.StatusCreating && !seen[id] && caller.Sees(e.owner) {
			out.Body.Campaigns = append(out.Body.Campaigns, s.creatingView(id, e.owner))
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out.Body.Campaigns, func(a, b api.CampaignView) int { return strings.Compare(a.CampaignID, b.CampaignID) })
	return out, nil
}

func (s *Server) getCampaign(ctx context.Context, in *campaignIDParam) (*campaignOutput, error) {
	if err := campaign.CheckID("id", in.ID); err != nil {
		return nil, pathProblem(err)
	}
	v, err := s.view(in.ID)
	if err != nil {
		return nil, campaignProblem(in.ID, "read", err)
	}
	return &campaignOutput{Location: "/v1/campaigns/" + in.ID, Body: v}, nil
}

func (s *Server) listWorkspaces(ctx context.Context, in *campaignIDParam) (*workspacesOutput, error) {
	if err := campaign.CheckID("id", in.ID); err != nil {
		return nil, pathProblem(err)
	}
	v, err := s.view(in.ID)
	if err != nil {
		return nil, campaignProblem(in.ID, "read", err)
	}
	if v.State != campaign.StatusReady.String() {
		return nil, problem(http.StatusConflict, fmt.Sprintf("campaign %q is %s: its workspaces are not served (GET /v1/campaigns/%s says more)", in.ID, v.State, in.ID))
	}
	out := &workspacesOutput{}
	out.Body.CampaignID = in.ID
	out.Body.Workspaces = v.Workspaces
	return out, nil
}

func (s *Server) deleteCampaign(ctx context.Context, in *campaignIDParam) (*cleanupOutput, error) {
	if err := campaign.CheckID("id", in.ID); err != nil {
		return nil, pathProblem(err)
	}
	id := in.ID
	ctx, done, err := s.opContext(ctx)
	if err != nil {
		return nil, operationProblem("delete", err)
	}
	defer done()
	// The removal runs to its end even when the client goes away: a half
	// removed campaign helps nobody. The adapter bounds it.
	start := time.Now()
	rep, err := s.remove(context.WithoutCancel(ctx), s.entry(id), campaign.ReasonDelete)
	outcome := "failed"
	if rep != nil {
		outcome = string(rep.Status)
	}
	s.logOp(ctx, "delete", id, outcome, start, err)
	if err == nil {
		return &cleanupOutput{Body: rep}, nil
	}
	if rep == nil {
		return nil, campaignProblem(id, "delete", err)
	}
	var details []*huma.ErrorDetail
	for _, c := range rep.FailedChecks {
		details = append(details, &huma.ErrorDetail{Message: "failed check", Location: "cleanup." + c})
	}
	for _, l := range rep.LeftAlone {
		details = append(details, &huma.ErrorDetail{Message: "left alone: " + l.Reason, Location: "cleanup.left_alone", Value: string(l.Kind) + " " + l.Name})
	}
	return nil, problem(http.StatusInternalServerError,
		fmt.Sprintf("cleanup of %s is %s, NOT verified: the report at GET /v1/campaigns/%s/cleanup says why; DELETE again to retry",
			id, rep.Status, id), details...)
}

func (s *Server) attestCampaign(ctx context.Context, in *campaignIDParam) (*attestOutput, error) {
	if err := campaign.CheckID("id", in.ID); err != nil {
		return nil, pathProblem(err)
	}
	id := in.ID
	ctx, e, snap, release, err := s.operate(ctx, id, "attest")
	if err != nil {
		return nil, err
	}
	defer release()
	if !snap.status().Up() {
		return nil, problem(http.StatusConflict, fmt.Sprintf("campaign %q is %s: only a campaign that is up is attested (GET /v1/campaigns/%s says more)", id, snap.status(), id))
	}
	c, err := s.root.Open(id)
	if err != nil {
		return nil, campaignProblem(id, "attest", err)
	}
	defer c.Close()
	start := time.Now()
	rep, _, err := s.be.Attest(ctx, c, s.cfg.Attest)
	s.mu.Lock()
	e.seq++ // the attestation changed the files read before
	s.mu.Unlock()
	if err != nil {
		s.logOp(ctx, "attest", id, "error", start, err)
		return nil, operationProblem("attest", err)
	}
	// The new report decides: served when it passed, revoked when not.
	if _, err := s.view(id); err != nil {
		return nil, campaignProblem(id, "attest", err)
	}
	if rep.OK {
		s.logOp(ctx, "attest", id, "ok", start, nil)
	} else {
		s.logOp(ctx, "attest", id, "failed", start, fmt.Errorf("%d checks failed: its workspaces are no longer served", len(rep.FailedChecks)))
	}
	return &attestOutput{Body: rep}, nil
}

func (s *Server) getAttestation(ctx context.Context, in *campaignIDParam) (*attestOutput, error) {
	snap, err := s.readFor(in.ID)
	if err != nil {
		return nil, err
	}
	if snap.att == nil && snap.st.AttestationReport != "" {
		return nil, problem(http.StatusConflict, fmt.Sprintf("campaign %q: its attestation report cannot be read: %v", in.ID, snap.reportErr))
	}
	if snap.att == nil {
		return nil, problem(http.StatusNotFound, fmt.Sprintf("campaign %q: its generation %d has no attestation report", in.ID, snap.st.Latest().N))
	}
	return &attestOutput{Body: snap.att}, nil
}

type verificationOutput struct {
	Body *custody.Result
}

func (s *Server) verifyCampaign(ctx context.Context, in *campaignIDParam) (*verificationOutput, error) {
	if _, err := s.readFor(in.ID); err != nil {
		return nil, err
	}
	c, err := s.root.Open(in.ID)
	if err != nil {
		return nil, campaignProblem(in.ID, "read", err)
	}
	defer c.Close()
	res, err := s.be.VerifySignatures(ctx, c)
	if err != nil {
		return nil, operationProblem("verify the reports", fmt.Errorf("campaign %q: %w", in.ID, err))
	}
	return &verificationOutput{Body: res}, nil
}

func (s *Server) getCleanup(ctx context.Context, in *campaignIDParam) (*cleanupOutput, error) {
	snap, err := s.readFor(in.ID)
	if err != nil {
		return nil, err
	}
	if snap.cl == nil && snap.st.CleanupReport != "" {
		return nil, problem(http.StatusConflict, fmt.Sprintf("campaign %q: its cleanup report cannot be read: %v", in.ID, snap.reportErr))
	}
	if snap.cl == nil {
		g := snap.st.Latest().N
		detail := fmt.Sprintf("campaign %q: its generation %d (%s) has no cleanup report", in.ID, g, snap.status())
		// Earlier generations' reports, beside it.
		if c, err := s.root.Open(in.ID); err == nil {
			var names []string
			if reps, err := c.Reports(store.KindCleanup); err == nil {
				for _, r := range reps {
					if r.Gen < g {
						names = append(names, r.Name)
					}
				}
			}
			c.Close()
			if len(names) > 0 {
				detail += fmt.Sprintf("; earlier generations' reports are in %s: %s", snap.dir, strings.Join(names, ", "))
			}
		}
		return nil, problem(http.StatusNotFound, detail)
	}
	return &cleanupOutput{Body: snap.cl}, nil
}

// readFor validates the id and reads the campaign's files.
func (s *Server) readFor(id string) (snapshot, error) {
	if err := campaign.CheckID("id", id); err != nil {
		return snapshot{}, pathProblem(err)
	}
	snap, err := s.read(id)
	if err != nil {
		return snapshot{}, campaignProblem(id, "read", err)
	}
	if snap.err != nil {
		return snapshot{}, unusableProblem(id, snap)
	}
	return snap, nil
}
