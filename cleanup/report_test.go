package cleanup

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentpen/agentpen/campaign"
)

var update = flag.Bool("update", false, "rewrite the golden reports in testdata")

const nonce = "0123456789abcdef0123456789abcdef"

func labels(role string) map[string]string {
	return map[string]string{
		campaign.LabelCampaign: "camp", campaign.LabelOwner: campaign.OwnerValue, campaign.LabelSchema: campaign.SchemaValue,
		campaign.LabelRole: role, campaign.LabelInstance: nonce,
	}
}

// goodInput is a verified cleanup of one network, one server, one
// workspace and its run directory, one of them already gone.
func goodInput() Input {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	res := func(kind campaign.Kind, role, name, id string) campaign.Resource {
		r := campaign.Resource{Gen: 1, Kind: kind, Role: role, Name: name, ID: id}
		if kind != campaign.KindDir {
			r.Labels = labels(role)
		}
		return r
	}
	const dir = "/run/user/1001/agentpen/i-0123456789abcdef/agent-0123456789abcdef01234567"
	removed := func(r campaign.Resource) Outcome {
		return Outcome{Resource: r, Decision: Decision{Remove, "journalled id with matching ownership labels"}, After: Observation{State: Absent}}
	}
	return Input{
		CampaignID:  "camp",
		Producer:    campaign.Producer{Name: "agentpen", Version: "v0.9.0", Commit: "4b825dc642cb6eb9a060e54bf8d69288fbee4904"},
		Generations: []campaign.Generation{{N: 1, Instance: nonce}},
		Outcomes: []Outcome{
			removed(res(campaign.KindContainer, campaign.RoleWork, "agentpen-camp-agent", "c-ws")),
			{Resource: res(campaign.KindContainer, campaign.RoleServer, "agentpen-camp-server", "c-srv"), Decision: Decision{AlreadyGone, "the daemon reports no such container"}, After: Observation{State: Absent}},
			removed(res(campaign.KindDir, campaign.RoleWork, dir, dir)),
			removed(res(campaign.KindNetwork, campaign.RoleNetwork, "agentpen-camp", "n-1")),
		},
		Started:  t0,
		Finished: t0.Add(850 * time.Millisecond),
		Phases:   map[string]time.Duration{"remove": 700 * time.Millisecond, "verify": 150 * time.Millisecond},
	}
}

func TestBuildGolden(t *testing.T) {
	rep := Build(goodInput())
	if rep.Status != Verified || !rep.OK || len(rep.FailedChecks) != 0 {
		t.Fatalf("good input: status %s, failed %v", rep.Status, rep.FailedChecks)
	}
	got, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "verified.golden.json")
	if *update {
		if err := os.WriteFile(golden, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./cleanup -update)", err)
	}
	if diff := cmp.Diff(string(want), string(got)+"\n"); diff != "" {
		t.Fatalf("report differs from %s (-want +got):\n%s", golden, diff)
	}
}

