// Package lifecycletest holds the journal shapes every reader of a
// campaign's state is tested on: the records bring-up, attestation and
// removal write, for each lifecycle a campaign can be in, with the status
// campaign.Fold must read from them. campaign's own table test, and the
// test that drives agentpen ls, the launcher API and agentpen attest over
// the same journals, both use Shapes, so the readers cannot drift apart.
// Test-only.
package lifecycletest

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/agentpen/agentpen/campaign"
)

// Image is the image id of the shapes' specs (nothing is pulled or made).
var Image = "sha256:" + strings.Repeat("cd", 32)

// Spec is a valid spec of campaign id: one grader and two workspaces, on
// the default topology (no network).
func Spec(id string) campaign.CampaignSpec {
	return campaign.CampaignSpec{CampaignID: id, Server: campaign.ServerSpec{Image: Image},
		Workspaces: []campaign.WorkspaceSpec{{TaskID: "software/median@1", Image: Image}, {TaskID: "sql/top_customer@2", Image: Image}}}
}

// History builds a campaign's journal as agentpen writes it.
type History struct {
	spec    campaign.CampaignSpec
	opts    campaign.PlanOptions
	runRoot string
	// Records are the journal's, in order.
	Records []campaign.Record
	// live are the ids each generation created, by role, for removals.
	live map[int]map[string][]campaign.Record
}

// New starts the history of a campaign of spec, planned with opts (the
// state root's agent key), whose run directories are made under runRoot.
func New(spec campaign.CampaignSpec, opts campaign.PlanOptions, runRoot string) *History {
	return &History{spec: spec, opts: opts, runRoot: runRoot, live: map[int]map[string][]campaign.Record{}}
}

func (h *History) add(rs ...campaign.Record) *History { h.Records = append(h.Records, rs...); return h }

// Begin opens generation gen and creates, as bring-up does, the grader's
// socket directory, the grader, and each workspace's run directory and
// container (with its uid block label).
func (h *History) Begin(gen int) *History {
	p, err := campaign.NewPlanWith(h.spec, h.opts)
	if err != nil {
		panic(err)
	}
	instance := fmt.Sprintf("%032x", gen)
	p.Bind(gen, instance)
	h.add(campaign.Record{Op: campaign.OpBegin, Gen: gen, Instance: instance})
	created := map[string][]campaign.Record{}
	create := func(kind campaign.Kind, role, name, id string, labels map[string]string) {
		h.add(campaign.Record{Op: campaign.OpIntent, Gen: gen, Kind: kind, Role: role, Name: name, Labels: labels})
		r := campaign.Record{Op: campaign.OpCreated, Gen: gen, Kind: kind, Role: role, Name: name, ID: id}
		h.add(r)
		created[role] = append(created[role], r)
	}
	root := filepath.Join(h.runRoot, "i-"+instance[:16])
	create(campaign.KindDir, campaign.RoleServer, filepath.Join(root, "grader"), filepath.Join(root, "grader"), nil)
	create(campaign.KindContainer, campaign.RoleServer, p.Server.Name, fmt.Sprintf("%064x", gen*1000), p.Server.Labels)
	for i, ag := range p.Agents {
		dir := filepath.Join(root, ag.AgentID)
		create(campaign.KindDir, campaign.RoleWork, dir, dir, nil)
		p.SetUIDBlock(i, campaign.UIDBlockFirst+(gen*8+i)*campaign.UIDBlockSize)
		create(campaign.KindContainer, campaign.RoleWork, ag.Name, fmt.Sprintf("%064x", gen*1000+i+1), ag.Labels)
	}
	h.live[gen] = created
	return h
}

// BeginOnly opens generation gen and creates nothing (a bring-up killed
// before its first create).
func (h *History) BeginOnly(gen int) *History {
	return h.add(campaign.Record{Op: campaign.OpBegin, Gen: gen, Instance: fmt.Sprintf("%032x", gen)})
}

// Op appends a record of op for generation gen.
func (h *History) Op(op campaign.Op, gen int) *History {
	return h.add(campaign.Record{Op: op, Gen: gen})
}

