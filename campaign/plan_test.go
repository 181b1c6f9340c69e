package campaign

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const testDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func validSpec() CampaignSpec {
	return CampaignSpec{
		CampaignID: "camp-1",
		Server:     ServerSpec{Image: testDigest},
		Workspaces: []WorkspaceSpec{
			{TaskID: "software/median@3", Image: testDigest},
			{TaskID: "data/csv_region_total", Image: "registry.local/agentpen/workbench:dev@" + testDigest},
		},
	}
}

func TestNewPlanValid(t *testing.T) {
	p, err := NewPlan(validSpec())
	if err != nil {
		t.Fatal(err)
	}
	if p.Egress != EgressInternal || p.Topology != TopologyNone || len(p.Networks) != 0 {
		t.Fatalf("default egress: %s, topology %s, networks %+v", p.Egress, p.Topology, p.Networks)
	}
	if p.Server.URL != "unix://"+GraderSocket || !slices.Contains(p.Server.Spec.Command, "unix://"+GraderSocket) {
		t.Fatalf("server %+v: want the grader on its unix socket", p.Server)
	}
	agentRe := regexp.MustCompile(`^agent-[0-9a-f]{24}$`)
	for _, a := range p.Agents {
		if !agentRe.MatchString(a.AgentID) {
			t.Fatalf("agent id %q", a.AgentID)
		}
		if !dnsLabelRe.MatchString(a.Alias) || !dnsLabelRe.MatchString(p.Server.Alias) {
			t.Fatalf("aliases %q %q", a.Alias, p.Server.Alias)
		}
		if a.Labels[LabelAgent] != a.AgentID || a.Labels[LabelRole] != RoleWork || a.Labels[LabelCampaign] != "camp-1" || a.Labels[LabelOwner] != OwnerValue {
			t.Fatalf("labels %v", a.Labels)
		}
		if a.Env["AGENTPEN_SERVER_URL"] != p.Server.URL || a.Network != "" || a.Labels[LabelNetwork] != "none" {
			t.Fatalf("env %v, network %q", a.Env, a.Network)
		}
		if _, ok := a.Env["DOCKER_HOST"]; ok {
			t.Fatal("workspace env has DOCKER_HOST")
		}
	}
	if p.Agents[0].AgentID == p.Agents[1].AgentID || p.Agents[0].Name == p.Agents[1].Name {
		t.Fatal("agents share an id or name")
	}
	q, _ := NewPlan(validSpec())
	if q.Server.Name != p.Server.Name || q.Agents[1].AgentID != p.Agents[1].AgentID {
		t.Fatal("plans are not deterministic")
	}
	other := validSpec()
	other.CampaignID = "camp-2"
	r, _ := NewPlan(other)
	if r.Server.Name == p.Server.Name || r.Agents[0].AgentID == p.Agents[0].AgentID {
		t.Fatal("two campaigns share names")
	}
}

func TestOpaqueAgentID(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	for _, k := range [][]byte{nil, key} {
		a := OpaqueAgentID(k, "c", "t", "")
		if a != OpaqueAgentID(k, "c", "t", "") || a == OpaqueAgentID(k, "c", "t", "2") || a == OpaqueAgentID(k, "c", "t2", "") {
			t.Fatal("agent ids are not a function of campaign, task and attempt")
		}
		// Separators matter: ("ab","c") and ("a","bc") differ.
		if OpaqueAgentID(k, "ab", "c", "") == OpaqueAgentID(k, "a", "bc", "") {
			t.Fatal("ambiguous concatenation")
		}
	}
}

