package docker_test

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentpen/agentpen/adapter/docker"
	"github.com/agentpen/agentpen/adapter/drivertest"
	"github.com/agentpen/agentpen/campaign"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/internal/testkit/oracle"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/internal/testkit/testlog"
	"github.com/agentpen/agentpen/internal/testkit/workbenchtest"
	wbclient "github.com/agentpen/agentpen/workbench/client"
	"github.com/agentpen/agentpen/workbench/tasks"
)

// workbenchImage is the image the workspaces and the server run
// (testenv.WorkbenchImage: agentpen/workbench:dev unless overridden).
var workbenchImage = testenv.WorkbenchImage()

// e2eTasks are the tasks of the four workspaces: a code task and three
// answer kinds.
var e2eTasks = []string{"software/median@2", "data/csv_region_total@5", "logs/first_error@1", "config/port_conflict"}

func workbenchSpec(campaignID, img string, taskIDs []string) campaign.CampaignSpec {
	s := campaign.CampaignSpec{
		CampaignID: campaignID,
		Labels:     map[string]string{"com.example.launcher": "e2e"},
		Server:     campaign.ServerSpec{Image: img},
	}
	for i, id := range taskIDs {
		s.Workspaces = append(s.Workspaces, campaign.WorkspaceSpec{TaskID: id, AttemptID: fmt.Sprint("a", i), Image: img})
	}
	return s
}

