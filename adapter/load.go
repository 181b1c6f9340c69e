package adapter

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentpen/agentpen/campaign"
)

// ErrNotUp is returned (wrapped) by Load for a campaign whose latest
// generation is not up: its bring-up never reached readiness, or it was
// removed.
var ErrNotUp = errors.New("campaign is not up")

// Load rebuilds a campaign that is up from its state directory alone (the
// spec, and the ids the journal recorded for its latest generation), so a
// process that did not bring it up (agentpen serve after a restart, or
// serving a campaign agentpen up made) can reach its workspaces. It talks
// to no daemon: whether the containers still run is the attestation's and
// the readiness checks' to say. It fills Plan (bound to the generation,
// with each workspace's uid block from its journalled labels), Dir,
// ServerID, NetworkIDs (in agent order), GraderDir and Workspaces.
func (a *Adapter) Load(campaignID string) (*Campaign, error) {
	if err := campaign.CheckID("campaign_id", campaignID); err != nil {
		return nil, err
	}
	dir, err := a.campaignDir(campaignID, false)
	if err != nil {
		return nil, err
	}
	if _, err := os.Lstat(filepath.Join(dir, campaign.JournalFile)); err != nil {
		return nil, fmt.Errorf("campaign %q: %w: no journal in %s", campaignID, ErrNoCampaign, dir)
	}
	st := readCampaignState(dir)
	if st.Err != nil {
		return nil, fmt.Errorf("campaign %q: %w", campaignID, st.Err)
	}
	g := st.Latest()
	if !st.Ready || len(g.Live()) == 0 {
		return nil, fmt.Errorf("campaign %q generation %d: %w", campaignID, g.N, ErrNotUp)
	}
	b, err := os.ReadFile(filepath.Join(dir, SpecFile))
	if err != nil {
		return nil, fmt.Errorf("campaign %q: %w", campaignID, err)
	}
	var spec campaign.CampaignSpec
	if err := json.Unmarshal(b, &spec); err != nil {
		return nil, fmt.Errorf("campaign %q: %s: %w", campaignID, SpecFile, err)
	}
	p, err := campaign.NewPlan(spec)
	if err != nil {
		return nil, fmt.Errorf("campaign %q: %s: %w", campaignID, SpecFile, err)
	}
	p.Bind(g.N, g.Instance)
	c := &Campaign{Plan: p, Dir: dir}
	containers, dirs, networks := map[string]string{}, map[string]string{}, map[string]string{}
	blocks := map[string]string{}
	for _, r := range g.Live() {
		if r.ID == "" {
			continue
		}
		switch {
		case r.Kind == campaign.KindNetwork:
			networks[r.Name] = r.ID
		case r.Kind == campaign.KindContainer && r.Role == campaign.RoleServer:
			c.ServerID = r.ID
		case r.Kind == campaign.KindContainer:
			containers[r.Name] = r.ID
			blocks[r.Name] = r.Labels[campaign.LabelUIDBlock]
		case r.Kind == campaign.KindDir && r.Role == campaign.RoleServer:
			c.GraderDir = r.ID
		case r.Kind == campaign.KindDir:
			dirs[filepath.Base(r.ID)] = r.ID
		}
	}
	if p.Topology == campaign.TopologyNone && c.GraderDir == "" {
		return nil, fmt.Errorf("campaign %q generation %d: %w: the grader's socket directory is not in the journal", campaignID, g.N, ErrNotUp)
	}
	for i, ag := range p.Agents {
		id, dir := containers[ag.Name], dirs[ag.AgentID]
		if id == "" || dir == "" {
			return nil, fmt.Errorf("campaign %q generation %d: workspace %s: %w: its container or run directory is not in the journal", campaignID, g.N, ag.AgentID, ErrNotUp)
		}
		base, ok := campaign.ParseUIDBlock(blocks[ag.Name])
		if !ok {
			return nil, fmt.Errorf("campaign %q generation %d: workspace %s: %w: its journalled labels carry no uid block", campaignID, g.N, ag.AgentID, ErrNotUp)
		}
		p.SetUIDBlock(i, base)
		if ag.Network != "" {
			nid := networks[ag.Network]
			if nid == "" {
				return nil, fmt.Errorf("campaign %q generation %d: workspace %s: %w: its network %s is not in the journal", campaignID, g.N, ag.AgentID, ErrNotUp, ag.Network)
			}
			c.NetworkIDs = append(c.NetworkIDs, nid)
		}
		c.Workspaces = append(c.Workspaces, Workspace{AgentID: ag.AgentID, ContainerID: id, RunDir: dir, Socket: filepath.Join(dir, filepath.Base(campaign.WorkbenchSocket)), UIDBase: base})
	}
	return c, nil
}