// TestAgentIDNeedsTheKey: agent code reads its agent id (in
// /proc/self/mountinfo, the run directory's bind-mount source) and can
// often guess the campaign id; without the state root's key it cannot
// tell which task the id was made from (it recovered the task in 0.08 s
// by hashing candidates when the id was an unkeyed hash).
func TestAgentIDNeedsTheKey(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	spec := validSpec()
	p, err := NewPlanWith(spec, PlanOptions{AgentKey: key})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Keyed {
		t.Fatal("a plan with a key is not keyed")
	}
	got := p.Agents[0].AgentID
	// The attacker's search: every task of the catalogue, every attempt it
	// might try, hashed the way an unkeyed id was, and under a wrong key.
	ws := spec.Workspaces[0]
	for _, guess := range [][]byte{nil, []byte("another key of thirty-two bytes!")} {
		if OpaqueAgentID(guess, spec.CampaignID, ws.TaskID, ws.AttemptID) == got {
			t.Fatalf("the agent id is computable without the state root's key (%q)", guess)
		}
	}
	if OpaqueAgentID(key, spec.CampaignID, ws.TaskID, ws.AttemptID) != got {
		t.Fatal("the keyed id is not the plan's")
	}
	if q, _ := NewPlan(spec); q.Keyed {
		t.Fatal("a plan without a key says it is keyed")
	}
}

