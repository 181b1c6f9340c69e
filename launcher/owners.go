package launcher

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/agentpen/agentpen/campaign"
	"github.com/danielgtaylor/huma/v2"
)

// Each campaign created through the API has an owner: the name of the
// token that created it, journalled in its generation's begin record
// (campaign.Generation.Owner, read through campaign.Fold like every other
// fact of a campaign). A launcher sees and acts only on the campaigns
// whose latest generation it created; the operator's token on every one,
// those agentpen up made (no owner) and unusable ones (whose owner cannot
// be trusted) included. To any other launcher a campaign does not exist:
// every route under /v1/campaigns/{id} answers it the 404 of an unknown
// id, word for word, and the list leaves it out. Ids are one namespace in
// the state root, so a create of an id another's campaign holds is
// refused (409, takenProblem) without saying whose it is or what it is.

// campaignRoutes is the prefix of the operations on one campaign: each
// is behind guardCampaigns, those added later too.
const campaignRoutes = "/v1/campaigns/{id}"

// guardCampaigns is the Huma middleware that hides other launchers'
// campaigns: an operation on one campaign runs only when its caller sees
// it (the operator, or the launcher that created it); otherwise it
// answers the 404 of an unknown id before the operation reads anything.
// An invalid id passes to the operation, which refuses it the same way
// for every caller. The operations that change a campaign check again
// under its lock (hidden), where no create can change its owner.
func (s *Server) guardCampaigns(hapi huma.API) func(huma.Context, func(huma.Context)) {
	return func(ctx huma.Context, next func(huma.Context)) {
		if !strings.HasPrefix(ctx.Operation().Path, campaignRoutes) {
			next(ctx)
			return
		}
		id := ctx.Param("id")
		if campaign.CheckID("id", id) != nil {
			next(ctx)
			return
		}
		if c, ok := CallerOf(ctx.Context()); ok && s.sees(c, id) {
			next(ctx)
			return
		}
		huma.WriteErr(hapi, ctx, http.StatusNotFound, noSuchCampaign(id))
	}
}

// sees reports whether the caller sees the campaign id.
func (s *Server) sees(c Caller, id string) bool {
	if c.Operator() {
		return true
	}
	owner, known := s.ownerOf(id)
	return known && c.Sees(owner)
}

// ownerOf says who owns the campaign id: the launcher this service is
// creating it for, else its journal's latest generation's owner ("" for
// agentpen up). known is false for an id with no campaign, or one whose
// journal cannot be used (then only the operator sees it).
func (s *Server) ownerOf(id string) (owner string, known bool) {
	if owner, ok := s.creatingFor(id); ok {
		return owner, true
	}
	c, err := s.root.Open(id)
	if err != nil {
		return "", false
	}
	defer c.Close()
	st, err := c.Read()
	if err != nil {
		return "", false
	}
	return st.Latest().Owner, true
}

// creatingFor is the owner of the campaign this service is creating
// under id (false when it creates none).
func (s *Server) creatingFor(id string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.creatingForLocked(id)
}

// creatingForLocked is creatingFor with s.mu held.
func (s *Server) creatingForLocked(id string) (string, bool) {
	if e := s.campaigns[id]; e != nil && e.busying && e.busy == campaign.StatusCreating {
		return e.owner, true
	}
	return "", false
}

// hidden reports whether the campaign snap read (under its lock) is not
// the request's caller's: an operation that changes it then answers as
// for an unknown id. The service's own work (expiry, reconciliation,
// --cleanup-on-exit) has no caller and sees every campaign; every route
// behind the token has one (auth), and guardCampaigns refuses a request
// without one.
func hidden(ctx context.Context, snap snapshot) bool {
	c, ok := CallerOf(ctx)
	if !ok || c.Operator() {
		return false
	}
	return snap.err != nil || !c.Sees(snap.st.Latest().Owner)
}

// noSuchCampaign is the detail of the 404 of an unknown campaign id, and
// of another launcher's.
func noSuchCampaign(id string) string {
	return fmt.Sprintf("no such campaign %q in this service's state root (GET /v1/campaigns lists them)", id)
}

// takenProblem is the 409 of a create whose id another launcher's
// campaign (or one agentpen up made, or an unusable one) holds: it says
// neither whose nor in what state.
func takenProblem(id string) error {
	return problem(http.StatusConflict, fmt.Sprintf("campaign id %q is taken: another campaign of this service's state root has it "+
		"(ids are one namespace for every launcher); create yours under another id", id))
}
