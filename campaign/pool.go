package campaign

import (
	"fmt"
	"slices"
	"strconv"
	"time"
)

// MaxPoolSlots bounds the pooled workspaces one generation may make
// (claimed and ready together): each holds a uid block of the daemon's
// UIDBlocks while it lives.
const MaxPoolSlots = 512

// A pool (CampaignSpec.Pool) is workspaces made ahead of their task:
// slot n is workspaces[0] without its task (the template), under an agent
// id of its own, numbered len(Workspaces)+n, labelled LabelPoolSlot. It
// starts unbound (package workbench/bind: every reset refused) and is
// bound once, when a claim writes its bind file and journals OpClaim. A
// claimed slot is never claimed again; it goes with its campaign.

// checkPool refuses a pool the plan cannot make.
func checkPool(p *Plan, spec CampaignSpec, most int, errs *errList) {
	switch {
	case spec.Pool == 0:
		return
	case spec.Pool < 0 || spec.Pool > most:
		errs.add(invalid("pool", strconv.Itoa(spec.Pool), "need 0..%d pooled workspaces", most))
	case p.Topology != TopologyNone:
		errs.add(invalid("pool", strconv.Itoa(spec.Pool), `a pool needs the default topology (egress "internal", server.agent_reachable false): a pooled workspace has no network of its own`))
	case len(spec.Workspaces) == 0:
	case len(spec.Workspaces[0].Command) != 0:
		errs.add(invalid("pool", strconv.Itoa(spec.Pool), "pooled workspaces are made like workspaces[0], which must run the workbench (no command) to be bound at claim time"))
	case spec.Workspaces[0].WorkspaceHostPath != "":
		errs.add(invalid("pool", strconv.Itoa(spec.Pool), "pooled workspaces are made like workspaces[0], whose workspace_host_path they would share"))
	}
}

// PoolAgent is the plan of pooled workspace slot n: workspaces[0]
// without its task or attempt, under an agent id keyed by the slot (no
// task id is empty, so it is no spec workspace's), at index
// len(Workspaces)+n. It is false when the plan has no pool.
func (p *Plan) PoolAgent(n int) (AgentPlan, bool) {
	if p.Spec.Pool <= 0 || len(p.Spec.Workspaces) == 0 || n < 0 || n >= MaxPoolSlots {
		return AgentPlan{}, false
	}
	ws := p.Spec.Workspaces[0]
	ws.TaskID, ws.AttemptID = "", ""
	var errs errList
	i := len(p.Spec.Workspaces) + n
	a, ok := buildAgent(p, p.Spec, i, ws, OpaqueAgentID(p.agentKey, p.CampaignID, "", "pool-"+strconv.Itoa(n)), &errs)
	if !ok || len(errs) > 0 {
		return AgentPlan{}, false
	}
	if id, pinned := p.Images[ws.Image]; pinned {
		a.Spec.Image = id
	}
	a.Labels[LabelInstance] = p.Instance
	if p.Instance == "" {
		delete(a.Labels, LabelInstance)
	}
	a.Labels[LabelPoolSlot] = strconv.Itoa(n)
	a.Pool = true
	return a, true
}

// AddPool appends the plans of pool slots to p.Agents (each once), for
// a bring-up, a refill, an attestation or the proxy.
func (p *Plan) AddPool(slots []int) error {
	for _, n := range slots {
		if slices.ContainsFunc(p.Agents, func(a AgentPlan) bool { return a.Pool && a.Index == len(p.Spec.Workspaces)+n }) {
			continue
		}
		a, ok := p.PoolAgent(n)
		if !ok {
			return fmt.Errorf("pool slot %d: the campaign's spec makes no such pooled workspace", n)
		}
		p.Agents = append(p.Agents, a)
	}
	return nil
}

// PoolSlot reads a LabelPoolSlot value: the slot, or false.
func PoolSlot(labels map[string]string) (int, bool) {
	v, ok := labels[LabelPoolSlot]
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n >= MaxPoolSlots || strconv.Itoa(n) != v {
		return 0, false
	}
	return n, true
}

