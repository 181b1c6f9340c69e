package campaign

import (
	"slices"
	"strconv"
	"testing"
	"time"
)

func poolSpec() CampaignSpec {
	return CampaignSpec{CampaignID: "pool-test", Server: ServerSpec{Image: "agentpen/workbench:dev"}, Pool: 2,
		Workspaces: []WorkspaceSpec{{TaskID: "software/median@2", Image: "agentpen/workbench:dev"}}}
}

func TestPoolPlan(t *testing.T) {
	p, err := NewPlanWith(poolSpec(), PlanOptions{AgentKey: []byte("k")})
	if err != nil {
		t.Fatal(err)
	}
	a0, ok0 := p.PoolAgent(0)
	a1, ok1 := p.PoolAgent(1)
	if !ok0 || !ok1 || a0.AgentID == a1.AgentID || a0.AgentID == p.Agents[0].AgentID || !a0.Pool || a0.Index != 1 || a1.Index != 2 {
		t.Fatalf("pool agents %+v %+v", a0, a1)
	}
	if a0.Labels[LabelPoolSlot] != "0" || a0.Spec.TaskID != "" || !a0.NeedsKey {
		t.Fatalf("slot 0: labels %v, task %q", a0.Labels, a0.Spec.TaskID)
	}
	if err := p.AddPool([]int{0, 0, 1}); err != nil || len(p.Agents) != 3 {
		t.Fatalf("AddPool: %v, %d agents", err, len(p.Agents))
	}
	for _, bad := range []func(*CampaignSpec){
		func(s *CampaignSpec) { s.Egress = EgressNAT },
		func(s *CampaignSpec) { s.Server.AgentReachable = true },
		func(s *CampaignSpec) { s.Workspaces[0].Command = []string{"sleep", "1"} },
		func(s *CampaignSpec) { s.Workspaces[0].WorkspaceHostPath = "/tmp/x" },
		func(s *CampaignSpec) { s.Pool = MaxWorkspaces + 1 },
	} {
		s := poolSpec()
		bad(&s)
		if _, err := NewPlan(s); err == nil {
			t.Errorf("spec %+v: no error, want pool refused", s)
		}
	}
}

// TestPoolFold: a slot is ready once created and attested (by the whole
// campaign's attestation or a refill's naming it), claimed once, and a
// refill's failed verdict fails the campaign closed while an ok one
// leaves its attestation as it was.
func TestPoolFold(t *testing.T) {
	at := time.Unix(1e9, 0)
	slot := func(n int) []Record {
		name := "ws-pool-" + strconv.Itoa(n)
		return []Record{
			{Op: OpIntent, Gen: 1, Kind: KindContainer, Role: RoleWork, Name: name, Labels: map[string]string{LabelPoolSlot: strconv.Itoa(n)}},
			{Op: OpCreated, Gen: 1, Kind: KindContainer, Role: RoleWork, Name: name, ID: "c" + strconv.Itoa(n)},
		}
	}
	recs := []Record{{Op: OpBegin, Gen: 1, Instance: "i"},
		{Op: OpIntent, Gen: 1, Kind: KindContainer, Role: RoleServer, Name: "srv"}, {Op: OpCreated, Gen: 1, Kind: KindContainer, Role: RoleServer, Name: "srv", ID: "s"}}
	recs = append(recs, slot(0)...)
	recs = append(recs, Record{Op: OpAttesting, Gen: 1}, Record{Op: OpAttested, Gen: 1, Status: AttestOK})
	recs = append(recs, slot(1)...)
	lc := Fold(recs)
	if lc.Status != StatusReady || len(lc.PoolReady()) != 1 || lc.PoolPending() != 1 || lc.NextPoolSlot() != 2 {
		t.Fatalf("before the refill's verdict: %v, ready %v, pending %d", lc.Status, lc.PoolReady(), lc.PoolPending())
	}
	ok := append(append([]Record(nil), recs...), Record{Op: OpAttested, Gen: 1, Status: AttestOK, Slots: []int{1}},
		Record{Op: OpClaim, Gen: 1, Name: "ws-pool-0", ID: "c0", Task: "software/median@2", Attempt: "a", Time: at},
		Record{Op: OpClaim, Gen: 1, Name: "ws-pool-0", ID: "c0", Task: "logs/first_error@1", Time: at})
	lc = Fold(ok)
	if lc.Status != StatusReady || len(lc.PoolReady()) != 1 || lc.PoolReady()[0].N != 1 {
		t.Fatalf("after a claim: %v, ready %v", lc.Status, lc.PoolReady())
	}
	if c := lc.Pool[0].Claim; c == nil || c.TaskID != "software/median@2" || c.AttemptID != "a" {
		t.Fatalf("slot 0's claim %+v, want the first one (a slot is claimed once)", c)
	}
	failed := append(append([]Record(nil), recs...), Record{Op: OpAttested, Gen: 1, Status: AttestFailed, Slots: []int{1}})
	if lc := Fold(failed); lc.Status != StatusAttestationFailed || len(lc.PoolReady()) != 1 {
		t.Fatalf("a refill that did not attest: %v, ready %v; want attestation_failed", lc.Status, lc.PoolReady())
	}
	removed := append(append([]Record(nil), ok...), Record{Op: OpRemoved, Gen: 1, Kind: KindContainer, ID: "c1"})
	if lc := Fold(removed); len(lc.PoolReady()) != 0 {
		t.Fatalf("a removed slot reads ready: %v", lc.PoolReady())
	}
}

