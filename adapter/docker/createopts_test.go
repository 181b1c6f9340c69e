package docker

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/campaign"
	"github.com/moby/profiles/seccomp"
)

func TestServerSpec(t *testing.T) {
	s := fakeSpec("camp-1", 2)
	s.Egress = campaign.EgressNAT
	s.Server.PublishLoopback = "127.0.0.1:18080"
	s.Server.MountDockerSocket = true
	s.Server.DataHostPath = "/srv/data"
	s.Server.SecretEnv = []string{"GRADER_TOKEN"}
	s.Server.ExtraEnv = map[string]string{"MODE": "strict"}
	p, err := campaign.NewPlan(s)
	if err != nil {
		t.Fatal(err)
	}
	cs := serverSpec(p, "k3y", map[string]string{"GRADER_TOKEN": "t0k"}, "/run/user/1001/docker.sock", "")
	env := strings.Join(cs.Config.Env, "\n")
	for _, want := range []string{"AGENTPEN_API_KEY=k3y", "GRADER_TOKEN=t0k", "MODE=strict", "DOCKER_HOST=unix://" + campaign.DockerSocketTarget} {
		if !strings.Contains(env, want) {
			t.Errorf("env lacks %q: %q", want, env)
		}
	}
	if len(cs.HostConfig.Mounts) != 2 {
		t.Fatalf("mounts %+v", cs.HostConfig.Mounts)
	}
	sock, data := cs.HostConfig.Mounts[0], cs.HostConfig.Mounts[1]
	if sock.Source != "/run/user/1001/docker.sock" || sock.Target != campaign.DockerSocketTarget {
		t.Errorf("socket mount %+v", sock)
	}
	if data.Source != "/srv/data" || data.Target != "/srv/data" || !data.ReadOnly {
		t.Errorf("data mount %+v", data)
	}
	b := cs.HostConfig.PortBindings["8080/tcp"]
	if len(b) != 1 || b[0].HostIP != "127.0.0.1" || b[0].HostPort != "18080" {
		t.Errorf("port bindings %+v", cs.HostConfig.PortBindings)
	}
	if *cs.HostConfig.Init != true || cs.HostConfig.CapDrop[0] != "ALL" {
		t.Errorf("hardening %+v", cs.HostConfig)
	}
	if s := cs.String(); strings.Contains(s, "k3y") || strings.Contains(s, "t0k") {
		t.Errorf("spec string shows a secret: %s", s)
	}
}

func TestServerSpecDefaults(t *testing.T) {
	p, err := campaign.NewPlan(fakeSpec("camp-1", 2))
	if err != nil {
		t.Fatal(err)
	}
	const graderDir = "/run/user/1/agentpen/i-0123456789abcdef/grader"
	cs := serverSpec(p, "", nil, "/run/user/1/docker.sock", graderDir)
	// Only the grader's socket directory, read-write; nothing published.
	if len(cs.HostConfig.Mounts) != 1 || cs.HostConfig.Mounts[0].Source != graderDir || cs.HostConfig.Mounts[0].Target != campaign.GraderDir || cs.HostConfig.Mounts[0].ReadOnly ||
		len(cs.HostConfig.PortBindings) != 0 || len(cs.Config.ExposedPorts) != 0 {
		t.Fatalf("default server mounts or publishes: %+v %+v", cs.HostConfig.Mounts, cs.HostConfig.PortBindings)
	}
	if cs.HostConfig.NetworkMode != "none" || !slices.Contains(cs.Config.Cmd, "unix://"+campaign.GraderSocket) {
		t.Fatalf("default server: network %q, command %v: want none and the grader on its socket", cs.HostConfig.NetworkMode, cs.Config.Cmd)
	}
	for _, e := range cs.Config.Env {
		if strings.HasPrefix(e, "DOCKER_HOST=") || strings.HasPrefix(e, "AGENTPEN_API_KEY=") {
			t.Fatalf("default server env has %s", e)
		}
	}
}