// Slot is one pooled workspace of the latest generation, as the journal
// tells it.
type Slot struct {
	N    int
	Name string
	// ContainerID is its container's journalled id ("" until created).
	ContainerID string
	// Live: its container was created and not removed.
	Live bool
	// Attested: an attestation that covered it (the whole campaign's, or
	// a refill's naming its slot) passed after it was created.
	Attested bool
	// Claim is its claim (nil: never claimed).
	Claim *Claim
}

// Claim is a task bound to a pooled workspace (OpClaim).
type Claim struct {
	TaskID, AttemptID string
	At                time.Time
}

// Ready reports whether the slot can be claimed: live, attested, never
// claimed.
func (s Slot) Ready() bool { return s.Live && s.Attested && s.Claim == nil }

// foldPool reads the pool slots of generation gen from recs, in slot
// order.
func foldPool(recs []Record, gen int) []Slot {
	var slots []Slot
	at := map[string]int{} // container name -> index in slots
	for _, r := range recs {
		if r.Gen != gen {
			continue
		}
		switch r.Op {
		case OpIntent:
			if r.Kind != KindContainer || r.Role != RoleWork {
				continue
			}
			if n, ok := PoolSlot(r.Labels); ok {
				at[r.Name] = len(slots)
				slots = append(slots, Slot{N: n, Name: r.Name})
			}
		case OpCreated:
			if i, ok := at[r.Name]; ok && r.Kind == KindContainer && r.ID != "" && slots[i].ContainerID == "" {
				slots[i].ContainerID, slots[i].Live = r.ID, true
			}
		case OpRemoved:
			for i := range slots {
				if r.Kind == KindContainer && ((r.ID != "" && slots[i].ContainerID == r.ID) || (r.ID == "" && slots[i].ContainerID == "" && slots[i].Name == r.Name)) {
					slots[i].Live = false
				}
			}
		case OpAttested:
			if r.Status != AttestOK {
				continue
			}
			for i := range slots {
				if slots[i].Live && (len(r.Slots) == 0 || slices.Contains(r.Slots, slots[i].N)) {
					slots[i].Attested = true
				}
			}
		case OpClaim:
			if i, ok := at[r.Name]; ok && slots[i].ContainerID == r.ID && slots[i].Claim == nil {
				slots[i].Claim = &Claim{TaskID: r.Task, AttemptID: r.Attempt, At: r.Time}
			}
		}
	}
	slices.SortStableFunc(slots, func(a, b Slot) int { return a.N - b.N })
	return slots
}

// PoolReady are the slots that can be claimed, in slot order.
func (lc Lifecycle) PoolReady() []Slot {
	var out []Slot
	for _, s := range lc.Pool {
		if s.Ready() {
			out = append(out, s)
		}
	}
	return out
}

// PoolPending counts the live slots not claimed and not attested yet (a
// refill in flight, or one that failed).
func (lc Lifecycle) PoolPending() int {
	n := 0
	for _, s := range lc.Pool {
		if s.Live && !s.Attested && s.Claim == nil {
			n++
		}
	}
	return n
}

// NextPoolSlot is the number the next pooled workspace takes: one past
// every slot the latest generation's journal names.
func (lc Lifecycle) NextPoolSlot() int {
	n := 0
	for _, s := range lc.Pool {
		n = max(n, s.N+1)
	}
	return n
}

// PoolSlots are the slot numbers the latest generation's journal names
// in recs (an attestation's or the proxy's plan adds them: AddPool).
func PoolSlots(recs []Record) []int {
	gens := Generations(recs)
	if len(gens) == 0 {
		return nil
	}
	var out []int
	for _, r := range gens[len(gens)-1].Resources {
		if r.Kind != KindContainer || r.Role != RoleWork || r.Dropped {
			continue // a dropped slot is no longer the campaign's
		}
		if n, ok := PoolSlot(r.Labels); ok && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}
