package adapter

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

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
	// LastCleanup is the status of the last cleanup ("verified",
	// "failed"; "" for none).
	LastCleanup string
	// LastCleanupGen is the latest generation begun when the last cleanup
	// was journalled (0 for none): the last cleanup came after the latest
	// generation began when it equals Latest().N.
	LastCleanupGen int
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

// Campaigns reads every campaign journal in the state root, sorted by
// campaign id. It talks to no daemon.
func (a *Adapter) Campaigns() ([]CampaignState, error) {
	root := filepath.Join(a.StateRoot, "campaigns")
	entries, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state root: %w", err)
	}
	var out []CampaignState
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(root, e.Name())
		st, err := readCampaignState(dir)
		if errors.Is(err, os.ErrNotExist) {
			continue // a directory without a journal is not a campaign
		}
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(x, y CampaignState) int { return strings.Compare(x.CampaignID, y.CampaignID) })
	return out, nil
}

func readCampaignState(dir string) (CampaignState, error) {
	recs, err := campaign.ReadJournal(filepath.Join(dir, campaign.JournalFile))
	if err != nil {
		return CampaignState{}, err
	}
	st := CampaignState{Dir: dir, Generations: campaign.Generations(recs)}
	var spec struct {
		CampaignID string `json:"campaign_id"`
	}
	if b, err := os.ReadFile(filepath.Join(dir, "campaign.json")); err == nil && json.Unmarshal(b, &spec) == nil {
		st.CampaignID = spec.CampaignID
	}
	if st.CampaignID == "" {
		st.CampaignID = filepath.Base(dir) // the key; the spec is missing
	}
	latest := st.Latest().N
	begun := 0
	for _, r := range recs {
		if r.Op == campaign.OpBegin {
			begun = max(begun, r.Gen)
		}
		if r.Op != campaign.OpNote {
			continue
		}
		switch {
		case r.Note == "ready" && r.Gen == latest:
			st.Ready = true
		case strings.HasPrefix(r.Note, "cleanup "):
			st.LastCleanup = strings.TrimPrefix(r.Note, "cleanup ")
			st.LastCleanupGen = begun
		}
	}
	return st, nil
}

// State reads one campaign's journal in the state root; the error wraps
// ErrNoCampaign when the state root has none. It talks to no daemon, and
// reads the files on every call: another process may change them.
func (a *Adapter) State(campaignID string) (CampaignState, error) {
	if err := campaign.CheckID("campaign_id", campaignID); err != nil {
		return CampaignState{}, err
	}
	dir := a.CampaignDir(campaignID)
	st, err := readCampaignState(dir)
	if errors.Is(err, os.ErrNotExist) {
		return CampaignState{}, noCampaign(campaignID, dir)
	}
	return st, err
}