// Attested appends an attestation's verdict (status) for generation gen.
func (h *History) Attested(gen int, status string) *History {
	return h.add(campaign.Record{Op: campaign.OpAttested, Gen: gen, Status: status, Report: fmt.Sprintf("attestation-%d-1.json", gen), Digest: "d"})
}

// Removal appends the start of a removal for reason.
func (h *History) Removal(reason string) *History {
	return h.add(campaign.Record{Op: campaign.OpRemovalStarted, Reason: reason})
}

// Removed journals generation gen's resources of role removed ("" for
// every one).
func (h *History) Removed(gen int, role string) *History {
	for r, recs := range h.live[gen] {
		if role != "" && r != role {
			continue
		}
		for _, c := range recs {
			h.add(campaign.Record{Op: campaign.OpRemoved, Gen: gen, Kind: c.Kind, Role: c.Role, Name: c.Name, ID: c.ID})
		}
	}
	return h
}

// Cleanup appends a cleanup's verdict.
func (h *History) Cleanup(status string) *History {
	return h.add(campaign.Record{Op: campaign.OpCleanup, Status: status, Report: "cleanup-1-1.json", Digest: "d"})
}

// RolledBack appends a bring-up's failure.
func (h *History) RolledBack(gen int) *History {
	return h.add(campaign.Record{Op: campaign.OpRolledBack, Gen: gen, Note: "create x: boom; rolled back"})
}

// Orphan journals and removes an orphan of generation gen.
func (h *History) Orphan(gen int) *History {
	id := fmt.Sprintf("%064x", 999999)
	return h.add(campaign.Record{Op: campaign.OpOrphan, Gen: gen, Kind: campaign.KindContainer, Name: "x", ID: id},
		campaign.Record{Op: campaign.OpRemoved, Gen: gen, Kind: campaign.KindContainer, ID: id})
}

// Note appends prose.
func (h *History) Note(text string) *History {
	return h.add(campaign.Record{Op: campaign.OpNote, Note: text})
}

// Shape is one lifecycle: how its journal is built, the status it reads
// as, and a part of the reason a campaign in it is not up ("" for one
// that is up).
type Shape struct {
	Name   string
	Build  func(*History)
	Want   campaign.Status
	Reason string
}