// TestCampaignEndToEnd brings up a server and four workspaces on the real
// daemon, proves every setting from docker inspect, plays an oracle episode
// through each workspace's unix socket, and runs a second campaign beside
// it.
func TestCampaignEndToEnd(t *testing.T) {
	d, cli := realDocker(t)
	img := imageID(t, cli, workbenchImage)
	for _, id := range e2eTasks {
		if _, err := tasks.Lookup(id); err != nil {
			t.Fatalf("e2e task %s: %v", id, err)
		}
	}
	const canary = "canary-key-7d1f0c2b9e5a0c4f"
	getenv := func(k string) string {
		if k == campaign.DefaultAPIKeyEnv {
			return canary
		}
		return ""
	}
	state := t.TempDir()
	var logs testlog.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	newAdapter := func() *drivertest.Harness {
		return drivertest.NewHarness(t, &adapter.Adapter{Driver: d, Getenv: getenv, ReadyTimeout: 60 * time.Second, Logger: logger}, state)
	}
	idA, idB := uniqueCampaign(t), uniqueCampaign(t)
	t.Cleanup(func() { forceRemove(cli, idA); forceRemove(cli, idB) })

	var (
		wg         sync.WaitGroup
		campA, cB  *adapter.Campaign
		errA, errB error
	)
	// A: the default topology (no network); B: a network per agent (a
	// server agent code must reach).
	specB := workbenchSpec(idB, img, e2eTasks[:2])
	specB.Server.AgentReachable = true
	wg.Go(func() { campA, errA = newAdapter().BringUp(t.Context(), workbenchSpec(idA, img, e2eTasks)) })
	wg.Go(func() { cB, errB = newAdapter().BringUp(t.Context(), specB) })
	wg.Wait()
	if errA != nil || errB != nil {
		t.Fatalf("bring-up: %v / %v", errA, errB)
	}
	if campA.ServerID == cB.ServerID || campA.Workspaces[0].ContainerID == cB.Workspaces[0].ContainerID {
		t.Fatal("two campaigns share resources")
	}
	if campA.Plan.Topology != campaign.TopologyNone || len(campA.NetworkIDs) != 0 || cB.Plan.Topology != campaign.TopologyPerAgent || len(cB.NetworkIDs) != 2 {
		t.Fatalf("topologies: A %s %v, B %s %v", campA.Plan.Topology, campA.NetworkIDs, cB.Plan.Topology, cB.NetworkIDs)
	}
	inspectCampaign(t, cli, campA, canary)
	inspectCampaign(t, cli, cB, canary)
	// What another process rebuilds from the state directory alone (as
	// agentpen serve does after a restart) is what the bring-up returned.
	for _, c := range []*adapter.Campaign{campA, cB} {
		got, err := newAdapter().Load(c.Plan.CampaignID)
		if err != nil {
			t.Fatal(err)
		}
		if got.ServerID != c.ServerID || !slices.Equal(got.NetworkIDs, c.NetworkIDs) ||
			!slices.EqualFunc(got.Workspaces, c.Workspaces, sameWorkspace) || got.Plan.Generation != c.Plan.Generation || got.Plan.Instance != c.Plan.Instance {
			t.Fatalf("Load(%s) = %+v\nbring-up returned %+v", c.Plan.CampaignID, got, c)
		}
		for i := range c.Plan.Agents {
			if got.Plan.Agents[i].UIDBase != c.Plan.Agents[i].UIDBase || got.Plan.Agents[i].Network != c.Plan.Agents[i].Network {
				t.Fatalf("Load(%s): agent %d plan %+v, bring-up %+v", c.Plan.CampaignID, i, got.Plan.Agents[i], c.Plan.Agents[i])
			}
		}
	}
	// No two workspaces anywhere share a uid block.
	blocks := map[int]bool{}
	for _, ws := range append(slices.Clone(campA.Workspaces), cB.Workspaces...) {
		if ws.UIDBase < campaign.UIDBlockFirst || blocks[ws.UIDBase] {
			t.Fatalf("uid block %d given twice or out of range", ws.UIDBase)
		}
		blocks[ws.UIDBase] = true
	}

	// An episode through each workspace's unix socket reaches reward 1.0.
	var pw sync.WaitGroup
	for i, ws := range campA.Workspaces {
		pw.Go(func() { playOverSocket(t, ws.Socket, e2eTasks[i]) })
	}
	pw.Wait()
	// The second campaign still works and sees only its own files.
	playOverSocket(t, cB.Workspaces[0].Socket, e2eTasks[0])
	// Each serves only its task, to the host and to agent code.
	checkBound(t, campA.Workspaces[0], e2eTasks[0], e2eTasks[1])
	checkBound(t, cB.Workspaces[1], e2eTasks[1], "sql/top_customer")
	// What episode code inside a workspace container can and cannot do.
	checkContainment(t, campA.Workspaces[1], campA.Plan)
	checkContainment(t, cB.Workspaces[1], cB.Plan)

	// The key reached the containers and nothing else: not the logs, not
	// the state directory (journal, spec).
	if strings.Contains(logs.String(), canary) || !strings.Contains(logs.String(), "campaign ready") {
		t.Fatalf("adapter logs hold the key, or are missing: %s", logs.String())
	}
	filepath.WalkDir(state, func(path string, de fs.DirEntry, err error) error {
		if err == nil && !de.IsDir() {
			if b, _ := os.ReadFile(path); strings.Contains(string(testenv.Readable(b)), canary) {
				t.Errorf("%s holds the API key", path)
			}
		}
		return nil
	})

	for _, c := range []*adapter.Campaign{campA, cB} {
		if err := newAdapter().TearDown(t.Context(), c.Plan.CampaignID); err != nil {
			t.Fatal(err)
		}
		if cs, ns := owned(t, cli, c.Plan.CampaignID); len(cs)+len(ns) != 0 {
			t.Fatalf("teardown left %v %v", cs, ns)
		}
		for _, ws := range c.Workspaces {
			if _, err := os.Stat(filepath.Dir(ws.Socket)); !os.IsNotExist(err) {
				t.Fatalf("teardown left run dir %s", filepath.Dir(ws.Socket))
			}
		}
	}
}

