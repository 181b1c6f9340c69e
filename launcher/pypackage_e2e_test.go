package launcher_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

// pyLauncher is a launcher written with the installed agentpen_client
// alone: it drives a campaign's whole life through the launcher API and
// plays an oracle episode through a base_url. It prints a JSON summary.
const pyLauncher = `
import json, sys, time
import agentpen_client as ac

cid, img, oracle_path = sys.argv[1], sys.argv[2], sys.argv[3]
out = {"module": ac.__file__}
c = ac.Client()   # AGENTPEN_URL, AGENTPEN_TOKEN
spec = {"campaign_id": cid, "server": {"image": img}, "pool": 1,
        "workspaces": [{"task_id": "software/median@2", "image": img}]}
v = c.create(spec, wait=False, launcher_timeout=30)   # 202: creating
out["created"] = v["state"]
with c.hold(cid, every=3) as keepalive:                # tied to this launcher: keep it
    stream = c.events(cid)
    for ev in stream:
        if ev["event"] == "state":
            break
    out["first_state"], ready_id = ev["state"], stream.last_event_id
    stream.close()
    ws = c.workspaces(cid)[0]
    with open(oracle_path) as fh:
        fix = fh.read()
    with ac.EpisodeClient(ws["base_url"]) as env:      # <base_url>/ws, the workspace's own task
        obs = env.reset()
        out["task"] = obs["metadata"]["task_id"]
        env.step("read_file", path="solution.py")
        env.step("write_file", path="solution.py", content=fix)
        env.step("run_tests")
        r = env.step("submit", answer="even-length lists: the mean of the two middle values")
        out["reward"], out["done"] = r["reward"], r["done"]
    out["claim"] = c.claim(cid, "sql/top_customer@3", "a1")["pool"]
    out["ttl"] = c.patch(cid, ttl_seconds=7200)["lifetime"]["ttl_seconds"]
    out["gone_at"] = "gone_at" in c.keepalive(cid)
    try:
        c.get("no-such-campaign")
    except ac.NotFound as e:
        out["not_found"] = e.status
    while not c.episodes(cid):                         # collected once a second
        time.sleep(0.5)
    # The events after ready, resumed from there: the claim, the lifetime
    # change, ..., then the removal, to the end of the stream.
    stream = c.events(cid, last_event_id=ready_id)
    after = []
    for ev in stream:
        after.append(ev)
        if ev["event"] == "lifetime":
            break
    out["cleanup"] = c.delete(cid)["status"]
    after.extend(stream)
    out["after"] = [ev["event"] for ev in after]
    out["final"] = after[-1].get("state")
    out["keepalive_error"] = str(keepalive.error or "")
eps = c.episodes(cid)
out["episodes"] = [e["reward"] for e in eps]
print(json.dumps(out))
`

