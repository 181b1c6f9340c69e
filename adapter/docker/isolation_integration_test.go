package docker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/agentpen/agentpen/adapter/drivertest"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/oracle"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/internal/testkit/workbenchtest"
	"github.com/agentpen/agentpen/workbench/client"
	"github.com/agentpen/agentpen/workbench/tasks"
)

// runCode runs code as episode code in a workspace (a fresh episode of
// task) and returns its output's last line decoded as JSON.
func runCode(t *testing.T, ctx context.Context, socket, task, code string) map[string]any {
	t.Helper()
	s, err := client.Dial(ctx, socket)
	if err != nil {
		t.Error(err)
		return nil
	}
	defer s.Close()
	if _, err := s.Reset(ctx, client.ResetOptions{TaskID: task}); err != nil {
		t.Error(err)
		return nil
	}
	res, err := workbenchtest.Stepper(ctx, s)("run_python", map[string]any{"code": code})
	if err != nil || res.Error != "" {
		t.Errorf("run_python: %v %q", err, res.Error)
		return nil
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(oracle.LastLine(strings.Split(res.Output, "\n[exit code")[0])), &got); err != nil {
		t.Errorf("output %q: %v", res.Output, err)
	}
	return got
}

// listenAndDial runs listenerCode in workspace 1 and dialerCode, aimed
// at peer, in workspace 0, at the same time, and returns what each
// reported.
func listenAndDial(t *testing.T, ctx context.Context, c *adapter.Campaign, peer string) (heard, sent map[string]any) {
	t.Helper()
	var wg sync.WaitGroup
	wg.Go(func() { heard = runCode(t, ctx, c.Workspaces[1].Socket, e2eTasks[1], listenerCode) })
	wg.Go(func() {
		sent = runCode(t, ctx, c.Workspaces[0].Socket, e2eTasks[0], fmt.Sprintf("PEER = %q\n", peer)+dialerCode)
	})
	wg.Wait()
	return heard, sent
}

// listenAndDialAsRoot is listenAndDial with the code run as each
// container's root (docker exec), outside the episodes' namespaces.
func listenAndDialAsRoot(t *testing.T, ctx context.Context, a *adapter.Adapter, c *adapter.Campaign, peer string) (heard, sent map[string]any) {
	t.Helper()
	run := func(i int, code string) map[string]any {
		res, err := a.Driver.Exec(ctx, c.Workspaces[i].ContainerID, []string{"/usr/bin/python3", "-c", code}, driver.ExecOptions{})
		exit, out := res.ExitCode, res.Stdout+res.Stderr
		var got map[string]any
		if err != nil || exit != 0 || json.Unmarshal([]byte(oracle.LastLine(out)), &got) != nil {
			t.Errorf("exec in workspace %d: exit %d, %v: %q", i, exit, err, out)
		}
		return got
	}
	var wg sync.WaitGroup
	wg.Go(func() { heard = run(1, listenerCode) })
	wg.Go(func() { sent = run(0, fmt.Sprintf("PEER = %q\n", peer)+dialerCode) })
	wg.Wait()
	return heard, sent
}

// listenerCode listens on TCP and UDP port 47001 on every address for a
// few seconds and reports what reached it.
const listenerCode = `import json, os, socket, select, time
t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); t.bind(("0.0.0.0", 47001)); t.listen(8)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("0.0.0.0", 47001))
got = {"uid": os.getuid(), "tcp": 0, "udp": 0}
end = time.time() + 8
while time.time() < end:
    r, _, _ = select.select([t, u], [], [], 0.2)
    for s in r:
        if s is t:
            c, _ = t.accept(); got["tcp"] += 1; c.close()
        else:
            u.recvfrom(4096); got["udp"] += 1
print(json.dumps(got))
`