// inspectCampaign proves the campaign's settings from docker inspect.
func inspectCampaign(t *testing.T, cli *client.Client, c *adapter.Campaign, canary string) {
	t.Helper()
	ctx := t.Context()
	p := c.Plan
	for i, id := range c.NetworkIDs {
		net, err := cli.NetworkInspect(ctx, id, netInspectOpts())
		if err != nil {
			t.Fatal(err)
		}
		n := p.Networks[i]
		if !net.Internal || net.Driver != "bridge" || net.Name != n.Name || net.Labels[campaign.LabelCampaign] != p.CampaignID || net.Labels[campaign.LabelOwner] != campaign.OwnerValue || net.Labels[campaign.LabelAgent] != n.Agent {
			t.Fatalf("network %s: internal=%v driver=%s labels=%v", net.Name, net.Internal, net.Driver, net.Labels)
		}
		// Only the agent's workspace and the server are on it.
		if len(net.Containers) != 2 {
			t.Fatalf("network %s holds %d containers, want the agent's workspace and the server", net.Name, len(net.Containers))
		}
	}
	srv, err := cli.ContainerInspect(ctx, c.ServerID)
	if err != nil {
		t.Fatal(err)
	}
	var srvNets []string
	for _, n := range p.Networks {
		srvNets = append(srvNets, n.Name)
	}
	checkCommon(t, srv, p, p.Server.Alias, campaign.RoleServer, srvNets...)
	if !hasEnvName(srv.Config.Env, campaign.DefaultAPIKeyEnv) {
		t.Fatalf("server env lacks %s", campaign.DefaultAPIKeyEnv)
	}
	if len(srv.HostConfig.PortBindings) != 0 || len(srv.NetworkSettings.Ports) != 0 && anyBound(srv) {
		t.Fatalf("server publishes ports: %v", srv.HostConfig.PortBindings)
	}
	for i, ws := range c.Workspaces {
		info, err := cli.ContainerInspect(ctx, ws.ContainerID)
		if err != nil {
			t.Fatal(err)
		}
		a := p.Agents[i]
		checkCommon(t, info, p, a.Alias, campaign.RoleWork, a.Network)
		hc := info.HostConfig
		if info.Config.Labels[campaign.LabelAgent] != a.AgentID {
			t.Fatalf("workspace labels %v", info.Config.Labels)
		}
		if !hc.ReadonlyRootfs || len(hc.CapDrop) != 1 || hc.CapDrop[0] != "ALL" || strings.Join(hc.CapAdd, ",") != strings.Join(docker.WorkspaceCaps, ",") {
			t.Fatalf("workspace hardening: ro=%v drop=%v add=%v", hc.ReadonlyRootfs, hc.CapDrop, hc.CapAdd)
		}
		if hc.PidsLimit == nil || *hc.PidsLimit != docker.WorkspacePidsLimit || hc.Memory != docker.WorkspaceMemory {
			t.Fatalf("workspace limits: pids=%v mem=%d", hc.PidsLimit, hc.Memory)
		}
		if hc.Sysctls["kernel.shmall"] != "16384" || hc.Sysctls["kernel.shm_rmid_forced"] != "1" {
			t.Fatalf("workspace sysctls %v: System V shared memory unbounded", hc.Sysctls)
		}
		for _, tmp := range []string{"/tmp", "/var/tmp", "/dev/shm", "/run"} {
			if !strings.Contains(hc.Tmpfs[tmp], "size=") {
				t.Fatalf("tmpfs %s = %q", tmp, hc.Tmpfs[tmp])
			}
		}
		var runMount bool
		for _, m := range info.Mounts {
			if m.Destination == campaign.WorkbenchRunDir && m.Source == filepath.Dir(ws.Socket) {
				runMount = true
			}
			if strings.Contains(m.Source, "docker.sock") || strings.Contains(m.Destination, "docker.sock") {
				t.Fatalf("workspace mounts a docker socket: %+v", m)
			}
		}
		if !runMount {
			t.Fatalf("workspace mounts %+v lack %s", info.Mounts, campaign.WorkbenchRunDir)
		}
		names := []string{"AGENTPEN_AGENT_ID", "AGENTPEN_SERVER_URL", "AGENTPEN_GRADER_URL", "AGENTPEN_GRADER_KEY_ENV", "WORKBENCH_UID_BASE", "WORKBENCH_UID_COUNT"}
		if p.Topology == campaign.TopologyPerAgent {
			names = append(names, "NO_PROXY")
		}
		if info.Config.Labels[campaign.LabelUIDBlock] != campaign.UIDBlockLabel(ws.UIDBase) {
			t.Fatalf("workspace uid block label %q, want %q", info.Config.Labels[campaign.LabelUIDBlock], campaign.UIDBlockLabel(ws.UIDBase))
		}
		for _, name := range names {
			if !hasEnvName(info.Config.Env, name) {
				t.Fatalf("workspace env lacks %s: %v", name, envNames(info.Config.Env))
			}
		}
		if hasEnvName(info.Config.Env, "DOCKER_HOST") {
			t.Fatalf("workspace env has DOCKER_HOST: %v", envNames(info.Config.Env))
		}
		// The episode server grades through the campaign's grader, with the
		// key (which episode code cannot read: checkContainment).
		if got := strings.Join(info.Config.Cmd, " "); !strings.Contains(got, "--grader "+p.Server.URL) {
			t.Fatalf("workspace command %q does not grade remotely", got)
		}
		// No task id anywhere in what docker knows about the workspace.
		raw, _ := json.Marshal(info)
		family, _, _ := tasks.ParseID(e2eTasks[i])
		for _, id := range []string{e2eTasks[i], family, strings.ReplaceAll(family, "/", "-"), strings.SplitN(family, "/", 2)[1]} {
			if strings.Contains(string(raw), id) {
				t.Fatalf("workspace %d inspect JSON contains the task id %q", i, id)
			}
		}
	}
}