func TestClaimRecordParsed(t *testing.T) {
	for _, tt := range []struct {
		line string
		ok   bool
	}{
		{`{"v":2,"seq":1,"op":"claim","gen":1,"name":"w","id":"c","task_id":"software/median@2"}`, true},
		{`{"v":2,"seq":1,"op":"claim","gen":1,"name":"w","id":"c"}`, false},
		{`{"v":2,"seq":1,"op":"claim","gen":1,"name":"w","task_id":"software/median@2"}`, false},
		{`{"v":2,"seq":1,"op":"claim","gen":1,"name":"w","id":"c","task_id":"bad task"}`, false},
	} {
		if _, err := parseRecord([]byte(tt.line)); (err == nil) != tt.ok {
			t.Errorf("%s: %v, want ok %v", tt.line, err, tt.ok)
		}
	}
}

// TestPoolDroppedSlot: a pool slot whose workspace did not come up, its
// container removed with the slot named (OpRemoved with Slots), leaves
// the campaign ready and is no longer among its slots (PoolSlots), while
// the same removal without the slot named is a removal of the campaign.
func TestPoolDroppedSlot(t *testing.T) {
	recs := []Record{{Op: OpBegin, Gen: 1, Instance: "i"},
		{Op: OpIntent, Gen: 1, Kind: KindContainer, Role: RoleServer, Name: "srv"}, {Op: OpCreated, Gen: 1, Kind: KindContainer, Role: RoleServer, Name: "srv", ID: "s"},
		{Op: OpIntent, Gen: 1, Kind: KindContainer, Role: RoleWork, Name: "ws-pool-0", Labels: map[string]string{LabelPoolSlot: "0"}},
		{Op: OpCreated, Gen: 1, Kind: KindContainer, Role: RoleWork, Name: "ws-pool-0", ID: "c0"},
		{Op: OpAttesting, Gen: 1}, {Op: OpAttested, Gen: 1, Status: AttestOK},
		{Op: OpIntent, Gen: 1, Kind: KindContainer, Role: RoleWork, Name: "ws-pool-1", Labels: map[string]string{LabelPoolSlot: "1"}},
		{Op: OpCreated, Gen: 1, Kind: KindContainer, Role: RoleWork, Name: "ws-pool-1", ID: "c1"},
	}
	removed := Record{Op: OpRemoved, Gen: 1, Kind: KindContainer, Role: RoleWork, Name: "ws-pool-1", ID: "c1"}
	dropped := removed
	dropped.Slots = []int{1}
	lc := Fold(append(slices.Clone(recs), dropped))
	if lc.Status != StatusReady || len(lc.PoolReady()) != 1 || lc.NextPoolSlot() != 2 {
		t.Fatalf("with slot 1 dropped: %v, ready %v, next %d", lc.Status, lc.PoolReady(), lc.NextPoolSlot())
	}
	if got := PoolSlots(append(slices.Clone(recs), dropped)); !slices.Equal(got, []int{0}) {
		t.Fatalf("slots with slot 1 dropped: %v, want [0]", got)
	}
	if st := Fold(append(slices.Clone(recs), removed)).Status; st == StatusReady {
		t.Fatal("a removal that names no slot left the campaign ready")
	}
}