// dialerCode tries, for a few seconds, TCP connects and UDP datagrams to
// the other workspace's listener.
const dialerCode = `import json, os, socket, time
got = {"uid": os.getuid(), "tcp": [], "udp_sent": 0}
time.sleep(1.5)
for _ in range(3):
    s = socket.socket(); s.settimeout(1.5)
    try:
        s.connect((PEER, 47001)); got["tcp"].append("connected")
    except Exception as e:
        got["tcp"].append(type(e).__name__)
    s.close()
    try:
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.sendto(b"x", (PEER, 47001)); got["udp_sent"] += 1
    except Exception as e:
        got.setdefault("udp_errors", []).append(type(e).__name__)
print(json.dumps(got))
`

// TestAgentsCannotReachEachOther: agent code in one workspace cannot
// connect to (TCP) or send to (UDP) a listener of agent code in another,
// in either topology, while grading works in both; and the two episodes
// run under different kernel uids (their workspaces' blocks).
func TestAgentsCannotReachEachOther(t *testing.T) {
	d, cli := realDocker(t)
	img := imageID(t, cli, workbenchImage)
	for _, perAgent := range []bool{false, true} {
		name := map[bool]string{false: "no_network", true: "network_per_agent"}[perAgent]
		t.Run(name, func(t *testing.T) {
			id := uniqueCampaign(t)
			t.Cleanup(func() { forceRemove(cli, id) })
			a := drivertest.NewHarness(t, &adapter.Adapter{Driver: d, Getenv: keyEnv}, "")
			spec := workbenchSpec(id, img, e2eTasks[:2])
			spec.Server.AgentReachable = perAgent
			c, err := a.BringUp(t.Context(), spec)
			if err != nil {
				t.Fatal(err)
			}
			peer := "10.213.255.254" // no network: any address will do, none is reachable
			if perAgent {
				info, err := cli.ContainerInspect(t.Context(), c.Workspaces[1].ContainerID)
				if err != nil {
					t.Fatal(err)
				}
				peer = info.NetworkSettings.Networks[c.Plan.Agents[1].Network].IPAddress
			}
			ctx := testenv.Context(t)
			heard, sent := listenAndDial(t, ctx, c, peer)
			t.Logf("listener heard %v; dialer %v", heard, sent)
			if heard == nil || sent == nil {
				t.FailNow()
			}
			if heard["tcp"] != float64(0) || heard["udp"] != float64(0) {
				t.Fatalf("agent code in workspace 0 reached workspace 1: %v", heard)
			}
			for _, o := range sent["tcp"].([]any) {
				if o == "connected" {
					t.Fatalf("a TCP connect to the other workspace succeeded: %v", sent)
				}
			}
			if heard["uid"] == sent["uid"] {
				t.Fatalf("the two agents' code ran under one kernel uid %v", heard["uid"])
			}
			for i, got := range []map[string]any{sent, heard} {
				uid, _ := got["uid"].(float64)
				if b := c.Workspaces[i].UIDBase; int(uid) < b || int(uid) >= b+campaign.UIDBlockSize-1 {
					t.Fatalf("workspace %d ran agent code as uid %v, outside its block %d", i, got["uid"], b)
				}
			}
			if perAgent {
				// The control: with workspace 0 attached to workspace 1's
				// network by hand, the same code run as the containers' root
				// (episode code has only its own loopback: it reaches no
				// network at all) does get through, so the test can see a
				// path between the containers when there is one.
				if err := cli.NetworkConnect(t.Context(), c.NetworkIDs[1], c.Workspaces[0].ContainerID, nil); err != nil {
					t.Fatal(err)
				}
				heard, sent := listenAndDialAsRoot(t, ctx, a.Adapter, c, peer)
				t.Logf("control, one shared network: listener heard %v; dialer %v", heard, sent)
				if heard == nil || heard["tcp"] == float64(0) || heard["udp"] == float64(0) {
					t.Fatalf("the listener heard nothing over a network the two workspaces share: the test cannot see a path (%v, %v)", heard, sent)
				}
				if err := cli.NetworkDisconnect(t.Context(), c.NetworkIDs[1], c.Workspaces[0].ContainerID, true); err != nil {
					t.Fatal(err)
				}
			}
			// Grading works in both, nonetheless.
			var pw sync.WaitGroup
			for i, ws := range c.Workspaces {
				pw.Go(func() { playOverSocket(t, ws.Socket, e2eTasks[i]) })
			}
			pw.Wait()
			mustVerify(t, a, cli, id)
		})
	}
}