// TestBuildFailsClosed: every way the evidence can be wrong fails the
// report, naming the check.
func TestBuildFailsClosed(t *testing.T) {
	tests := []struct {
		name      string
		mutate    func(*Input)
		wantCheck string
	}{
		{"still_present", func(in *Input) { in.Outcomes[0].After = Observation{State: Present, ID: "c-ws"} }, "gone/container/c-ws"},
		{"unknown_after", func(in *Input) { in.Outcomes[0].After = Observation{} }, "gone/container/c-ws"},
		{"missing_ownership", func(in *Input) {
			in.Outcomes[0].Decision = Decide(in.Outcomes[0].Resource, Observation{State: Present, ID: "c-ws", Labels: map[string]string{"team": "x"}})
			in.Outcomes[0].After = Observation{State: Present, ID: "c-ws"}
		}, "gone/container/c-ws"},
		{"nonce_mismatch", func(in *Input) {
			other := labels(campaign.RoleWork)
			other[campaign.LabelInstance] = "ffffffffffffffffffffffffffffffff"
			in.Outcomes[0].Decision = Decide(in.Outcomes[0].Resource, Observation{State: Present, ID: "c-ws", Labels: other})
			in.Outcomes[0].After = Observation{State: Present, ID: "c-ws", Labels: other}
		}, "gone/container/c-ws"},
		{"extra_id", func(in *Input) {
			in.Labelled = []Found{{Kind: campaign.KindContainer, ID: "c-extra", Name: "squatter", Labels: labels(campaign.RoleWork)}}
		}, "labelled_none_left"},
		{"listing_failed", func(in *Input) { in.ListError = "daemon restarting" }, "labelled_none_left"},
		{"network_id_mismatch", func(in *Input) {
			o := &in.Outcomes[3]
			o.Decision = Decide(o.Resource, Observation{State: Present, ID: "n-2", Labels: labels(campaign.RoleNetwork)})
			o.After = Observation{State: Present, ID: "n-2"}
		}, "gone/network/n-1"},
		{"duplicate_ids", func(in *Input) { in.Outcomes = append(in.Outcomes, in.Outcomes[0]) }, "unique_ids"},
		{"duplicate_hides_no_failure", func(in *Input) {
			in.Outcomes = append(in.Outcomes, in.Outcomes[0])
			in.Outcomes[0].After = Observation{State: Present, ID: "c-ws"}
		}, "gone/container/c-ws"},
		{"run_dir_wrong_shape", func(in *Input) {
			o := &in.Outcomes[2]
			o.Resource.ID = "/etc"
			o.Decision = Decide(o.Resource, Observation{State: Present, RunRoot: "/run/user/1001/agentpen"})
			o.After = Observation{State: Present}
		}, "gone/dir/etc"},
		{"removal_error", func(in *Input) {
			in.Outcomes[0].Error = "409 removal in progress"
			in.Outcomes[0].After = Observation{State: Present, ID: "c-ws"}
		}, "gone/container/c-ws"},
		{"unresolved_intent", func(in *Input) {
			in.Unresolved = []Unresolved{{Resource: campaign.Resource{Gen: 1, Kind: campaign.KindContainer, Name: "agentpen-camp-agent-2"}, Reason: "daemon did not answer"}}
		}, "resolved/container/agentpen-camp-agent-2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := goodInput()
			tt.mutate(&in)
			rep := Build(in)
			if rep.Status != Failed || rep.OK {
				t.Fatalf("status %s ok %v; want failed", rep.Status, rep.OK)
			}
			if !slices.Contains(rep.FailedChecks, tt.wantCheck) {
				t.Fatalf("failed checks %v, want %q among them", rep.FailedChecks, tt.wantCheck)
			}
			if !slices.IsSorted(rep.FailedChecks) {
				t.Fatalf("failed checks not sorted: %v", rep.FailedChecks)
			}
		})
	}
}

func TestBuildReadOnlyNeverClaimsRemoval(t *testing.T) {
	in := goodInput()
	in.ReadOnly = true
	in.Outcomes[0].After = Observation{State: Present, ID: "c-ws"}
	rep := Build(in)
	if rep.OK || len(rep.LeftAlone) != 1 || rep.LeftAlone[0].ID != "c-ws" {
		t.Fatalf("read-only report with a live container: ok %v left %+v", rep.OK, rep.LeftAlone)
	}
	for _, e := range rep.Removed {
		if e.ID == "c-ws" {
			t.Fatal("a verification claimed a removal")
		}
	}
}

// TestBuildNamesItsGeneration: a report speaks for the latest generation
// of its journal, and says when it was made.
func TestBuildNamesItsGeneration(t *testing.T) {
	in := goodInput()
	in.Generations = []campaign.Generation{{N: 2, Instance: "second"}, {N: 1, Instance: nonce}}
	rep := Build(in)
	if rep.Generation != 2 || rep.Instance != "second" || !rep.WrittenAt.Equal(in.Finished) {
		t.Fatalf("generation %d instance %q written %v", rep.Generation, rep.Instance, rep.WrittenAt)
	}
}