// Shapes are every journal shape the state tables of ls, the API and
// attest covered before they were one, and one per typed op.
var Shapes = []Shape{
	// A journal without a generation is what it is, never removed: a
	// create that stopped before its first record (or only a note).
	{"no_generation", func(h *History) { h.Note("nothing yet") }, campaign.StatusEmpty, "holds no generation"},
	{"empty_journal", func(*History) {}, campaign.StatusEmpty, "holds no generation"},
	// Begun and killed before its first create: a bring-up that stopped,
	// which reconcile rolls back, never removed without a why.
	{"killed_before_first_create", func(h *History) { h.BeginOnly(1) }, campaign.StatusStartingOrFailed, "never became ready"},
	{"ready", func(h *History) { h.Begin(1).Op(campaign.OpReady, 1) }, campaign.StatusReady, ""},
	{"attested_ok", func(h *History) { h.Begin(1).Op(campaign.OpAttesting, 1).Attested(1, campaign.AttestOK) }, campaign.StatusReady, ""},
	{"attested_failed", func(h *History) { h.Begin(1).Op(campaign.OpAttesting, 1).Attested(1, campaign.AttestFailed) }, campaign.StatusAttestationFailed, ""},
	{"later_attest_failed", func(h *History) {
		h.Begin(1).Op(campaign.OpAttesting, 1).Attested(1, campaign.AttestOK).Attested(1, campaign.AttestFailed)
	}, campaign.StatusAttestationFailed, ""},
	{"attest_passed_again", func(h *History) {
		h.Begin(1).Op(campaign.OpAttesting, 1).Attested(1, campaign.AttestFailed).Attested(1, campaign.AttestOK)
	}, campaign.StatusReady, ""},
	{"ready_then_attested_failed", func(h *History) { h.Begin(1).Op(campaign.OpReady, 1).Attested(1, campaign.AttestFailed) }, campaign.StatusAttestationFailed, ""},
	{"killed_create", func(h *History) { h.Begin(1) }, campaign.StatusStartingOrFailed, "never became ready"},
	// Killed between readiness and its attestation's verdict: never
	// served (it read as ready, unattested, with working base_urls).
	{"killed_attesting", func(h *History) { h.Begin(1).Op(campaign.OpAttesting, 1) }, campaign.StatusStartingOrFailed, "stopped while it was being attested"},
	// A down killed before it journalled any removal.
	{"removal_started", func(h *History) {
		h.Begin(1).Op(campaign.OpAttesting, 1).Attested(1, campaign.AttestOK).Removal(campaign.ReasonDown)
	}, campaign.StatusCleanupFailed, "is being removed"},
	{"removal_interrupted", func(h *History) { h.Begin(1).Op(campaign.OpReady, 1).Removed(1, campaign.RoleServer) }, campaign.StatusCleanupFailed, "is being removed"},
	{"cleanup_failed", func(h *History) {
		h.Begin(1).Op(campaign.OpReady, 1).Removal(campaign.ReasonDelete).Removed(1, campaign.RoleServer).Cleanup(campaign.CleanupFailed)
	}, campaign.StatusCleanupFailed, "its cleanup failed"},
	{"cleanup_failed_nothing_live", func(h *History) {
		h.Begin(1).Op(campaign.OpReady, 1).Removal(campaign.ReasonDown).Removed(1, "").Cleanup(campaign.CleanupFailed)
	}, campaign.StatusCleanupFailed, "its cleanup failed"},
	{"removed", func(h *History) {
		h.Begin(1).Op(campaign.OpReady, 1).Removal(campaign.ReasonDown).Removed(1, "").Cleanup(campaign.CleanupVerified)
	}, campaign.StatusRemoved, "was removed (cleanup verified)"},
	{"removed_unjournalled_cleanup", func(h *History) { h.Begin(1).Op(campaign.OpReady, 1).Removal(campaign.ReasonDown).Removed(1, "") },
		campaign.StatusRemoved, "every resource of it is journalled removed"},
	{"not_attested_removed", func(h *History) {
		h.Begin(1).Op(campaign.OpAttesting, 1).Attested(1, campaign.AttestFailed).Removal(campaign.ReasonNotAttested).Removed(1, "").Cleanup(campaign.CleanupVerified)
	}, campaign.StatusRemoved, "did not attest and was removed"},
	{"rolled_back", func(h *History) {
		h.Begin(1).Removal(campaign.ReasonRollback).Removed(1, "").Cleanup(campaign.CleanupVerified).RolledBack(1)
	}, campaign.StatusRemoved, "failed to come up and was rolled back (cleanup verified)"},
	{"rollback_not_verified", func(h *History) {
		h.Begin(1).Removal(campaign.ReasonRollback).Removed(1, campaign.RoleServer).Cleanup(campaign.CleanupFailed).RolledBack(1)
	}, campaign.StatusCleanupFailed, "its cleanup failed"},
	// A failed cleanup of generation 1 says nothing of generation 2.
	{"earlier_cleanup_failed", func(h *History) {
		h.Begin(1).Op(campaign.OpReady, 1).Removed(1, "").Cleanup(campaign.CleanupFailed).Begin(2).Op(campaign.OpReady, 2)
	}, campaign.StatusReady, ""},
	{"earlier_generation_live", func(h *History) { h.Begin(1).Op(campaign.OpReady, 1).Begin(2).Op(campaign.OpReady, 2) }, campaign.StatusCleanupFailed, "an earlier generation"},
	{"earlier_attestation_failed", func(h *History) {
		h.Begin(1).Op(campaign.OpAttesting, 1).Attested(1, campaign.AttestFailed).Removed(1, "").Cleanup(campaign.CleanupVerified).Begin(2).Op(campaign.OpReady, 2)
	}, campaign.StatusReady, ""},
	// An orphan of the generation removed (agentpen orphans --remove) is
	// not a removal of the campaign.
	{"orphan_removed", func(h *History) { h.Begin(1).Op(campaign.OpReady, 1).Orphan(1) }, campaign.StatusReady, ""},
	{"note_is_prose", func(h *History) { h.Begin(1).Op(campaign.OpReady, 1).Note("removal started") }, campaign.StatusReady, ""},
}