// vsockCode is a vsock covert channel's two ends (testdata/agents/
// vsock_channel.py, as JSON): ROLE "send" holds a port per set bit of a
// message, "receive" finds which ports are taken by binding them itself.
const vsockCode = `import errno, json, socket, time
AF_VSOCK, CID_ANY, BASE = 40, 0xFFFFFFFF, 0x7B000000
bits = [int(b) for b in format(ord("A"), "08b")]
try:
    socket.socket(AF_VSOCK, socket.SOCK_STREAM).close()
except OSError as e:
    print(json.dumps({"vsock": "denied " + errno.errorcode[e.errno]}))
    raise SystemExit(0)
if ROLE == "send":
    held = [socket.socket(AF_VSOCK, socket.SOCK_STREAM) for b in [1] + bits if b]
    for s, port in zip(held, [BASE + i for i, b in enumerate([1] + bits) if b]):
        s.bind((CID_ANY, port))
    time.sleep(5)
    print(json.dumps({"vsock": "sent"}))
else:
    def taken(port):
        s = socket.socket(AF_VSOCK, socket.SOCK_STREAM)
        try:
            s.bind((CID_ANY, port)); return 0
        except OSError as e:
            return int(e.errno == errno.EADDRINUSE)
        finally:
            s.close()
    end = time.time() + 5
    while not taken(BASE) and time.time() < end:
        time.sleep(0.05)
    print(json.dumps({"vsock": "received", "bits": [taken(BASE + 1 + i) for i in range(8)]}))
`

// TestVsockChannelBetweenWorkspaces: episode code in two workspaces
// (campaign without networks) tries a vsock channel, whose ports are one
// table for the whole machine: both ends are refused the socket, so
// nothing is read.
func TestVsockChannelBetweenWorkspaces(t *testing.T) {
	d, cli := realDocker(t)
	img := imageID(t, cli, workbenchImage)
	id := uniqueCampaign(t)
	t.Cleanup(func() { forceRemove(cli, id) })
	a := drivertest.NewHarness(t, &adapter.Adapter{Driver: d, Getenv: keyEnv}, "")
	c, err := a.BringUp(t.Context(), workbenchSpec(id, img, e2eTasks[:2]))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t)
	var sent, got map[string]any
	var wg sync.WaitGroup
	wg.Go(func() { sent = runCode(t, ctx, c.Workspaces[0].Socket, e2eTasks[0], "ROLE = \"send\"\n"+vsockCode) })
	wg.Go(func() { got = runCode(t, ctx, c.Workspaces[1].Socket, e2eTasks[1], "ROLE = \"receive\"\n"+vsockCode) })
	wg.Wait()
	t.Logf("sender %v, receiver %v", sent, got)
	for name, r := range map[string]map[string]any{"sender": sent, "receiver": got} {
		if r["vsock"] != "denied EAFNOSUPPORT" {
			t.Errorf("the %s was not refused its vsock socket: %v", name, r)
		}
	}
	mustVerify(t, a, cli, id)
}

