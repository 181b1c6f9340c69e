// Package drivertest is the conformance suite every driver (package
// adapter/driver) passes against its real runtime, and the test harness of
// the engine on a driver: the contract is the suite.
//
// Run runs its cases on a Target: the driver, a spec its runtime can run,
// and a Hand that acts on the runtime as another of its clients would. The
// cases demand the custody discipline of docs/drivers.md: bring-up
// journals every intent before its create and every id after; a failure
// midway rolls back by exact id, verified; a create whose answer was lost
// is resolved by its name and the create's secret; a name another resource
// holds is never adopted; a twin (the name, a new id), a relabelled
// resource and a look-alike carrying copied labels and secret are left
// alone and reported; a removal re-observes everything as absent and
// lists nothing labelled before it says verified; verify writes nothing;
// a removal by someone else is seen and reported; orphans are listed, and
// removed only when provable; a spec the runtime refuses creates nothing;
// the reports verify and a changed one is named; and an agentpen killed
// mid bring-up or mid removal leaves nothing reconcile does not remove.
// Mutants runs each case a driver can fail on a driver broken the way the
// case guards against, and fails when the case passes.
//
// Harness is an engine with a state root, for the tests of a driver's
// package.
package drivertest

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/cleanup"
	"github.com/agentpen/agentpen/store"
)

// Harness is an engine (adapter.Adapter) with a state root, for tests:
// the calls they make by campaign id, each opening the campaign in the
// store as agentpen's commands do.
type Harness struct {
	*adapter.Adapter
	Root      *store.Root
	StateRoot string
}

// NewHarness gives a a state root at stateRoot (a new temporary directory
// when empty), closed when the test ends.
func NewHarness(t testing.TB, a *adapter.Adapter, stateRoot string) *Harness {
	t.Helper()
	if stateRoot == "" {
		stateRoot = t.TempDir()
	}
	root, err := store.CreateRoot(stateRoot)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return &Harness{Adapter: a, Root: root, StateRoot: stateRoot}
}

// plan validates spec as agentpen up does, its agent ids keyed under the
// root's secret (the tests' task ids are the catalogue's or served by
// their own commands: no catalogue check).
func (h *Harness) plan(spec campaign.CampaignSpec) (*campaign.Plan, error) {
	opts, err := h.Adapter.PlanOptions(h.Root)
	if err != nil {
		return nil, err
	}
	return campaign.Validate(spec, nil, opts)
}

// BringUp validates spec and brings it up.
func (h *Harness) BringUp(ctx context.Context, spec campaign.CampaignSpec) (*adapter.Campaign, error) {
	p, err := h.plan(spec)
	if err != nil {
		return nil, err
	}
	return h.Adapter.BringUp(ctx, h.Root, p)
}

// BringUpAttested validates spec, brings it up and attests it.
func (h *Harness) BringUpAttested(ctx context.Context, spec campaign.CampaignSpec, opts adapter.AttestOptions) (*adapter.Campaign, *attest.Report, error) {
	p, err := h.plan(spec)
	if err != nil {
		return nil, nil, err
	}
	c, rep, _, err := h.Adapter.BringUpAttested(ctx, h.Root, p, opts)
	return c, rep, err
}

// Up validates spec and runs the fail-closed policy.
func (h *Harness) Up(ctx context.Context, spec campaign.CampaignSpec, opts adapter.UpOptions) (*adapter.UpResult, error) {
	p, err := h.plan(spec)
	if err != nil {
		return nil, err
	}
	return h.Adapter.Up(ctx, h.Root, p, opts)
}

// open opens a campaign of the root.
func (h *Harness) open(id string) (*store.Campaign, error) { return h.Root.Open(id) }

// Cleanup removes the campaign (as agentpen down).
func (h *Harness) Cleanup(ctx context.Context, id string) (*cleanup.Report, error) {
	c, err := h.open(id)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	rep, _, err := h.Adapter.Cleanup(ctx, c, campaign.ReasonDown)
	return rep, err
}

// TearDown is Cleanup's error.
func (h *Harness) TearDown(ctx context.Context, id string) error {
	_, err := h.Cleanup(ctx, id)
	return err
}

// Verify verifies the campaign's removal, read-only.
func (h *Harness) Verify(ctx context.Context, id string) (*cleanup.Report, error) {
	c, err := h.open(id)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return h.Adapter.Verify(ctx, c)
}

// Attest attests the campaign.
func (h *Harness) Attest(ctx context.Context, id string, opts adapter.AttestOptions) (*attest.Report, error) {
	c, err := h.open(id)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	rep, _, err := h.Adapter.Attest(ctx, c, opts)
	return rep, err
}

