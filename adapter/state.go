package adapter

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/campaign"
)

// CampaignState is what a state root's journal says of one campaign.
type CampaignState struct {
	CampaignID string
	Dir        string
	// Generations are the journal's, oldest first.
	Generations []campaign.Generation
	// Ready is true when the latest generation reached readiness.
	Ready bool
	// LastCleanup is the status of the latest generation's last cleanup
	// or rollback ("verified", "failed"; "" for none since it began).
	LastCleanup string
	// RemovalStarted is true when a removal of one of the latest
	// generation's resources was journalled after it was ready (a down
	// that did not finish, or one that was killed).
	RemovalStarted bool
	// BringUpFailed is true when the latest generation's bring-up failed
	// (and was rolled back); AttestFailed when its bring-up's attestation
	// failed (the campaign is then removed unless kept for debugging).
	BringUpFailed, AttestFailed bool
	// AttestPending is true when the latest generation's bring-up began
	// its attestation (BringUpAttested) and journalled no verdict: one
	// killed (or still running) between readiness and its report.
	AttestPending bool
	// Torn is the journal's final line without its newline, a write that
	// did not complete, which reading ignored (nil for none); the next
	// agentpen down or up of the campaign cuts it.
	Torn *campaign.TornTail
	// Err says why the campaign's state cannot be used: a corrupt journal
	// (campaign.ErrJournalCorrupt), a directory or journal another user
	// owns or can write (campaign.ErrUntrusted), or one that cannot be
	// read. The other fields then hold what could be read, for listing
	// only; Ready is false.
	Err error
}

// Up reports whether the latest generation is up: it reached readiness,
// its bring-up's attestation (if it ran one) reached a verdict, no
// removal of it began, it has resources not removed, and the state is
// sound. (One that is up may still be broken: containers gone from the
// daemon.)
func (s CampaignState) Up() bool {
	return s.Err == nil && s.Ready && !s.AttestPending && !s.RemovalStarted && s.LastCleanup == "" && len(s.Latest().Live()) > 0
}

// Latest returns the newest generation (the zero Generation for none).
func (s CampaignState) Latest() campaign.Generation {
	if len(s.Generations) == 0 {
		return campaign.Generation{}
	}
	return s.Generations[len(s.Generations)-1]
}

// Live returns the resources of every generation not yet removed.
func (s CampaignState) Live() []campaign.Resource {
	var out []campaign.Resource
	for _, g := range s.Generations {
		out = append(out, g.Live()...)
	}
	return out
}

// WorkspaceSocket is one workspace's episode server socket on the host.
type WorkspaceSocket struct {
	AgentID string `json:"agent_id"`
	Socket  string `json:"socket"`
}

// Sockets returns the workbench sockets of the latest generation's
// workspaces whose run directory is not removed, in creation order: the
// socket is <run directory>/wb.sock (the bind mount of
// campaign.WorkbenchSocket), the agent id the directory's name.
func (s CampaignState) Sockets() []WorkspaceSocket {
	var out []WorkspaceSocket
	for _, r := range s.Latest().Live() {
		if r.Kind == campaign.KindDir && r.Role == campaign.RoleWork && r.ID != "" {
			out = append(out, WorkspaceSocket{AgentID: filepath.Base(r.ID), Socket: filepath.Join(r.ID, filepath.Base(campaign.WorkbenchSocket))})
		}
	}
	return out
}

// ErrStateRoot is the kind of error (wrapped) for a state root agentpen
// cannot use: not a directory, unreadable, or writable by other users
// (then also a *campaign.TrustError).
var ErrStateRoot = errors.New("unusable state root")

// campaignsDir returns the directory of the campaigns' state directories,
// <state root>/campaigns, after checking the state root is a directory
// and both are private to this user (campaign.CheckPrivate); with create,
// both are made (0700) when missing. A state root that does not exist is
// no error (it holds no campaign).
func (a *Adapter) campaignsDir(create bool) (string, error) {
	root := a.StateRoot
	dir := filepath.Join(root, "campaigns")
	if create {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return "", fmt.Errorf("%w %s: %v (--state-root names the directory that holds the campaigns' state)", ErrStateRoot, root, errors.Unwrap(err))
		}
	}
	fi, err := os.Stat(root)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return dir, nil
	case err != nil:
		return "", fmt.Errorf("%w %s: %v (--state-root names the directory that holds the campaigns' state)", ErrStateRoot, root, errors.Unwrap(err))
	case !fi.IsDir():
		return "", fmt.Errorf("%w %s: not a directory (--state-root names the directory that holds the campaigns' state)", ErrStateRoot, root)
	}
	if err := campaign.CheckPrivate("state root", root, fi, true); err != nil {
		return "", fmt.Errorf("%w: %w", ErrStateRoot, err)
	}
	fi, err = os.Lstat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return dir, nil
	case err != nil:
		return "", fmt.Errorf("%w %s: %v", ErrStateRoot, root, err)
	}
	if err := campaign.CheckPrivate("state root", dir, fi, true); err != nil {
		return "", fmt.Errorf("%w: %w", ErrStateRoot, err)
	}
	return dir, nil
}

