package adapter

import (
	"sync"

	"github.com/agentpen/agentpen/campaign"
)

// Steps a Progress reports.
const (
	// StepCreated: a network was created, or a container created and
	// started.
	StepCreated = "created"
	// StepReady: a container answered its readiness check.
	StepReady = "ready"
	// StepRemoved: a teardown is done with one journalled resource:
	// removed, found already gone, or left alone (Outcome says which).
	StepRemoved = "removed"
	// StepAttesting: BringUpAttested's campaign is ready and its
	// attestation begins (no resource is named).
	StepAttesting = "attesting"
)

// Progress is one step of a bring-up or a teardown, for a caller that
// shows it ("created 12/30"). It never holds a secret.
type Progress struct {
	// CampaignID is the campaign the step belongs to.
	CampaignID string
	// Step is StepCreated, StepReady or StepRemoved.
	Step string
	// Role is the resource's role (campaign.RoleServer, RoleWork,
	// RoleNetwork), Kind its kind; Name and ID name it (ID may be empty).
	Role string
	Kind campaign.Kind
	Name string
	ID   string
	// Done of Total resources of this role have reached this step (for
	// StepRemoved: of this role's resources of every kind, containers
	// first, then directories, then networks).
	Done, Total int
	// Outcome is, for StepRemoved, "removed", "already gone" or "left
	// alone"; empty otherwise.
	Outcome string
}

// progress counts the steps of one bring-up or teardown and hands each to
// the adapter's Progress callback, one call at a time.
type progress struct {
	fn         func(Progress)
	campaignID string

	mu    sync.Mutex
	done  map[string]int // by step/role
	total map[string]int // by role
}

// newProgress returns the counter of one operation; every method is a
// no-op when the adapter has no Progress callback.
func (a *Adapter) newProgress(campaignID string, totals map[string]int) *progress {
	return &progress{fn: a.Progress, campaignID: campaignID, done: map[string]int{}, total: totals}
}

// step reports that one more resource of p.Role reached p.Step.
func (pr *progress) step(p Progress) {
	if pr == nil || pr.fn == nil {
		return
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.done[p.Step+"/"+p.Role]++
	p.CampaignID, p.Done, p.Total = pr.campaignID, pr.done[p.Step+"/"+p.Role], pr.total[p.Role]
	pr.fn(p)
}