// Observe attests the campaign by id without writing anything, whatever
// its state, returning the evidence (adapter.Adapter.Observe).
func (h *Harness) Observe(ctx context.Context, id string, opts adapter.AttestOptions) (attest.Source, attest.Observation, *attest.Report, error) {
	c, err := h.open(id)
	if err != nil {
		return attest.Source{}, attest.Observation{}, nil, err
	}
	defer c.Close()
	return h.Adapter.Observe(ctx, c, opts)
}

// Load rebuilds a campaign that is up.
func (h *Harness) Load(id string) (*adapter.Campaign, error) {
	c, err := h.open(id)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return h.Adapter.Load(c)
}

// State reads the campaign's state.
func (h *Harness) State(id string) (store.State, error) {
	c, err := h.open(id)
	if err != nil {
		return store.State{}, err
	}
	defer c.Close()
	return c.Read()
}

// Records reads the campaign's journal, failing the test when it cannot.
func (h *Harness) Records(t testing.TB, id string) []campaign.Record {
	t.Helper()
	c, err := h.open(id)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	recs, _, err := c.Records()
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// CampaignDir is the campaign's state directory.
func (h *Harness) CampaignDir(id string) string { return h.Root.CampaignDir(id) }

// JournalPath is the campaign's journal.
func (h *Harness) JournalPath(id string) string {
	return h.Root.CampaignDir(id) + "/" + campaign.JournalFile
}

// AttestationPath is the path of the campaign's latest attestation ("" for
// none).
func (h *Harness) AttestationPath(id string) string {
	c, err := h.open(id)
	if err != nil {
		return ""
	}
	defer c.Close()
	st, err := c.Read()
	if err != nil || st.AttestationReport == "" {
		return ""
	}
	return c.ReportPath(st.AttestationReport)
}

// CleanupPath is the path of the campaign's latest cleanup report since
// its latest generation began ("" for none).
func (h *Harness) CleanupPath(id string) string {
	c, err := h.open(id)
	if err != nil {
		return ""
	}
	defer c.Close()
	st, err := c.Read()
	if err != nil || st.CleanupReport == "" {
		return ""
	}
	return c.ReportPath(st.CleanupReport)
}

// Orphans lists the root's orphans.
func (h *Harness) Orphans(ctx context.Context) ([]adapter.Orphan, error) {
	return h.Adapter.Orphans(ctx, h.Root)
}

// RemoveOrphan removes one orphan of the root.
func (h *Harness) RemoveOrphan(ctx context.Context, id string) (cleanup.Outcome, error) {
	return h.Adapter.RemoveOrphan(ctx, h.Root, id)
}

// OpenJournal opens (making its directory when missing) the campaign's
// journal for appending, as a bring-up does.
func (h *Harness) OpenJournal(t testing.TB, id string) *campaign.Journal {
	t.Helper()
	c, err := h.Root.Create(id)
	if err != nil {
		t.Fatal(err)
	}
	// Open while the journal is: a new campaign's directory is put in
	// place by its first record (store.Root.Create).
	t.Cleanup(func() { c.Close() })
	j, err := c.OpenJournal()
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// ReadJournal reads the journal at path (never following a link), for
// tests that watch a journal grow while another process writes it.
func ReadJournal(path string) ([]campaign.Record, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c, err := campaign.ReadJournal(f, path)
	return c.Records, err
}

// Plan is the plan a bring-up of spec in this root makes (its agent ids
// keyed under the root's secret), unbound: the names it will use.
func (h *Harness) Plan(t testing.TB, spec campaign.CampaignSpec) *campaign.Plan {
	t.Helper()
	p, err := h.plan(spec)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Claim binds task to a workspace of the campaign's pool.
func (h *Harness) Claim(ctx context.Context, id, task, attempt string) (adapter.Claimed, error) {
	c, err := h.open(id)
	if err != nil {
		return adapter.Claimed{}, err
	}
	defer c.Close()
	return h.Adapter.Claim(ctx, c, task, attempt, adapter.AttestOptions{})
}

// Refill refills the campaign's pool.
func (h *Harness) Refill(ctx context.Context, id string) (int, error) {
	c, err := h.open(id)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return h.Adapter.Refill(ctx, c, adapter.AttestOptions{})
}

// Expire removes the campaign when its lifetime is over at now, as
// agentpen serve's timer does.
func (h *Harness) Expire(ctx context.Context, id string, now time.Time) (adapter.Reconciled, error) {
	c, err := h.open(id)
	if err != nil {
		return adapter.Reconciled{}, err
	}
	defer c.Close()
	return h.Adapter.Reconcile(ctx, c, adapter.ReconcileOptions{Now: now, ExpiryOnly: true, LockWait: store.DefaultLockWait})
}