func TestNewPlanRefusals(t *testing.T) {
	tests := []struct {
		name      string
		mut       func(*CampaignSpec)
		wantField string
	}{
		{"empty_campaign", func(s *CampaignSpec) { s.CampaignID = "" }, "campaign_id"},
		{"campaign_space", func(s *CampaignSpec) { s.CampaignID = "a b" }, "campaign_id"},
		{"campaign_dotdot", func(s *CampaignSpec) { s.CampaignID = ".." }, "campaign_id"},
		{"campaign_slash", func(s *CampaignSpec) { s.CampaignID = "a/b" }, "campaign_id"},
		{"campaign_too_long", func(s *CampaignSpec) { s.CampaignID = strings.Repeat("a", 129) }, "campaign_id"},
		{"campaign_unicode", func(s *CampaignSpec) { s.CampaignID = "café" }, "campaign_id"},
		{"bad_egress", func(s *CampaignSpec) { s.Egress = "open" }, "egress"},
		{"no_workspaces", func(s *CampaignSpec) { s.Workspaces = nil }, "workspaces"},
		{"too_many_workspaces", func(s *CampaignSpec) {
			s.Workspaces = make([]WorkspaceSpec, MaxWorkspaces+1)
		}, "workspaces"},
		{"image_untagged", func(s *CampaignSpec) { s.Server.Image = "agentpen/workbench" }, "server.image"},
		{"image_tag_latest", func(s *CampaignSpec) { s.Workspaces[1].Image = "registry.local:5000/agentpen/workbench:latest" }, "workspaces[1].image"},
		{"image_latest", func(s *CampaignSpec) { s.Server.Image = "latest" }, "server.image"},
		{"image_placeholder", func(s *CampaignSpec) { s.Workspaces[0].Image = "${IMAGE}" }, "workspaces[0].image"},
		{"image_short_digest", func(s *CampaignSpec) { s.Server.Image = "sha256:abc" }, "server.image"},
		{"image_upper_digest", func(s *CampaignSpec) { s.Server.Image = strings.ToUpper(testDigest) }, "server.image"},
		{"image_md5", func(s *CampaignSpec) { s.Server.Image = "repo@md5:0123" }, "server.image"},
		{"port_zero_ok_but_negative", func(s *CampaignSpec) { s.Server.Port = -1 }, "server.port"},
		{"port_high", func(s *CampaignSpec) { s.Server.Port = 70000 }, "server.port"},
		{"api_key_env_protected", func(s *CampaignSpec) { s.Server.APIKeyEnv = "DOCKER_HOST" }, "server.api_key_env"},
		{"api_key_env_bad", func(s *CampaignSpec) { s.Server.APIKeyEnv = "1KEY" }, "server.api_key_env"},
		{"publish_internal", func(s *CampaignSpec) { s.Server.PublishLoopback = "127.0.0.1:18080" }, "server.publish_loopback"},
		{"publish_wildcard", func(s *CampaignSpec) { s.Egress = EgressNAT; s.Server.PublishLoopback = "0.0.0.0:18080" }, "server.publish_loopback"},
		{"publish_v6_wildcard", func(s *CampaignSpec) { s.Egress = EgressNAT; s.Server.PublishLoopback = "[::]:18080" }, "server.publish_loopback"},
		{"publish_public", func(s *CampaignSpec) { s.Egress = EgressNAT; s.Server.PublishLoopback = "10.0.0.1:18080" }, "server.publish_loopback"},
		{"publish_name", func(s *CampaignSpec) { s.Egress = EgressNAT; s.Server.PublishLoopback = "localhost:18080" }, "server.publish_loopback"},
		{"publish_port0", func(s *CampaignSpec) { s.Egress = EgressNAT; s.Server.PublishLoopback = "127.0.0.1:0" }, "server.publish_loopback"},
		{"env_protected", func(s *CampaignSpec) { s.Workspaces[0].ExtraEnv = map[string]string{"DOCKER_HOST": "unix:///x"} }, "workspaces[0].extra_env.DOCKER_HOST"},
		{"env_protected_lower", func(s *CampaignSpec) { s.Workspaces[0].ExtraEnv = map[string]string{"http_proxy": "x"} }, "workspaces[0].extra_env.http_proxy"},
		{"env_agentpen_prefix", func(s *CampaignSpec) { s.Server.ExtraEnv = map[string]string{"AGENTPEN_AGENT_ID": "x"} }, "server.extra_env.AGENTPEN_AGENT_ID"},
		{"env_secret_value", func(s *CampaignSpec) { s.Server.ExtraEnv = map[string]string{"OPENAI_API_KEY": "sk-x"} }, "server.extra_env.OPENAI_API_KEY"},
		{"env_token_value", func(s *CampaignSpec) { s.Workspaces[1].ExtraEnv = map[string]string{"GH_TOKEN": "x"} }, "workspaces[1].extra_env.GH_TOKEN"},
		{"env_bad_name", func(s *CampaignSpec) { s.Server.ExtraEnv = map[string]string{"A-B": "x"} }, "server.extra_env.A-B"},
		{"env_newline_value", func(s *CampaignSpec) { s.Server.ExtraEnv = map[string]string{"MODE": "a\nb"} }, "server.extra_env.MODE"},
		{"secret_env_protected", func(s *CampaignSpec) { s.Server.SecretEnv = []string{"PATH"} }, "server.secret_env[0]"},
		{"label_reserved", func(s *CampaignSpec) { s.Labels = map[string]string{"io.agentpen.owner": "me"} }, "labels"},
		{"label_reserved_case", func(s *CampaignSpec) { s.Workspaces[0].Labels = map[string]string{"IO.AGENTPEN.ROLE": "server"} }, "workspaces[0].labels"},
		{"label_space_key", func(s *CampaignSpec) { s.Labels = map[string]string{"a b": "c"} }, "labels key"},
		{"task_in_env", func(s *CampaignSpec) { s.Workspaces[0].ExtraEnv = map[string]string{"HINT": "software/median@3"} }, "workspaces[0].task_id"},
		{"task_in_label", func(s *CampaignSpec) { s.Workspaces[1].Labels = map[string]string{"bench": "data/csv_region_total"} }, "workspaces[1].task_id"},
		{"task_slug_in_label", func(s *CampaignSpec) { s.Workspaces[1].Labels = map[string]string{"bench": "data-csv-region-total"} }, "workspaces[1].task_id"},
		{"task_in_command", func(s *CampaignSpec) { s.Workspaces[0].Command = []string{"serve", "--task", "software/median@3"} }, "workspaces[0].task_id"},
		{"task_in_campaign_id", func(s *CampaignSpec) {
			s.CampaignID = "run-data-csv-region-total"
			s.Workspaces[1].TaskID = "data-csv-region-total"
		}, "workspaces[1].task_id"},
		// The family alone names the task (review finding: a campaign id
		// "rv-software-median" reached agent code through the grader URL).
		{"task_family_in_campaign_id", func(s *CampaignSpec) { s.CampaignID = "rv-software-median" }, "workspaces[0].task_id"},
		{"task_family_in_label", func(s *CampaignSpec) { s.Labels = map[string]string{"bench": "software/median"} }, "workspaces[0].task_id"},
		{"task_in_path", func(s *CampaignSpec) {
			s.Workspaces[0].TaskID = "median"
			s.Workspaces[0].WorkspaceHostPath = "/srv/median/ws"
		}, "workspaces[0].task_id"},
		{"duplicate_attempt", func(s *CampaignSpec) { s.Workspaces[1] = s.Workspaces[0] }, "workspaces[1]"},
		{"mount_relative", func(s *CampaignSpec) { s.Workspaces[0].WorkspaceHostPath = "srv/ws" }, "workspaces[0].workspace_host_path"},
		{"mount_dotdot", func(s *CampaignSpec) { s.Server.DataHostPath = "/srv/../etc" }, "server.data_host_path"},
		{"mount_comma", func(s *CampaignSpec) { s.Server.DataHostPath = "/srv/a,b" }, "server.data_host_path"},
		{"mount_root", func(s *CampaignSpec) { s.Server.DataHostPath = "/" }, "server.data_host_path"},
		{"data_target_socket", func(s *CampaignSpec) {
			s.Server.DataHostPath = "/srv/d"
			s.Server.DataContainerPath = DockerSocketTarget
		}, "server.data_container_path"},
		{"empty_arg", func(s *CampaignSpec) { s.Server.Command = []string{"serve", ""} }, "server.command[1]"},
		{"attempt_bad", func(s *CampaignSpec) { s.Workspaces[0].AttemptID = "a b" }, "workspaces[0].attempt_id"},
		{"git_root_relative", func(s *CampaignSpec) { s.Workspaces[0].Integrity.GitRoot = "workspace" }, "workspaces[0].integrity.git_root"},
		{"git_root_proc", func(s *CampaignSpec) { s.Workspaces[0].Integrity.GitRoot = "/proc/1/root" }, "workspaces[0].integrity.git_root"},
		{"git_root_run", func(s *CampaignSpec) { s.Workspaces[0].Integrity.GitRoot = "/run" }, "workspaces[0].integrity.git_root"},
		{"base_outside_root", func(s *CampaignSpec) {
			s.Workspaces[0].Integrity.Bases = map[string]string{"/workspace2/repo": strings.Repeat("a", 40)}
		}, `workspaces[0].integrity.bases["/workspace2/repo"]`},
		{"base_short", func(s *CampaignSpec) {
			s.Workspaces[0].Integrity.Bases = map[string]string{"/workspace/repo": "abc"}
		}, `workspaces[0].integrity.bases["/workspace/repo"]`},
		{"base_upper", func(s *CampaignSpec) {
			s.Workspaces[0].Integrity.Bases = map[string]string{"/workspace": strings.Repeat("A", 40)}
		}, `workspaces[0].integrity.bases["/workspace"]`},
		{"base_unclean", func(s *CampaignSpec) {
			s.Workspaces[0].Integrity.Bases = map[string]string{"/workspace/a/../b": strings.Repeat("a", 40)}
		}, `workspaces[0].integrity.bases["/workspace/a/../b"]`},
		{"forbidden_relative", func(s *CampaignSpec) {
			s.Workspaces[0].Integrity.ForbiddenPaths = []string{"/srv/answers", "answers"}
		}, "workspaces[0].integrity.forbidden_paths[1]"},
		{"egress_class_unknown", func(s *CampaignSpec) {
			s.Workspaces[0].Integrity.AllowedEgress = []string{EgressCodeHost, "pypi.org"}
		}, "workspaces[0].integrity.allowed_egress[1]"},
		{"egress_class_twice", func(s *CampaignSpec) {
			s.Workspaces[0].Integrity.AllowedEgress = []string{EgressMetadata, EgressMetadata}
		}, "workspaces[0].integrity.allowed_egress[1]"},
		{"task_in_forbidden_path", func(s *CampaignSpec) {
			s.Workspaces[0].TaskID = "median"
			s.Workspaces[0].Integrity.ForbiddenPaths = []string{"/srv/median.answer"}
		}, "workspaces[0].task_id"},
		{"task_in_git_root", func(s *CampaignSpec) {
			s.Workspaces[0].TaskID = "median"
			s.Workspaces[0].Integrity.GitRoot = "/srv/median"
		}, "workspaces[0].task_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := validSpec()
			tt.mut(&s)
			p, err := NewPlan(s)
			if err == nil {
				t.Fatalf("accepted; plan %+v", p)
			}
			var ve *ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %T %v is not a ValidationError", err, err)
			}
			if ve.Field != tt.wantField {
				t.Fatalf("field %q (%v), want %q", ve.Field, err, tt.wantField)
			}
		})
	}
}