func checkCommon(t *testing.T, info container.InspectResponse, p *campaign.Plan, alias, role string, nets ...string) {
	t.Helper()
	if info.HostConfig.Init == nil || !*info.HostConfig.Init {
		t.Fatalf("%s: init not set", info.Name)
	}
	if !strings.Contains(strings.Join(info.HostConfig.SecurityOpt, ","), "no-new-privileges") {
		t.Fatalf("%s: security opts %v", info.Name, info.HostConfig.SecurityOpt)
	}
	// The daemon took the rotation: agent code cannot grow a log without
	// bound on the host's disk.
	if lc := info.HostConfig.LogConfig; lc.Type != "json-file" || lc.Config["max-size"] != docker.LogMaxSize || lc.Config["max-file"] != docker.LogMaxFiles {
		t.Fatalf("%s: log config %+v, want json-file rotated at %s x %s", info.Name, lc, docker.LogMaxSize, docker.LogMaxFiles)
	}
	l := info.Config.Labels
	if l[campaign.LabelCampaign] != p.CampaignID || l[campaign.LabelRole] != role || l[campaign.LabelOwner] != campaign.OwnerValue || l["com.example.launcher"] != "e2e" || l[campaign.LabelTopology] != string(p.Topology) {
		t.Fatalf("%s: labels %v", info.Name, l)
	}
	if len(nets) == 0 || nets[0] == "" {
		// No network at all: the only entry is "none".
		if info.HostConfig.NetworkMode != "none" || len(info.NetworkSettings.Networks) != 1 || info.NetworkSettings.Networks["none"] == nil {
			t.Fatalf("%s: network mode %s, networks %v: want none", info.Name, info.HostConfig.NetworkMode, info.NetworkSettings.Networks)
		}
	} else {
		for _, n := range nets {
			ep, ok := info.NetworkSettings.Networks[n]
			if !ok || !contains(ep.Aliases, alias) {
				t.Fatalf("%s: networks %v (want alias %s on %s)", info.Name, info.NetworkSettings.Networks, alias, n)
			}
		}
		if len(info.NetworkSettings.Networks) != len(nets) {
			t.Fatalf("%s: on %d networks, want %d", info.Name, len(info.NetworkSettings.Networks), len(nets))
		}
	}
	if !info.State.Running {
		t.Fatalf("%s: not running", info.Name)
	}
}

func anyBound(info container.InspectResponse) bool {
	for _, b := range info.NetworkSettings.Ports {
		if len(b) > 0 {
			return true
		}
	}
	return false
}

func hasEnvName(env []string, name string) bool {
	for _, e := range env {
		if strings.HasPrefix(e, name+"=") {
			return true
		}
	}
	return false
}

