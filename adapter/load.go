package adapter

import (
	"context"
	"fmt"
	"net"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/store"
)

// Load rebuilds a campaign that is up (campaign.Status.Up) from its state
// directory alone (the spec, and the ids the journal recorded for its
// latest generation), so a process that did not bring it up (agentpen
// serve after a restart, or serving a campaign agentpen up made) can reach
// its workspaces. It talks to no runtime: whether the containers still
// run is the attestation's and the readiness checks' to say. It fills Plan
// (bound to the generation, with each workspace's uid block from its
// journalled labels), Dir, ServerID, NetworkIDs (in agent order) and
// Workspaces (each with the driver's handle on it).
func (a *Adapter) Load(c *store.Campaign) (*Campaign, error) {
	st, err := c.Read()
	if err != nil {
		return nil, fmt.Errorf("campaign %q: %w", c.ID, err)
	}
	if err := a.runtimeOf(c, st.Generations); err != nil {
		return nil, err
	}
	g := st.Latest()
	if !st.Status.Up() {
		return nil, fmt.Errorf("campaign %q generation %d: %w: %s", c.ID, g.N, ErrNotUp, st.Reason(c.ID))
	}
	p, err := planOf(c, g)
	if err != nil {
		return nil, err
	}
	// Claimed pooled workspaces are served, bound to their claims' tasks;
	// unclaimed ones are not (they have no task yet).
	claims := map[int]*campaign.Claim{} // by pool slot: a driver names a slot's container its own way
	var claimed []int
	for _, s := range st.Pool {
		if s.Live && s.Claim != nil {
			claimed = append(claimed, s.N)
			claims[s.N] = s.Claim
		}
	}
	if err := p.AddPool(claimed); err != nil {
		return nil, fmt.Errorf("campaign %q: %w", c.ID, err)
	}
	out := &Campaign{Plan: p, Dir: c.Path}
	live := g.Live()
	networks, blocks := map[string]string{}, map[string]string{}
	for _, r := range live {
		if r.ID == "" || r.Orphan {
			continue
		}
		switch {
		case r.Role == campaign.RoleNetwork:
			networks[r.Name] = r.ID
		case r.Kind == campaign.KindContainer && r.Role == campaign.RoleServer:
			out.ServerID = r.ID
		case r.Kind == campaign.KindContainer:
			// By its agent label: a driver names its containers its own
			// way (a cluster's "<namespace>/<agent id>").
			blocks[r.Labels[campaign.LabelAgent]] = r.Labels[campaign.LabelUIDBlock]
		}
	}
	for i, ag := range p.Agents {
		h, err := a.Driver.Workspace(ag, live)
		if err != nil || h.ID == "" {
			return nil, fmt.Errorf("campaign %q generation %d: workspace %s: %w: its container or run directory is not in the journal", c.ID, g.N, ag.AgentID, ErrNotUp)
		}
		base, ok := campaign.ParseUIDBlock(blocks[ag.AgentID])
		if !ok {
			return nil, fmt.Errorf("campaign %q generation %d: workspace %s: %w: its journalled labels carry no uid block", c.ID, g.N, ag.AgentID, ErrNotUp)
		}
		p.SetUIDBlock(i, base)
		if ag.Network != "" {
			nid := networks[ag.Network]
			if nid == "" {
				return nil, fmt.Errorf("campaign %q generation %d: workspace %s: %w: its network %s is not in the journal", c.ID, g.N, ag.AgentID, ErrNotUp, ag.Network)
			}
			out.NetworkIDs = append(out.NetworkIDs, nid)
		}
		task := ag.Spec.TaskID
		if cl := claims[ag.Index-len(p.Spec.Workspaces)]; ag.Pool && cl != nil {
			task = cl.TaskID
		}
		out.Workspaces = append(out.Workspaces, workspace(p.Agents[i], task, h))
	}
	return out, nil
}

// planOf is the plan of c's generation g, from its spec, bound to it.
func planOf(c *store.Campaign, g campaign.Generation) (*campaign.Plan, error) {
	p, err := specPlan(c, g.N)
	if err != nil {
		return nil, err
	}
	p.Bind(g.N, g.Instance)
	if err := p.Pin(g.Images); err != nil {
		return nil, fmt.Errorf("campaign %q: %s: %w", c.ID, c.SpecPath(g.N), err)
	}
	return p, nil
}

// specPlan is the plan of c's generation n, from its spec and the state
// root's plan options, not yet bound.
func specPlan(c *store.Campaign, n int) (*campaign.Plan, error) {
	spec, err := c.Spec(n)
	if err != nil {
		return nil, err
	}
	opts, err := c.PlanOptions()
	if err != nil {
		return nil, err
	}
	p, err := campaign.NewPlanWith(spec, opts)
	if err != nil {
		return nil, fmt.Errorf("campaign %q: %s: %w", c.ID, c.SpecPath(n), err)
	}
	return p, nil
}

// Workspaces describes the latest generation's workspaces the driver can
// still reach (a Docker workspace's run directory not recorded removed),
// the spec's in its order, then the claimed pooled ones by slot, from the
// state directory alone (agentpen ls --json, the results collector, the
// lifetime's idle time): each with its index, agent id, task, container id
// (empty once the container is removed) and socket. It talks to no
// runtime.
func (a *Adapter) Workspaces(c *store.Campaign, st store.State) ([]Workspace, error) {
	g := st.Latest()
	if g.N == 0 {
		return nil, nil
	}
	p, err := specPlan(c, g.N)
	if err != nil {
		return nil, err
	}
	// Claimed pooled workspaces are a campaign's workspaces too, bound to
	// their claims' tasks; unclaimed ones are not (they have no task).
	claims := map[int]*campaign.Claim{} // by pool slot: a driver names a slot's container its own way
	var claimed []int
	for _, s := range st.Pool {
		if s.Claim != nil {
			claimed = append(claimed, s.N)
			claims[s.N] = s.Claim
		}
	}
	if err := p.AddPool(claimed); err != nil {
		return nil, fmt.Errorf("campaign %q: %w", c.ID, err)
	}
	live := g.Live()
	var out []Workspace
	for _, ag := range p.Agents {
		h, err := a.Driver.Workspace(ag, live)
		if err != nil {
			continue
		}
		task := ag.Spec.TaskID
		if cl := claims[ag.Index-len(p.Spec.Workspaces)]; ag.Pool && cl != nil {
			task = cl.TaskID
		}
		out = append(out, workspace(ag, task, h))
	}
	return out, nil
}

// Dial connects to ws's episode server (HTTP over the connection), the
// way its driver reaches it.
func (a *Adapter) Dial(ctx context.Context, ws Workspace) (net.Conn, error) {
	return a.Driver.Dial(ctx, ws.Handle)
}
