package launcher

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/agentpen/agentpen/api"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/store"
	"github.com/danielgtaylor/huma/v2"
)

// Campaigns that live with their launcher. A campaign whose lifetime has
// a launcher timeout (launcher_timeout_seconds, in its spec or by PATCH)
// is tied to the launcher that created it, its owner's token: while that
// token holds an event stream of it open, or for the launcher timeout
// after the last one closed or its last keepalive (POST .../keepalive),
// the launcher is there; once it has been gone that long the campaign is
// removed as DELETE removes it, reason launcher_gone (adapter.Reconcile
// with ReconcileOptions.LauncherSeen, decided again under its lock). The
// service keeps when it last saw each campaign's launcher in memory: it
// sees a campaign's launcher from the moment the campaign is up in this
// service (created, or served again after a restart), so a restart gives
// every launcher its timeout to come back. agentpen reconcile, which
// watches no launcher, never removes a campaign for it.

// launcherStream counts an event stream of the campaign its launcher
// opened (open) or closed: the launcher is seen while one is open, and
// last seen when the last one closed.
func (s *Server) launcherStream(id string, open bool) {
	s.mu.Lock()
	e := s.entryLocked(id)
	if open {
		e.streams++
	} else {
		e.streams--
		e.seen = s.clock.Now()
	}
	s.mu.Unlock()
	if !open {
		s.schedule(id)
	}
}

// launcherSeenLocked is when the campaign's launcher was last seen at
// now: now while it holds a stream open. s.mu is held.
func (e *entry) launcherSeenLocked(now time.Time) time.Time {
	if e.streams > 0 {
		return now
	}
	return e.seen
}

// launcherSeen is launcherSeenLocked with s.mu taken.
func (s *Server) launcherSeen(id string, now time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.entryLocked(id).launcherSeenLocked(now)
}

type keepaliveOutput struct {
	Body api.KeepaliveView
}

// registerTether registers POST /v1/campaigns/{id}/keepalive.
func (s *Server) registerTether(hapi huma.API, errs []int) {
	huma.Register(hapi, huma.Operation{
		OperationID: "keepaliveCampaign", Method: http.MethodPost, Path: "/v1/campaigns/{id}/keepalive", Tags: []string{"campaigns"},
		Summary: "Say that the launcher that created the campaign is still there",
		Description: "A campaign whose lifetime has a launcher timeout (launcher_timeout_seconds) is removed, reason " +
			"launcher_gone, once the token that created it has held no event stream of it open and sent it no keepalive " +
			"for that long. Only that token's keepalive counts (403 for another, the operator's included). The answer " +
			"says until when the campaign is kept without another sign (gone_at; absent while one of its streams is " +
			"open, or for a campaign not tied to its launcher).",
		Errors: append(errs, http.StatusForbidden),
	}, s.keepalive)
}

func (s *Server) keepalive(ctx context.Context, in *campaignIDParam) (*keepaliveOutput, error) {
	if err := campaign.CheckID("id", in.ID); err != nil {
		return nil, pathProblem(err)
	}
	id := in.ID
	caller, _ := CallerOf(ctx)
	owner, known := s.ownerOf(id)
	if !known {
		return nil, problem(http.StatusNotFound, noSuchCampaign(id))
	}
	if owner == "" || caller.Name != owner {
		return nil, problem(http.StatusForbidden, fmt.Sprintf("campaign %q: only the launcher that created it keeps it alive (its owner's token); nothing was changed", id))
	}
	now := s.clock.Now()
	s.mu.Lock()
	e := s.entryLocked(id)
	e.seen = now
	s.mu.Unlock()
	s.schedule(id)
	snap, err := s.read(id)
	if errors.Is(err, store.ErrNoCampaign) {
		if _, creating := s.creatingFor(id); creating {
			// Its create was accepted and has journalled nothing yet: the
			// launcher is seen; its timeout counts once it is up.
			return &keepaliveOutput{Body: api.KeepaliveView{CampaignID: id}}, nil
		}
	}
	if err != nil {
		return nil, campaignProblem(id, "keepalive", err)
	}
	l := snap.st.Lifetime.Launcher
	out := &keepaliveOutput{Body: api.KeepaliveView{CampaignID: id, LauncherTimeoutSeconds: int(l / time.Second)}}
	if l > 0 && s.streamsOf(id) == 0 {
		at := now.Add(l).UTC()
		out.Body.GoneAt = &at
	}
	return out, nil
}

// streamsOf is how many event streams of the campaign its launcher holds.
func (s *Server) streamsOf(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.entryLocked(id).streams
}
