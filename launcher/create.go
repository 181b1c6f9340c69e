package launcher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/api"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/workbench/tasks"
	"github.com/danielgtaylor/huma/v2"
)

// A create is synchronous by default: the answer (201) comes once the
// campaign is up and attested, and a client that goes away cancels the
// bring-up, which rolls back by exact id. With HTTP's Prefer:
// respond-async (RFC 7240) the spec is checked as for a synchronous
// create (every 4xx is the same) and the answer is 202 with Location at
// once; the campaign reads creating until it is ready or failed, its
// events stream at GET .../events, and no client going away stops it.

// preferAsync reports whether a Prefer header asks for respond-async.
func preferAsync(prefer string) bool {
	for _, p := range strings.Split(prefer, ",") {
		name, _, _ := strings.Cut(p, ";")
		if strings.EqualFold(strings.TrimSpace(name), "respond-async") {
			return true
		}
	}
	return false
}

type createInput struct {
	Prefer  string `header:"Prefer" doc:"respond-async: answer 202 with Location once the spec is accepted, and create the campaign in the background (RFC 7240)"`
	RawBody []byte `contentType:"application/json"`
}

type createOutput struct {
	Status            int
	Location          string `header:"Location"`
	PreferenceApplied string `header:"Preference-Applied"`
	Body              api.CampaignView
}

// parseCreate reads a create's spec: decoded and validated as agentpen up
// does, the service's default key variable given to a spec that names
// none (so the spec file names the one the campaign was made with).
func (s *Server) parseCreate(body []byte) (*campaign.Plan, error) {
	spec, err := campaign.DecodeSpec(bytes.NewReader(body))
	if err != nil {
		return nil, specProblem(err)
	}
	if spec.Server.APIKeyEnv == "" && s.cfg.APIKeyEnv != "" {
		spec.Server.APIKeyEnv = s.cfg.APIKeyEnv
	}
	popts, err := s.be.PlanOptions(s.root)
	if err != nil {
		return nil, operationProblem("create", err)
	}
	p, err := campaign.Validate(spec, tasks.Known, popts)
	if err != nil {
		return nil, specProblem(err)
	}
	if err := s.planLifetime(p, s.clock.Now()); err != nil {
		return nil, err
	}
	return p, nil
}

func (s *Server) createCampaign(ctx context.Context, in *createInput) (*createOutput, error) {
	start := time.Now()
	p, err := s.parseCreate(in.RawBody)
	if err != nil {
		return nil, err
	}
	// The campaign is its creator's: its token's name goes in the begin
	// record.
	caller, _ := CallerOf(ctx)
	p.Owner = caller.Name
	async := preferAsync(in.Prefer)
	sctx, done, err := s.startOp()
	if err != nil {
		return nil, operationProblem("create", err)
	}
	id := p.CampaignID
	e := s.entry(id)
	if !e.op.TryLock() {
		done()
		if !s.sees(caller, id) {
			return nil, takenProblem(id)
		}
		return nil, problem(http.StatusConflict, fmt.Sprintf("campaign %q: this service is creating, attesting or deleting it: retry once that ends", id))
	}
	release := func() { e.op.Unlock(); done() }
	// An id another launcher's campaign holds (any generation of it, in
	// any state) is refused without a word of it; one whose journal has
	// anything live is refused in the API's terms; the bring-up refuses
	// it again under the campaign's lock (another process may bring it
	// up meanwhile).
	if snap, err := s.read(id); err == nil {
		switch {
		case hidden(ctx, snap):
			release()
			return nil, takenProblem(id)
		case snap.err != nil || len(snap.st.Live()) > 0:
			release()
			return nil, existsProblem(id, snap)
		}
	}
	// The key and the images (each tag resolved to its image id) before
	// anything is made, and before an asynchronous create is accepted.
	if err := s.be.Prepare(ctx, p); err != nil {
		release()
		s.logOp(ctx, "create", id, "refused", start, err)
		return nil, operationProblem("create", err)
	}
	s.mu.Lock()
	e.owner = p.Owner
	s.mu.Unlock()
	s.begin(e, campaign.StatusCreating)
	out := &createOutput{Location: "/v1/campaigns/" + id}
	if async {
		// The bring-up runs on the service's context: only Close (after
		// its grace) cancels it, never the client.
		go func() {
			defer release()
			s.create(sctx, e, p, start)
		}()
		out.Status, out.PreferenceApplied, out.Body = http.StatusAccepted, "respond-async", s.creatingView(id, p.Owner)
		return out, nil
	}
	defer release()
	// A synchronous create ends with the client or with Close.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(sctx, cancel)
	defer stop()
	res, err := s.create(ctx, e, p, start)
	if err != nil {
		return nil, s.createProblem(ctx, id, res, err)
	}
	view, err := s.view(id)
	if err != nil {
		return nil, operationProblem("create", err)
	}
	out.Status, out.Body = http.StatusCreated, view
	return out, nil
}

// create brings the plan up and attests it (adapter.Up's fail-closed
// policy: a campaign that does not attest is removed by exact id, even
// when ctx ended meanwhile), publishes it when it is ready, ends the
// service's creating state, and logs the outcome. The caller holds e.op
// and began StatusCreating.
func (s *Server) create(ctx context.Context, e *entry, p *campaign.Plan, start time.Time) (*adapter.UpResult, error) {
	id := p.CampaignID
	res, err := s.be.Up(ctx, s.root, p, adapter.UpOptions{Attest: s.cfg.Attest})
	outcome := "ready"
	switch {
	case res == nil || res.Campaign == nil:
		outcome = "failed"
		s.end(e)
	case err != nil:
		outcome = "not_attested"
		s.end(e)
	default:
		s.mu.Lock()
		s.publishLocked(e, res.Campaign)
		e.busying = false
		e.seq++
		e.wakeLocked()
		s.gaugesLocked()
		s.mu.Unlock()
		s.schedule(id)
	}
	s.metrics.bringUp.WithLabelValues(outcome).Observe(time.Since(start).Seconds())
	s.logOp(ctx, "create", id, outcome, start, err)
	return res, err
}

// createProblem is the problem of a synchronous create that failed.
func (s *Server) createProblem(ctx context.Context, id string, res *adapter.UpResult, err error) error {
	if res == nil || res.Campaign == nil {
		if snap, rerr := s.read(id); errors.Is(err, adapter.ErrCampaignExists) && rerr == nil {
			if hidden(ctx, snap) {
				return takenProblem(id) // another process brought it up meanwhile
			}
			return existsProblem(id, snap)
		}
		return operationProblem("bring-up", err)
	}
	var details []*huma.ErrorDetail
	if res.Report != nil {
		for _, line := range res.Report.FailureLines() {
			details = append(details, &huma.ErrorDetail{Message: line, Location: "attestation"})
		}
	}
	removal := "removed by exact id: cleanup " + string(statusOf(res.Removal))
	if res.Removal != nil && !res.Removal.OK {
		removal += ": DELETE /v1/campaigns/" + id + " to retry"
	}
	detail := "the campaign did not attest and was not handed out; " + removal
	if res.Report == nil {
		detail = "the campaign could not be attested (" + err.Error() + "); " + removal
	}
	return problem(http.StatusInternalServerError, detail, details...)
}