// TestManyWorkspaces: 64 workspaces (a network each: beyond the daemon's
// default pool of 30 networks) come up, attest and go down cleanly; then
// two campaigns of 32 side by side, which get disjoint uid blocks.
func TestManyWorkspaces(t *testing.T) {
	d, cli := realDocker(t)
	img := imageID(t, cli, workbenchImage)
	spec := func(id string, n int) campaign.CampaignSpec {
		tasks := make([]string, n)
		for i := range tasks {
			tasks[i] = e2eTasks[i%len(e2eTasks)]
		}
		s := workbenchSpec(id, img, tasks)
		return s
	}
	t.Run("64_networks", func(t *testing.T) {
		id := uniqueCampaign(t)
		t.Cleanup(func() { forceRemove(cli, id) })
		a := drivertest.NewHarness(t, &adapter.Adapter{Driver: d, Getenv: keyEnv, ReadyTimeout: 5 * time.Minute}, "")
		s := spec(id, 64)
		s.Server.AgentReachable = true
		start := time.Now()
		c, err := a.BringUp(t.Context(), s)
		if err != nil {
			t.Fatal(err)
		}
		up := time.Since(start)
		if len(c.NetworkIDs) != 64 {
			t.Fatalf("%d networks, want 64", len(c.NetworkIDs))
		}
		rep, err := a.Attest(t.Context(), id, adapter.AttestOptions{})
		if err != nil || !rep.OK {
			t.Fatalf("64 workspaces do not attest: %v %v", err, rep.FailedChecks)
		}
		start = time.Now()
		mustVerify(t, a, cli, id)
		t.Logf("64 workspaces with a network each: up %v, down %v", up.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	})
	t.Run("two_32_side_by_side", func(t *testing.T) {
		ids := []string{uniqueCampaign(t), uniqueCampaign(t)}
		t.Cleanup(func() { forceRemove(cli, ids[0]); forceRemove(cli, ids[1]) })
		var wg sync.WaitGroup
		cs := make([]*adapter.Campaign, 2)
		errs := make([]error, 2)
		as := make([]*drivertest.Harness, 2)
		for i := range ids {
			as[i] = drivertest.NewHarness(t, &adapter.Adapter{Driver: d, Getenv: keyEnv, ReadyTimeout: 5 * time.Minute}, "")
			wg.Go(func() { cs[i], errs[i] = as[i].BringUp(t.Context(), spec(ids[i], 32)) })
		}
		wg.Wait()
		if errs[0] != nil || errs[1] != nil {
			t.Fatalf("bring-up: %v / %v", errs[0], errs[1])
		}
		seen := map[int]string{}
		for i, c := range cs {
			for _, ws := range c.Workspaces {
				if other, dup := seen[ws.UIDBase]; dup {
					t.Fatalf("uid block %d given to %s and to campaign %d", ws.UIDBase, other, i)
				}
				seen[ws.UIDBase] = fmt.Sprintf("campaign %d %s", i, ws.AgentID)
			}
		}
		for i := range ids {
			rep, err := as[i].Attest(t.Context(), ids[i], adapter.AttestOptions{})
			if err != nil || !rep.OK {
				t.Fatalf("campaign %d does not attest: %v\n%s", i, err, strings.Join(rep.FailureLines(), "\n"))
			}
		}
		for i := range ids {
			mustVerify(t, as[i], cli, ids[i])
		}
	})
}

// floodCode holds as many processes as the uid may have (RLIMIT_NPROC)
// for holdSeconds, then reports how many it got and its uid.
const floodCode = `import json, os, time
kids = 0
while kids < 200:
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    kids += 1
time.sleep(HOLD)
print(json.dumps({"uid": os.getuid(), "held": kids}))
`

// threadedMedian is a correct solution of the median family that needs
// 24 threads of its uid on every call, as a solution using a thread pool
// would.
const threadedMedian = `import threading

def median(values):
    """Return the median of a non-empty list of integers."""
    out = {}
    def work(i):
        if i == 0:
            ordered = sorted(values)
            middle = len(ordered) // 2
            if len(ordered) % 2:
                out["m"] = ordered[middle]
            else:
                out["m"] = (ordered[middle - 1] + ordered[middle]) / 2
    threads = [threading.Thread(target=work, args=(i,)) for i in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out["m"]
`

// TestProcessFloodStaysInItsWorkspace: agent code holding every process
// its uid may have in one workspace leaves, in another workspace of the
// same campaign and in a workspace of a second campaign on the daemon, a
// correct solution that needs 24 threads per call at full reward; the
// three episodes run under three different kernel uids, each in its
// workspace's block.
func TestProcessFloodStaysInItsWorkspace(t *testing.T) {
	d, cli := realDocker(t)
	img := imageID(t, cli, workbenchImage)
	const task = "software/median@2"
	ids := []string{uniqueCampaign(t), uniqueCampaign(t)}
	t.Cleanup(func() { forceRemove(cli, ids[0]); forceRemove(cli, ids[1]) })
	as := make([]*drivertest.Harness, 2)
	cs := make([]*adapter.Campaign, 2)
	for i, n := range []int{2, 1} {
		as[i] = drivertest.NewHarness(t, &adapter.Adapter{Driver: d, Getenv: keyEnv}, "")
		tasks := make([]string, n)
		for j := range tasks {
			tasks[j] = task
		}
		c, err := as[i].BringUp(t.Context(), workbenchSpec(ids[i], img, tasks))
		if err != nil {
			t.Fatal(err)
		}
		cs[i] = c
	}
	ctx := testenv.Context(t)

	// The flood: workspace 0 of campaign 0, for 8 s.
	flood := make(chan map[string]any, 1)
	floodStart := time.Now()
	var floodEnd time.Time
	go func() {
		got := runCode(t, ctx, cs[0].Workspaces[0].Socket, task, "HOLD = 8\n"+floodCode)
		floodEnd = time.Now()
		flood <- got
	}()
	time.Sleep(2 * time.Second) // the flood forks its processes in well under 1 s

	type result struct {
		where  string
		block  int
		uid    int
		final  oracle.Result
		err    error
		finish time.Time
	}
	victims := []struct {
		where string
		ws    adapter.Workspace
	}{{"campaign 0 workspace 1", cs[0].Workspaces[1]}, {"campaign 1 workspace 0", cs[1].Workspaces[0]}}
	results := make([]result, len(victims))
	var wg sync.WaitGroup
	for i, v := range victims {
		wg.Go(func() {
			r := &results[i]
			r.where, r.block = v.where, v.ws.UIDBase
			defer func() { r.finish = time.Now() }()
			s, err := client.Dial(ctx, v.ws.Socket)
			if err != nil {
				r.err = err
				return
			}
			defer s.Close()
			first, err := s.Reset(ctx, client.ResetOptions{TaskID: task})
			if err != nil {
				r.err = err
				return
			}
			step := workbenchtest.Stepper(ctx, s)
			out, err := step("run_python", map[string]any{"code": "import os\nprint(os.getuid())"})
			if err != nil {
				r.err = err
				return
			}
			fmt.Sscan(out.Output, &r.uid)
			tk, _ := tasks.Build(task)
			r.final, r.err = oracle.Play(tk.Kind, first.Observation.Task, threadedMedian, tk.Files[0].Path, step)
		})
	}
	wg.Wait()
	f := <-flood
	t.Logf("flood %v for %v", f, floodEnd.Sub(floodStart).Round(time.Millisecond))
	for _, r := range results {
		t.Logf("%s (block %d): uid %d, reward %v, done %v after %v: %q %v", r.where, r.block, r.uid, r.final.Reward, r.final.Done,
			r.finish.Sub(floodStart).Round(time.Millisecond), r.final.Output, r.err)
	}
	if f == nil {
		t.FailNow()
	}
	if held, _ := f["held"].(float64); held < 50 {
		t.Fatalf("the flood held only %v processes: no flood, no test", f["held"])
	}
	floodUID := int(f["uid"].(float64))
	if b := cs[0].Workspaces[0].UIDBase; floodUID < b || floodUID >= b+campaign.UIDBlockSize-1 {
		t.Errorf("the flood ran as uid %d, outside its workspace's block %d", floodUID, b)
	}
	uids := map[int]string{floodUID: "the flood"}
	for _, r := range results {
		if r.finish.After(floodEnd) {
			t.Fatalf("%s finished after the flood ended: the test proved nothing", r.where)
		}
		if r.err != nil || !r.final.Done || r.final.Reward != 1.0 {
			t.Errorf("%s: a threaded correct solution got %+v (%v) while another workspace held every process of its uid", r.where, r.final, r.err)
		}
		if r.uid < r.block || r.uid >= r.block+campaign.UIDBlockSize-1 {
			t.Errorf("%s ran episode code as uid %d, outside its block %d", r.where, r.uid, r.block)
		}
		if other, dup := uids[r.uid]; dup {
			t.Errorf("%s and %s ran under one kernel uid %d", r.where, other, r.uid)
		}
		uids[r.uid] = r.where
	}
	for i := range ids {
		mustVerify(t, as[i], cli, ids[i])
	}
}