// TestPythonPackage: clients/python installs with pip in a fresh venv
// with no network (both made under unshare -n, where not even the host's
// loopback answers), and the installed package alone (its module in the
// venv, not this tree) drives a campaign's whole life on the real daemon
// through agentpen serve's API: an asynchronous create tied to the
// launcher (keepalives from a thread), its events to ready, an oracle
// episode through the workspace's base_url (reward 1.0), a claim, a
// patch, a keepalive, a typed 404, the episode results, the events
// resumed after ready to the removal, and a verified delete; its
// command, agentpen-client, answers too.
func TestPythonPackage(t *testing.T) {
	l := startLive(t)
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3: %v", err)
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatalf("unshare (util-linux) is needed to install with no network: %v", err)
	}
	tmp := t.TempDir()
	src := filepath.Join(tmp, "src")
	if err := os.CopyFS(src, os.DirFS(filepath.Join("..", "clients", "python"))); err != nil {
		t.Fatal(err)
	}
	venv := filepath.Join(tmp, "venv")
	offline := func(args ...string) {
		t.Helper()
		cmd := exec.CommandContext(testenv.Context(t), unshare, append([]string{"--net", "--"}, args...)...)
		cmd.Dir = tmp
		cmd.Env = append(os.Environ(), "PIP_DISABLE_PIP_VERSION_CHECK=1", "PYTHONDONTWRITEBYTECODE=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v (no network): %v\n%s", args, err, out)
		}
	}
	// No network there: the service on this host's loopback is out of
	// reach too.
	probe := exec.CommandContext(testenv.Context(t), unshare, "--net", "--", py, "-c",
		"import socket, sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=5)", strings.TrimPrefix(l.ts.URL[strings.LastIndex(l.ts.URL, ":"):], ":"))
	if out, err := probe.CombinedOutput(); err == nil {
		t.Fatalf("unshare --net reached the host's loopback: %s", out)
	}
	offline(py, "-m", "venv", venv)
	offline(filepath.Join(venv, "bin", "pip"), "install", "--no-input", src)

	id := "py-pkg-" + randHex(8)
	l.removeOnCleanup(t, id)
	oracle, _ := filepath.Abs(filepath.Join("..", "testdata", "oracles", "software", "median.py"))
	cmd := exec.CommandContext(testenv.Context(t), filepath.Join(venv, "bin", "python"), "-c", pyLauncher, id, l.img, oracle)
	cmd.Dir = tmp // the source tree is not on the path: the venv's package is
	cmd.Env = append(os.Environ(), "AGENTPEN_URL="+l.ts.URL, "AGENTPEN_TOKEN="+l.token, "PYTHONPATH=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the launcher: %v\n%s%s", err, &stdout, &stderr)
	}
	var got struct {
		Module         string    `json:"module"`
		Created        string    `json:"created"`
		FirstState     string    `json:"first_state"`
		Task           string    `json:"task"`
		Reward         float64   `json:"reward"`
		Done           bool      `json:"done"`
		Claim          string    `json:"claim"`
		TTL            int       `json:"ttl"`
		GoneAt         bool      `json:"gone_at"`
		NotFound       int       `json:"not_found"`
		Cleanup        string    `json:"cleanup"`
		After          []string  `json:"after"`
		Final          string    `json:"final"`
		KeepaliveError string    `json:"keepalive_error"`
		Episodes       []float64 `json:"episodes"`
	}
	dec := json.NewDecoder(&stdout)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("the launcher's summary: %v\n%s", err, &stderr)
	}
	t.Logf("%+v", got)
	switch {
	case !strings.HasPrefix(got.Module, venv+"/"):
		t.Errorf("agentpen_client came from %s, not the venv", got.Module)
	case got.Created != "creating" || got.FirstState != "ready":
		t.Errorf("create: %s, then %s", got.Created, got.FirstState)
	case got.Task != "software/median@2" || got.Reward != 1 || !got.Done:
		t.Errorf("the episode through the base_url: task %s, reward %v, done %v", got.Task, got.Reward, got.Done)
	case got.Claim != "warm" || got.TTL != 7200 || !got.GoneAt || got.NotFound != 404 || got.KeepaliveError != "":
		t.Errorf("claim %s, ttl %d, keepalive's gone_at %v, 404 %d, keepalive error %q", got.Claim, got.TTL, got.GoneAt, got.NotFound, got.KeepaliveError)
	case got.Cleanup != "verified" || got.Final != "removed" || len(got.Episodes) == 0 || got.Episodes[0] != 1:
		t.Errorf("delete %s, final state %s, episodes %v", got.Cleanup, got.Final, got.Episodes)
	}
	for _, want := range []string{"claim", "lifetime", "removal_started", "cleanup", "state"} {
		if !strings.Contains(strings.Join(got.After, " "), want) {
			t.Errorf("the events after ready, resumed: %v, no %s", got.After, want)
		}
	}
	// The command it installed.
	cli := exec.CommandContext(testenv.Context(t), filepath.Join(venv, "bin", "agentpen-client"), "get", id)
	cli.Env = append(os.Environ(), "AGENTPEN_URL="+l.ts.URL, "AGENTPEN_TOKEN="+l.token)
	if out, err := cli.Output(); err != nil || !strings.Contains(string(out), `"state": "removed"`) {
		t.Errorf("agentpen-client get: %v\n%s", err, out)
	}
	cli = exec.CommandContext(testenv.Context(t), filepath.Join(venv, "bin", "agentpen-client"), "get", "no-such-campaign")
	cli.Env = append(os.Environ(), "AGENTPEN_URL="+l.ts.URL, "AGENTPEN_TOKEN="+l.token)
	if out, err := cli.CombinedOutput(); exitCode(err) != 1 || !strings.Contains(string(out), "404") {
		t.Errorf("agentpen-client get of no campaign: %v\n%s", err, out)
	}
}

func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
