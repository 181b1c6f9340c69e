package adapter

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/cleanup"
	"github.com/agentpen/agentpen/store"
)

// ErrNotAttested is returned (wrapped) by Up for a campaign that came up
// but did not attest: its attestation failed, or could not run. It was
// removed by exact id (UpResult.Removal), or kept (UpOptions.KeepFailed).
var ErrNotAttested = errors.New("the campaign did not attest")

// ErrUnattestable is returned (wrapped) by Up, before anything is made,
// on a runtime whose campaigns the attestation cannot judge
// (driver.Capabilities.Attestable false): each would come up only to be
// removed.
var ErrUnattestable = errors.New("the runtime's campaigns cannot be attested")

// UpOptions configure Up.
type UpOptions struct {
	Attest AttestOptions
	// KeepFailed keeps a campaign whose attestation ran and failed, for
	// debugging (agentpen down removes it); one whose attestation could
	// not run or was interrupted is removed all the same.
	KeepFailed bool
}

// UpResult is what Up did.
type UpResult struct {
	// Campaign is the campaign brought up (nil when its bring-up failed:
	// it was rolled back).
	Campaign *Campaign
	// Report is its attestation and ReportPath where it is (nil and ""
	// when the attestation could not run).
	Report     *attest.Report
	ReportPath string
	// Removal is the fail-closed removal of a campaign that did not
	// attest, and RemovalPath its report (nil and "" for none).
	Removal     *cleanup.Report
	RemovalPath string
	// Kept is true when a campaign that failed its attestation was kept
	// (UpOptions.KeepFailed).
	Kept bool
}

// Up is the policy agentpen up and the launcher API's create share: bring
// the plan up (BringUpAttested), and fail closed: a campaign that does not
// attest is never handed out; it is removed by exact id, even when ctx
// was cancelled meanwhile (unless KeepFailed keeps one whose attestation
// ran and failed). The error is the bring-up's (nothing is up; what was
// made was rolled back), or wraps ErrNotAttested with the attestation's
// error and the removal's; the result says what happened either way.
func (a *Adapter) Up(ctx context.Context, root *store.Root, p *campaign.Plan, opts UpOptions) (*UpResult, error) {
	if err := a.CheckAttestable(); err != nil && !opts.KeepFailed {
		return &UpResult{}, err
	}
	c, rep, path, err := a.BringUpAttested(ctx, root, p, opts.Attest)
	res := &UpResult{Campaign: c, Report: rep, ReportPath: path}
	if c == nil {
		return res, err
	}
	if err == nil && rep.OK {
		return res, nil
	}
	notAttested := fmt.Errorf("campaign %s: %w", p.CampaignID, ErrNotAttested)
	if err != nil {
		notAttested = fmt.Errorf("campaign %s: %w: the attestation could not run: %w", p.CampaignID, ErrNotAttested, err)
	}
	if opts.KeepFailed && rep != nil && ctx.Err() == nil {
		res.Kept = true
		return res, notAttested
	}
	// The removal runs even when ctx was cancelled (an interrupted
	// attestation): a campaign that did not attest is never left behind.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*DefaultCleanupTimeout)
	defer cancel()
	sc, oerr := root.Open(p.CampaignID)
	if oerr != nil {
		return res, errors.Join(notAttested, fmt.Errorf("removing it: %w", oerr))
	}
	defer sc.Close()
	crep, cpath, cerr := a.Cleanup(rctx, sc, campaign.ReasonNotAttested)
	res.Removal, res.RemovalPath = crep, cpath
	if cerr != nil {
		return res, errors.Join(notAttested, fmt.Errorf("removing it: %w", cerr))
	}
	return res, notAttested
}

// CheckAttestable returns an error wrapping ErrUnattestable, saying what
// to do, when the runtime's campaigns cannot be attested.
func (a *Adapter) CheckAttestable() error {
	info := a.Driver.Info()
	if info.Capabilities.Attestable {
		return nil
	}
	return fmt.Errorf("%w: the %s driver declares its campaigns unattestable, so a campaign there would come up only to be removed; nothing was made (agentpen up --keep-failed brings one up unattested and keeps it)", ErrUnattestable, info.Name)
}