func envNames(env []string) []string {
	var out []string
	for _, e := range env {
		k, _, _ := strings.Cut(e, "=")
		out = append(out, k)
	}
	return out
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// playOverSocket plays taskID's oracle over a session on the workbench's
// unix socket and requires reward 1.0.
func playOverSocket(t *testing.T, socket, taskID string) {
	t.Helper()
	ctx := testenv.Context(t)
	s, err := wbclient.Dial(ctx, socket)
	if err != nil {
		t.Errorf("%s: %v", taskID, err)
		return
	}
	defer s.Close()
	if err := workbenchtest.PlayOracle(ctx, s, taskID); err != nil {
		t.Errorf("over %s: %v", socket, err)
	}
}

// containmentProbe runs as episode code inside a workspace container and
// prints what it could do; checkContainment says what it must not. Episode
// code gets a cleared environment, so the grader's URL is written into
// the code (GRADER_URL) as an agent that learned it would.
const containmentProbe = `import json, os, socket, urllib.request, urllib.error
r = {"uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups()}
for line in open("/proc/self/status"):
    if line.startswith(("CapEff", "CapPrm", "CapBnd", "NoNewPrivs")):
        k, v = line.split(":", 1)
        r[k] = v.strip()
def attempt(name, fn):
    try:
        fn()
        r[name] = "ok"
    except Exception as e:
        r[name] = type(e).__name__
attempt("read_binary", lambda: open("/usr/local/bin/workbench", "rb").read(16))
def wb():
    s = socket.socket(socket.AF_UNIX)
    s.connect("/run/workbench/wb.sock")
attempt("connect_workbench_socket", wb)
attempt("list_run_workbench", lambda: os.listdir("/run/workbench"))
attempt("write_root_fs", lambda: open("/etc/agentpen-probe", "w"))
attempt("docker_socket", lambda: os.stat("/var/run/docker.sock"))
# The episode server (root) holds the grader key in its environment.
servers = [p for p in os.listdir("/proc") if p.isdigit() and b"workbench" in open("/proc/%s/cmdline" % p, "rb").read()]
r["server_pids"] = len(servers)
for p in servers + ["1"]:
    attempt("environ_" + ("init" if p == "1" else "server"), lambda p=p: open("/proc/%s/environ" % p, "rb").read())
r["docker_host_env"] = "DOCKER_HOST" in os.environ
r["key_env"] = any("API_KEY" in k and k != "AGENTPEN_GRADER_KEY_ENV" for k in os.environ)
def grader_socket():
    s = socket.socket(socket.AF_UNIX)
    s.connect("/run/agentpen/grader/grader.sock")
attempt("connect_grader_socket", grader_socket)
def score():
    if not GRADER_URL.startswith("http"):
        r["grader_unauthenticated"] = "no network"
        return
    req = urllib.request.Request(GRADER_URL + "/v1/score", data=b'{"task_id":"x","answer":"1"}', headers={"Content-Type": "application/json"})
    try:
        urllib.request.urlopen(req, timeout=5)
        r["grader_unauthenticated"] = 200
    except urllib.error.HTTPError as e:
        r["grader_unauthenticated"] = e.code
    except Exception as e:
        r["grader_unauthenticated"] = type(e).__name__
score()
# System V shared memory: refused to episode code (the workbench's filter),
# whatever the size, and none is left by a process that tried.
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
r["shm_128m"] = libc.shmget(0, 128 << 20, 0o1600)
rd, wr = os.pipe()
if os.fork() == 0:
    os.write(wr, str(libc.shmget(0, 8 << 20, 0o1600)).encode())
    os._exit(0)
os.close(wr)
os.wait()
seg = int(os.read(rd, 32))
r["shm_8m"] = seg
r["shm_left_by_exited"] = sum(1 for line in open("/proc/sysvipc/shm") if line.split()[1:2] == [str(seg)])
print(json.dumps(r))
`

// checkContainment runs containmentProbe through run_python in a workspace.
func checkContainment(t *testing.T, ws adapter.Workspace, p *campaign.Plan) {
	t.Helper()
	socket, graderURL := ws.Socket, p.Server.URL
	ctx := testenv.Context(t)
	s := workbenchtest.Dial(t, ctx, socket)
	if _, err := s.Reset(ctx, wbclient.ResetOptions{TaskID: e2eTasks[1]}); err != nil {
		t.Fatal(err)
	}
	res, err := workbenchtest.Stepper(ctx, s)("run_python", map[string]any{"code": fmt.Sprintf("GRADER_URL = %q\n", graderURL) + containmentProbe})
	if err != nil || res.Error != "" {
		t.Fatalf("run_python: %v %q", err, res.Error)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(oracle.LastLine(strings.Split(res.Output, "\n[exit code")[0])), &got); err != nil {
		t.Fatalf("probe output %q: %v", res.Output, err)
	}
	t.Logf("containment probe: %v", got)
	if uid, _ := got["uid"].(float64); int(uid) < ws.UIDBase || int(uid) >= ws.UIDBase+campaign.UIDBlockSize {
		t.Errorf("episode code runs as uid %v, want one of the workspace's block %s", got["uid"], campaign.UIDBlockLabel(ws.UIDBase))
	}
	if g, _ := got["groups"].([]any); len(g) != 0 {
		t.Errorf("supplementary groups %v", g)
	}
	for _, k := range []string{"CapEff", "CapPrm"} {
		if got[k] != "0000000000000000" {
			t.Errorf("%s = %v, want none", k, got[k])
		}
	}
	if got["NoNewPrivs"] != "1" {
		t.Errorf("NoNewPrivs = %v", got["NoNewPrivs"])
	}
	for _, k := range []string{"read_binary", "connect_workbench_socket", "list_run_workbench"} {
		if got[k] != "PermissionError" {
			t.Errorf("%s = %v, want PermissionError", k, got[k])
		}
	}
	if got["write_root_fs"] != "OSError" && got["write_root_fs"] != "PermissionError" {
		t.Errorf("write to the read-only root = %v", got["write_root_fs"])
	}
	if n, _ := got["server_pids"].(float64); n < 1 {
		t.Errorf("the probe found no episode server process to try")
	}
	for _, k := range []string{"environ_server", "environ_init"} {
		if got[k] != "PermissionError" {
			t.Errorf("%s = %v, want PermissionError (the grader key is there)", k, got[k])
		}
	}
	if got["shm_128m"] != float64(-1) || got["shm_8m"] != float64(-1) || got["shm_left_by_exited"] != float64(0) {
		t.Errorf("System V shared memory: a 128 MiB segment %v, an 8 MiB one %v (want -1: refused), left after its maker exited %v (want 0)",
			got["shm_128m"], got["shm_8m"], got["shm_left_by_exited"])
	}
	if got["docker_socket"] != "FileNotFoundError" || got["docker_host_env"] != false || got["key_env"] != false {
		t.Errorf("docker socket %v, DOCKER_HOST %v, key env %v", got["docker_socket"], got["docker_host_env"], got["key_env"])
	}
	if p.Topology == campaign.TopologyNone {
		// No network, and the grader's socket is root's alone.
		if got["connect_grader_socket"] != "PermissionError" || got["grader_unauthenticated"] != "no network" {
			t.Errorf("grader socket from episode code = %v (want PermissionError), grader URL %v", got["connect_grader_socket"], got["grader_unauthenticated"])
		}
		return
	}
	// Episode code has only its own loopback: the grader's URL resolves to
	// nothing it can reach (the attestation shows the workspace itself
	// reaches the grader, and gets 401 without the key).
	if got["grader_unauthenticated"] != "URLError" {
		t.Errorf("unauthenticated grader call from episode code = %v, want URLError (no network)", got["grader_unauthenticated"])
	}
}

// sameWorkspace: two descriptions of one workspace agree on what it is
// and how it is reached (a handle rebuilt from the journal carries the
// journal's times beside the same resources).
func sameWorkspace(x, y adapter.Workspace) bool {
	return x.Workspace == y.Workspace && x.UIDBase == y.UIDBase && x.Workbench == y.Workbench &&
		x.Handle.ID == y.Handle.ID && x.Handle.Socket == y.Handle.Socket && x.Handle.AgentID == y.Handle.AgentID
}