// campaignDir is CampaignDir after campaignsDir's checks.
func (a *Adapter) campaignDir(campaignID string, create bool) (string, error) {
	if _, err := a.campaignsDir(create); err != nil {
		return "", err
	}
	return a.CampaignDir(campaignID), nil
}

// Campaigns reads every campaign journal in the state root, sorted by
// campaign id. It talks to no daemon. A campaign whose state cannot be
// used is listed with Err set, never hiding the others; the error is for
// a state root that cannot be used (ErrStateRoot).
func (a *Adapter) Campaigns() ([]CampaignState, error) {
	root, err := a.campaignsDir(false)
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrStateRoot, a.StateRoot, err)
	}
	var out []CampaignState
	for _, e := range entries {
		if !e.IsDir() && e.Type()&fs.ModeSymlink == 0 {
			continue
		}
		// A symbolic link where a campaign's directory belongs is listed
		// (its state untrusted), never skipped: it may hide a campaign.
		st := readCampaignState(filepath.Join(root, e.Name()))
		if errors.Is(st.Err, os.ErrNotExist) {
			continue // a directory without a journal is not a campaign
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(x, y CampaignState) int { return strings.Compare(x.CampaignID, y.CampaignID) })
	return out, nil
}

// readCampaignState reads the campaign's state from its directory; what
// goes wrong is in Err.
func readCampaignState(dir string) CampaignState {
	c, err := campaign.LoadJournal(filepath.Join(dir, campaign.JournalFile))
	st := CampaignState{Dir: dir, Generations: campaign.Generations(c.Records), Torn: c.Torn, Err: err}
	if !errors.Is(err, campaign.ErrUntrusted) {
		// The spec names the campaign (its directory is its key); never
		// read from a directory another user can write.
		var spec struct {
			CampaignID string `json:"campaign_id"`
		}
		if b, err := os.ReadFile(filepath.Join(dir, SpecFile)); err == nil && json.Unmarshal(b, &spec) == nil {
			st.CampaignID = spec.CampaignID
		}
	}
	if st.CampaignID == "" {
		st.CampaignID = filepath.Base(dir) // the key; the spec is missing
	}
	if err != nil {
		return st
	}
	latest := st.Latest().N
	orphans := map[string]bool{} // ids agentpen orphans --remove journalled
	for _, r := range c.Records {
		switch {
		case r.Op == campaign.OpBegin:
			// A cleanup of an earlier generation says nothing of this one.
			st.LastCleanup = ""
		case r.Op == campaign.OpCreated && r.Note == orphanNote:
			orphans[r.ID] = true
		case r.Op == campaign.OpRemoved && r.Gen == latest && st.Ready && r.ID != "" && !orphans[r.ID]:
			st.RemovalStarted = true
		case r.Op != campaign.OpNote:
		case r.Note == noteReady && r.Gen == latest:
			st.Ready = true
		case r.Note == noteReadyAttesting && r.Gen == latest:
			st.Ready, st.AttestPending = true, true
		case (r.Note == noteAttestedOK || r.Note == noteAttestedFailed) && r.Gen == latest:
			st.AttestPending = false
			st.AttestFailed = r.Note == noteAttestedFailed
		case strings.HasPrefix(r.Note, noteBringUpFailed) && r.Gen == latest:
			st.BringUpFailed = true
		case r.Note == noteRemovalStarted && st.Ready:
			// A removal began after the latest generation was ready (a
			// down killed before it journalled any removal included).
			st.RemovalStarted = true
		case strings.HasPrefix(r.Note, "cleanup "):
			st.LastCleanup = strings.TrimPrefix(r.Note, "cleanup ")
		}
	}
	return st
}

// State reads one campaign's journal in the state root; the error wraps
// ErrNoCampaign when the state root has none, and is the state's Err
// (the state is returned with it, for listing) when it cannot be used. It talks to no daemon, and
// reads the files on every call: another process may change them.
func (a *Adapter) State(campaignID string) (CampaignState, error) {
	if err := campaign.CheckID("campaign_id", campaignID); err != nil {
		return CampaignState{}, err
	}
	dir := a.CampaignDir(campaignID)
	st := readCampaignState(dir)
	if errors.Is(st.Err, os.ErrNotExist) {
		return CampaignState{}, noCampaign(campaignID, dir)
	}
	return st, st.Err
}

// LatestAttestation is the stored attestation report of st's latest
// generation: attestation.json in its directory, when it was written
// after that generation began (nil otherwise: none, unreadable, or an
// earlier generation's).
func (st CampaignState) LatestAttestation() *attest.Report {
	b, err := os.ReadFile(filepath.Join(st.Dir, attest.FileName))
	if err != nil {
		return nil
	}
	var rep attest.Report
	if json.Unmarshal(b, &rep) != nil || rep.AttestedAt.Before(st.Latest().Started) {
		return nil
	}
	return &rep
}