func TestWorkspaceSpec(t *testing.T) {
	s := fakeSpec("camp-1", 2)
	s.Workspaces[0].WorkspaceHostPath = "/srv/ws0"
	p, err := campaign.NewPlan(s)
	if err != nil {
		t.Fatal(err)
	}
	const graderDir = "/run/user/1/agentpen/i-0123456789abcdef/grader"
	cs := workspaceSpec(p, p.Agents[0], "/run/user/1/agentpen/x/agent", graderDir, "k3y")
	hc := cs.HostConfig
	if !hc.ReadonlyRootfs || hc.CapDrop[0] != "ALL" || strings.Join(hc.CapAdd, ",") != "CAP_CHOWN,CAP_KILL,CAP_SETGID,CAP_SETUID" {
		t.Fatalf("hardening %+v", hc)
	}
	if hc.SecurityOpt[0] != "no-new-privileges" || *hc.PidsLimit != WorkspacePidsLimit || hc.Memory != WorkspaceMemory {
		t.Fatalf("limits %+v", hc.Resources)
	}
	for dir, opts := range hc.Tmpfs {
		if !strings.Contains(opts, "size=") || !strings.Contains(opts, "mode=") || !strings.Contains(opts, "nosuid") {
			t.Errorf("tmpfs %s %q", dir, opts)
		}
	}
	if len(hc.Mounts) != 3 || hc.Mounts[0].Target != campaign.WorkbenchRunDir || hc.Mounts[1].Target != campaign.DefaultWorkspaceTarget {
		t.Fatalf("mounts %+v", hc.Mounts)
	}
	if g := hc.Mounts[2]; g.Source != graderDir || g.Target != campaign.GraderDir || !g.ReadOnly {
		t.Fatalf("the grader's socket directory mount %+v: want it read-only at %s", g, campaign.GraderDir)
	}
	if hc.NetworkMode != "none" || cs.Networking != nil {
		t.Fatalf("network mode %q %+v: want none (no network in the default topology)", hc.NetworkMode, cs.Networking)
	}
	if !strings.Contains(strings.Join(cs.Config.Env, "\n"), "WORKBENCH_UID_BASE=") && p.Agents[0].UIDBase != 0 {
		t.Fatal("no uid block in the env")
	}
	for _, m := range hc.Mounts {
		if strings.Contains(m.Source, "docker.sock") {
			t.Fatal("workspace mounts the docker socket")
		}
	}
	for _, e := range cs.Config.Env {
		if strings.HasPrefix(e, "DOCKER_HOST=") || strings.Contains(e, "software/median") {
			t.Fatalf("workspace env %s", e)
		}
	}
	if len(hc.PortBindings) != 0 {
		t.Fatal("workspace publishes a port")
	}
	if !strings.Contains(strings.Join(cs.Config.Env, "\n"), "AGENTPEN_API_KEY=k3y") {
		t.Fatal("workspace env lacks the grader key its episode server needs")
	}
	want := "serve --listen unix:///run/workbench/wb.sock --task-file /run/workbench/task --results-file /run/workbench/results.jsonl --grader " + p.Server.URL + " --grader-key-env AGENTPEN_API_KEY"
	if got := strings.Join(cs.Config.Cmd, " "); got != want {
		t.Fatalf("workspace command %q, want %q", got, want)
	}
	// A launcher's own command is the agent: it never gets the grader's
	// key (with it, agent code could call the grader's protected routes).
	s.Workspaces[1].Command = []string{"sleep", "infinity"}
	if p, err = campaign.NewPlan(s); err != nil {
		t.Fatal(err)
	}
	own := workspaceSpec(p, p.Agents[1], "/run/user/1/agentpen/x/agent", graderDir, "k3y")
	if env := strings.Join(own.Config.Env, "\n"); strings.Contains(env, "k3y") {
		t.Fatalf("a launcher's own command holds the grader's key: %s", env)
	}
}

// TestWorkspaceSeccomp: the workspace's profile is Docker's default plus
// the namespace calls, unconditionally: every other rule of the default
// is there unchanged, clone and unshare need no CAP_SYS_ADMIN, no socket
// rule lets AF_VSOCK through, and the masked paths are asked for.
func TestWorkspaceSeccomp(t *testing.T) {
	hc := workspaceSpec(&campaign.Plan{}, campaign.AgentPlan{Name: "w"}, "/run", "/g", "").HostConfig
	var inline string
	for _, o := range hc.SecurityOpt {
		if p, ok := strings.CutPrefix(o, "seccomp="); ok {
			inline = p
		}
	}
	var prof struct {
		DefaultAction string `json:"defaultAction"`
		Syscalls      []struct {
			Names    []string          `json:"names"`
			Action   string            `json:"action"`
			Args     []json.RawMessage `json:"args"`
			Includes json.RawMessage   `json:"includes"`
			Excludes json.RawMessage   `json:"excludes"`
		} `json:"syscalls"`
	}
	if err := json.Unmarshal([]byte(inline), &prof); err != nil {
		t.Fatalf("the inline profile: %v", err)
	}
	def, _ := json.Marshal(seccomp.DefaultProfile())
	if !strings.HasPrefix(inline, string(def[:len(def)-2])) || prof.DefaultAction != "SCMP_ACT_ERRNO" {
		t.Fatal("the profile is not Docker's default with rules appended")
	}
	unconditional := map[string]bool{}
	for _, s := range prof.Syscalls {
		if s.Action == "SCMP_ACT_ALLOW" && len(s.Args) == 0 && s.Includes == nil && s.Excludes == nil {
			for _, n := range s.Names {
				unconditional[n] = true
			}
		}
		if slices.Contains(s.Names, "socket") && s.Action == "SCMP_ACT_ALLOW" {
			var a []struct{ Value uint64 }
			json.Unmarshal(mustJSON(t, s.Args), &a)
			if len(a) == 0 || a[0].Value == 40 {
				t.Errorf("a socket rule lets AF_VSOCK through: %v", s.Args)
			}
		}
	}
	for _, n := range []string{"clone", "unshare", "setns", "mount", "mount_setattr", "read"} {
		if !unconditional[n] {
			t.Errorf("%s is not allowed unconditionally", n)
		}
	}
	for _, n := range []string{"ptrace", "bpf", "kexec_load", "open_by_handle_at"} {
		if unconditional[n] {
			t.Errorf("%s is allowed", n)
		}
	}
	if !slices.Contains(hc.MaskedPaths, "/proc/kcore") || !slices.Contains(hc.ReadonlyPaths, "/proc/sys") {
		t.Errorf("masked %v, read-only %v", hc.MaskedPaths, hc.ReadonlyPaths)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