func TestCheckImageMessages(t *testing.T) {
	tests := []struct {
		ref, want string
	}{
		{"agentpen/workbench:dev", ""},
		{"registry.local:5000/team/img:1.2", ""},
		{"agentpen/workbench", "names no tag, which means latest: give a tag (repo:tag), the local image id (docker image inspect --format '{{.Id}}' agentpen/workbench)"},
		{"agentpen/workbench:latest", "latest is whatever was built last"},
		{"latest", "is a placeholder"},
		{"sha256:abc", "an image id is sha256: and 64 lower-case hex digits"},
		{"Agentpen/Workbench@" + testDigest, "is not an image reference"},
		{"registry.local:5000/team/img:1.2@" + testDigest, ""},
		{testDigest, ""},
	}
	for _, tt := range tests {
		err := CheckImage("server.image", tt.ref)
		if tt.want == "" {
			if err != nil {
				t.Errorf("CheckImage(%q) = %v", tt.ref, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("CheckImage(%q) = %v, want it to say %q", tt.ref, err, tt.want)
		}
	}
}

func TestNewPlanSecretValueNeverInError(t *testing.T) {
	const canary = "canary-sk-9f8e7d6c5b4a"
	s := validSpec()
	s.Server.ExtraEnv = map[string]string{"MY_SECRET": canary}
	_, err := NewPlan(s)
	if err == nil || strings.Contains(err.Error(), canary) {
		t.Fatalf("error %v: must refuse and must not echo the value", err)
	}
}

func TestNewPlanNAT(t *testing.T) {
	s := validSpec()
	s.Egress = EgressNAT
	s.Server.PublishLoopback = "127.0.0.1:18080"
	p, err := NewPlan(s)
	if err != nil {
		t.Fatal(err)
	}
	if p.Topology != TopologyPerAgent || len(p.Networks) != 2 || p.Networks[0].Internal || p.Server.Publish.Port() != 18080 {
		t.Fatalf("nat plan %+v %+v", p.Networks, p.Server)
	}
	for i, a := range p.Agents {
		n := p.Networks[i]
		if n.Agent != a.AgentID || a.Network != n.Name || a.Labels[LabelNetwork] != n.Name || n.Labels[LabelNetwork] != n.Name || n.Labels[LabelAgent] != a.AgentID {
			t.Fatalf("agent %d: network %+v, agent network %q labels %v", i, n, a.Network, a.Labels)
		}
		if !strings.Contains(a.Env["NO_PROXY"], p.Server.Alias) || a.Env["AGENTPEN_SERVER_URL"] != p.Server.URL {
			t.Fatalf("env %v", a.Env)
		}
	}
	if p.Networks[0].Name == p.Networks[1].Name {
		t.Fatal("two agents share a network")
	}
	// A server agent code must call: per-agent internal networks.
	s = validSpec()
	s.Server.AgentReachable = true
	p, err = NewPlan(s)
	if err != nil || p.Topology != TopologyPerAgent || !p.Networks[0].Internal || !strings.HasPrefix(p.Server.URL, "http://") {
		t.Fatalf("agent-reachable plan: %v %+v", err, p)
	}
}

func TestNewPlanEveryField(t *testing.T) {
	s := validSpec()
	s.Server.Image = "latest"
	s.Server.Port = -1
	s.Workspaces[1].TaskID = ""
	s.Workspaces[0].ExtraEnv = map[string]string{"GH_TOKEN": "x"}
	_, err := NewPlan(s)
	var ve ValidationErrors
	if !errors.As(err, &ve) {
		t.Fatalf("err %T %v, want ValidationErrors", err, err)
	}
	var got []string
	for _, e := range ve {
		got = append(got, e.Field)
	}
	want := []string{"server.image", "server.port", "workspaces[0].extra_env.GH_TOKEN", "workspaces[1].task_id"}
	if !slices.Equal(got, want) {
		t.Fatalf("fields %v, want every one: %v", got, want)
	}
}

func TestUIDBlocks(t *testing.T) {
	if UIDBlocks != 711 {
		t.Fatalf("UIDBlocks = %d", UIDBlocks)
	}
	for _, tt := range []struct {
		label string
		base  int
		ok    bool
	}{
		{"20000-20063", 20000, true}, {"20064-20127", 20064, true},
		{"20001-20064", 0, false}, {"20000-20064", 0, false}, {"19936-19999", 0, false},
		{"65472-65535", 0, false}, {"65440-65503", 65440, true}, {"65504-65567", 0, false}, {"020000-20063", 0, false}, {"x", 0, false}, {"", 0, false},
	} {
		base, ok := ParseUIDBlock(tt.label)
		if ok != tt.ok || base != tt.base {
			t.Errorf("ParseUIDBlock(%q) = %d, %v; want %d, %v", tt.label, base, ok, tt.base, tt.ok)
		}
	}
	p, _ := NewPlan(validSpec())
	p.SetUIDBlock(1, 20128)
	if a := p.Agents[1]; a.UIDBase != 20128 || a.Labels[LabelUIDBlock] != "20128-20191" || a.Env["WORKBENCH_UID_BASE"] != "20128" || a.Env["WORKBENCH_UID_COUNT"] != "64" {
		t.Fatalf("agent after SetUIDBlock: %+v", a)
	}
}

func TestContainsToken(t *testing.T) {
	tests := []struct {
		s, tok string
		want   bool
	}{
		{"task-7", "task-7", true},
		{"x/task-7/y", "task-7", true},
		{"task-70", "task-7", false},
		{"atask-7", "task-7", false},
		{"TASK-7", "task-7", true},
		{"", "a", false},
		{"abc", "", false},
		{"b-a-b", "a", true},
	}
	for _, tt := range tests {
		if got := containsToken(tt.s, tt.tok); got != tt.want {
			t.Errorf("containsToken(%q, %q) = %v, want %v", tt.s, tt.tok, got, tt.want)
		}
	}
}

// FuzzPlanIDs: whatever the campaign and task ids, NewPlan never panics; an
// accepted plan has names Docker accepts, DNS-label aliases, an opaque agent
// id, and never shows the task id anywhere the agent can see.
func FuzzPlanIDs(f *testing.F) {
	f.Add("camp-1", "software/median@3", "")
	f.Add("run-data-csv-region-total", "data-csv-region-total", "a1")
	f.Add("..", "x", "")
	f.Add("a:b", "agent", "")
	f.Add("c", "server", "1")
	nameRe := regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$`)
	agentRe := regexp.MustCompile(`^agent-[0-9a-f]{24}$`)
	f.Fuzz(func(t *testing.T, campaign, task, attempt string) {
		s := CampaignSpec{
			CampaignID: campaign,
			Server:     ServerSpec{Image: testDigest},
			Workspaces: []WorkspaceSpec{{TaskID: task, AttemptID: attempt, Image: testDigest}},
		}
		p, err := NewPlan(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			return
		}
		a := p.Agents[0]
		for _, n := range []string{agentNetworkName(p.Key, a.AgentID), p.Server.Name, a.Name} {
			if !nameRe.MatchString(n) {
				t.Fatalf("name %q is not a valid Docker name", n)
			}
		}
		for _, al := range []string{p.Server.Alias, a.Alias} {
			if !dnsLabelRe.MatchString(al) {
				t.Fatalf("alias %q is not a DNS label", al)
			}
		}
		if !agentRe.MatchString(a.AgentID) || forbiddenNetworks[agentNetworkName(p.Key, a.AgentID)] {
			t.Fatalf("agent id %q", a.AgentID)
		}
		for _, v := range append([]string{a.Name, a.Alias, p.Server.Alias}, flatten(a.Env, a.Labels)...) {
			if exposesTask(v, task) {
				t.Fatalf("task %q visible in %q", task, v)
			}
		}
		if filepath.Base(a.Name) != a.Name {
			t.Fatalf("name %q has a path separator", a.Name)
		}
	})
}

func flatten(ms ...map[string]string) []string {
	var out []string
	for _, m := range ms {
		for k, v := range m {
			out = append(out, k, v)
		}
	}
	return out
}

// TestInvalidIDsAreValidationErrors: every bad campaign id, the one over
// 128 characters included, is a *ValidationError of the field it came in,
// through CheckID (the CLI's and the API's path ids) and through a spec
// (DecodeSpec, NewPlan), so each caller answers all of them alike.
func TestInvalidIDsAreValidationErrors(t *testing.T) {
	for _, tt := range []struct{ name, id, msg string }{
		{"too_long", strings.Repeat("a", 129), "longer than 128 bytes"},
		{"far_too_long", strings.Repeat("a", 5000), "longer than 128 bytes"},
		{"whitespace", "bad id", "holds whitespace"},
		{"leading_dash", "-x", "must match"},
		{"empty", "", "must be a non-empty string"},
		{"slash", "a/b", "must match"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var ve *ValidationError
			err := CheckID("id", tt.id)
			if !errors.As(err, &ve) || ve.Field != "id" || !strings.Contains(ve.Msg, tt.msg) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("CheckID: %T %v, want a ValidationError of id saying %q", err, err, tt.msg)
			}
			b, _ := json.Marshal(map[string]any{"campaign_id": tt.id, "server": map[string]string{"image": testDigest},
				"workspaces": []map[string]string{{"task_id": "software/median", "image": testDigest}}})
			spec, err := DecodeSpec(bytes.NewReader(b))
			if err != nil {
				t.Fatalf("DecodeSpec: %v (values are NewPlan's to judge)", err)
			}
			_, err = NewPlan(spec)
			if !errors.As(err, &ve) || ve.Field != "campaign_id" || !strings.Contains(ve.Msg, tt.msg) || len(ve.Value) > 83 {
				t.Fatalf("NewPlan: %T %v, want a ValidationError of campaign_id saying %q", err, err, tt.msg)
			}
		})
	}
}

// TestPin: a plan whose spec names tags runs the ids they were resolved
// to; its spec keeps the tags; pins stay as they are; a tag without an
// id is refused naming its field, and nothing changes; pinning again
// changes nothing.
func TestPin(t *testing.T) {
	id1, id2 := "sha256:"+strings.Repeat("1", 64), "sha256:"+strings.Repeat("2", 64)
	s := validSpec()
	s.Server.Image = "agentpen/workbench:dev"
	s.Workspaces[0].Image = "agentpen/workbench:dev"
	s.Workspaces[1].Image = "registry.local:5000/team/img:1.2"
	p, err := NewPlan(s)
	if err != nil {
		t.Fatal(err)
	}
	err = p.Pin(map[string]string{"agentpen/workbench:dev": id1})
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Field != "workspaces[1].image" || p.Images != nil || p.Server.Spec.Image != "agentpen/workbench:dev" {
		t.Fatalf("a tag without an id: %v (images %v, server %s)", err, p.Images, p.Server.Spec.Image)
	}
	ids := map[string]string{"agentpen/workbench:dev": id1, "registry.local:5000/team/img:1.2": id2, "other:1": id2}
	if err := p.Pin(ids); err != nil {
		t.Fatal(err)
	}
	if p.Server.Spec.Image != id1 || p.Agents[0].Spec.Image != id1 || p.Agents[1].Spec.Image != id2 {
		t.Fatalf("containers run %s, %s, %s", p.Server.Spec.Image, p.Agents[0].Spec.Image, p.Agents[1].Spec.Image)
	}
	if p.Spec.Server.Image != "agentpen/workbench:dev" || p.Spec.Workspaces[1].Image != "registry.local:5000/team/img:1.2" {
		t.Fatalf("the spec changed: %+v", p.Spec)
	}
	want := map[string]string{"agentpen/workbench:dev": id1, "registry.local:5000/team/img:1.2": id2}
	if !maps.Equal(p.Images, want) {
		t.Fatalf("images %v, want %v", p.Images, want)
	}
	if err := p.Pin(nil); err != nil || !maps.Equal(p.Images, want) || p.Server.Spec.Image != id1 {
		t.Fatalf("pinned again: %v %v", err, p.Images)
	}
	// A spec of pins only needs nothing.
	q, err := NewPlan(validSpec())
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Pin(nil); err != nil || q.Images != nil {
		t.Fatalf("pins only: %v %v", err, q.Images)
	}
}
