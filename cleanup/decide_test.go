package cleanup

import (
	"strings"
	"testing"

	"github.com/agentpen/agentpen/campaign"
)

func TestDecide(t *testing.T) {
	owned := map[string]string{campaign.LabelCampaign: "c", campaign.LabelOwner: campaign.OwnerValue, campaign.LabelRole: campaign.RoleWork}
	ctr := campaign.Resource{Kind: campaign.KindContainer, Name: "ws", ID: "c1", Labels: owned}
	net := campaign.Resource{Kind: campaign.KindNetwork, Name: "n", ID: "n1", Labels: owned}
	const root = "/run/user/1001/agentpen"
	dir := campaign.Resource{Kind: campaign.KindDir, Name: root + "/k-0123456789/agent-0123456789abcdef01234567", ID: root + "/k-0123456789/agent-0123456789abcdef01234567"}
	other := map[string]string{campaign.LabelCampaign: "d", campaign.LabelOwner: campaign.OwnerValue, campaign.LabelRole: campaign.RoleWork}
	tests := []struct {
		name string
		r    campaign.Resource
		obs  Observation
		want Action
	}{
		{"container_owned", ctr, Observation{State: Present, ID: "c1", Labels: owned}, Remove},
		{"container_extra_launcher_labels", ctr, Observation{State: Present, ID: "c1", Labels: merge(owned, map[string]string{"team": "x"})}, Remove},
		{"container_gone", ctr, Observation{State: Absent}, AlreadyGone},
		{"container_other_campaign", ctr, Observation{State: Present, ID: "c1", Labels: other}, NotOurs},
		{"container_no_labels", ctr, Observation{State: Present, ID: "c1"}, NotOurs},
		{"container_other_id", ctr, Observation{State: Present, ID: "c2", Labels: owned}, NotOurs},
		{"container_unknown", ctr, Observation{State: Unknown, Err: "daemon busy"}, Refuse},
		{"zero_observation", ctr, Observation{}, Refuse},
		{"no_id", campaign.Resource{Kind: campaign.KindContainer, Name: "ws", Labels: owned}, Observation{State: Present, Labels: owned}, Refuse},
		{"intent_without_labels", campaign.Resource{Kind: campaign.KindContainer, ID: "c1"}, Observation{State: Present, ID: "c1", Labels: owned}, NotOurs},
		{"network_owned", net, Observation{State: Present, ID: "n1", Labels: owned}, Remove},
		{"network_other", net, Observation{State: Present, ID: "n1", Labels: other}, NotOurs},
		{"dir_present", dir, Observation{State: Present, RunRoot: root}, Remove},
		{"dir_absent", dir, Observation{State: Absent, RunRoot: root}, AlreadyGone},
		{"dir_wrong_root", dir, Observation{State: Present, RunRoot: "/run/user/1002/agentpen"}, Refuse},
		{"dir_etc", campaign.Resource{Kind: campaign.KindDir, ID: "/etc"}, Observation{State: Present, RunRoot: root}, Refuse},
		{"unknown_kind", campaign.Resource{Kind: "volume", ID: "v1"}, Observation{State: Present, ID: "v1", Labels: owned}, Refuse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(tt.r, tt.obs)
			if d.Action != tt.want || d.Reason == "" {
				t.Fatalf("Decide = %+v, want %s with a reason", d, tt.want)
			}
		})
	}
}

func merge(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

var runDirCases = []struct {
	path string
	want bool
}{
	{"/run/user/1001/agentpen/c-0123456789/agent-0123456789abcdef01234567", true},
	{"/run/user/1001/agentpen/c-0123456789", false},
	{"/run/user/1001/agentpen/c/agent-0123456789abcdef0123456", false},
	{"/run/user/1001/agentpen/../agentpen/agent-0123456789abcdef01234567", false},
	{"/run/user/1001/agentpen/c/../agent-0123456789abcdef01234567", false},
	{"/etc", false},
	{"/", false},
	{"", false},
	{"run/user/1001/agentpen/c/agent-0123456789abcdef01234567", false},
	{"/run/user/1002/agentpen/c/agent-0123456789abcdef01234567", false},
	{"/run/user/1001/agentpen/c/agent-0123456789abcdef01234567/", false},
	{"/run/user/1001/agentpen/c/d/agent-0123456789abcdef01234567", false},
	{"/run/user/1001/agentpen/i-0123456789abcdef/grader", true},
	{"/run/user/1001/agentpen/i-0123456789abcdef/graders", false},
	{"/run/user/1001/agentpen/grader", false},
}

func TestRunDirShape(t *testing.T) {
	const root = "/run/user/1001/agentpen"
	for _, tt := range runDirCases {
		if got := RunDirShape(root, tt.path); got != tt.want {
			t.Errorf("RunDirShape(%q) = %v, want %v", tt.path, got, tt.want)
		}
	}
	for _, bad := range []string{"", "relative", "/run/user/1001/agentpen/"} {
		if RunDirShape(bad, "/run/user/1001/agentpen/c/agent-0123456789abcdef01234567") {
			t.Errorf("accepted root %q", bad)
		}
	}
}

// FuzzRunDirShape: an accepted path is always exactly two levels below the
// root, with no "." or ".." component, named agent-<24 hex>.
func FuzzRunDirShape(f *testing.F) {
	for _, tt := range runDirCases {
		f.Add(tt.path)
	}
	const root = "/run/user/1001/agentpen"
	f.Fuzz(func(t *testing.T, path string) {
		if !RunDirShape(root, path) {
			return
		}
		rest, ok := strings.CutPrefix(path, root+"/")
		if !ok {
			t.Fatalf("accepted %q outside the root", path)
		}
		parts := strings.Split(rest, "/")
		if len(parts) != 2 || parts[0] == "" || parts[0] == "." || parts[0] == ".." {
			t.Fatalf("accepted %q: not <root>/<key>/<agent>", path)
		}
		if parts[1] != "grader" && (!strings.HasPrefix(parts[1], "agent-") || len(parts[1]) != len("agent-")+24) {
			t.Fatalf("accepted %q: not an agent directory", path)
		}
	})
}
