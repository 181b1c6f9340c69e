package launcher_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/adapter/docker"
	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/agentpen/agentpen/api"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/cleanup"
	"github.com/agentpen/agentpen/internal/testkit/oracle"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/internal/testkit/testlog"
	"github.com/agentpen/agentpen/internal/testkit/workbenchtest"
	"github.com/agentpen/agentpen/launcher"
	apiclient "github.com/agentpen/agentpen/launcher/client"
	"github.com/agentpen/agentpen/store"
	"github.com/agentpen/agentpen/workbench/client"
	"github.com/agentpen/agentpen/workbench/results"
)

// e2eTasks are the four workspaces' tasks: a code task and three answer
// kinds, each with its variant.
var e2eTasks = []string{"software/median@2", "data/csv_region_total@5", "logs/first_error@1", "config/port_conflict"}

// liveService is agentpen serve in the test: the real adapter on the
// rootless daemon, the API on an httptest server.
type liveService struct {
	a      *adapter.Adapter
	root   *store.Root
	srv    *launcher.Server
	ts     *httptest.Server
	img    string
	token  string
	apiKey string
	logs   *testlog.Buffer
	state  string
	// answers holds every body the API answered, for the secret scan.
	answers testlog.Buffer
}

func startLive(t testing.TB) *liveService {
	t.Helper()
	testenv.RequireDocker(t)
	testenv.RequireRoot(t) // the proxy connects to the workbench as host root
	host, err := docker.HostFromEnv(os.Getenv, false)
	if err != nil {
		t.Fatal(err)
	}
	d, err := docker.Connect(t.Context(), host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	img, err := d.Resolve(t.Context(), testenv.WorkbenchImage())
	if err != nil {
		t.Fatalf("no image %s on the daemon (make images): %v", testenv.WorkbenchImage(), err)
	}
	return startLiveOn(t, d, img)
}

// startLiveOn is agentpen serve in the test on the runtime of d, its
// campaigns running img.
func startLiveOn(t testing.TB, d driver.Driver, img string) *liveService {
	t.Helper()
	l := &liveService{img: img, token: "tok-" + randHex(40), apiKey: "canary-key-" + randHex(16), logs: &testlog.Buffer{}, state: t.TempDir()}
	logger := slog.New(slog.NewJSONHandler(l.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	root, err := store.CreateRoot(l.state)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	l.root = root
	l.a = &adapter.Adapter{Driver: d, Logger: logger, ReadyTimeout: 2 * time.Minute,
		Getenv: func(k string) string {
			if k == campaign.DefaultAPIKeyEnv {
				return l.apiKey
			}
			return ""
		}}
	key, err := root.Secret(launcher.KeyFile, launcher.KeyBytes)
	if err != nil {
		t.Fatal(err)
	}
	toks, err := launcher.ParseTokens("l.token", l.token)
	if err != nil {
		t.Fatal(err)
	}
	l.ts = httptest.NewUnstartedServer(nil)
	l.srv, err = launcher.New(launcher.Config{Adapter: l.a, Root: root, Tokens: toks, Key: key, PublicURL: "http://" + l.ts.Listener.Addr().String(), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	l.ts.Config.Handler = l.srv.Handler()
	l.ts.Start()
	t.Cleanup(func() {
		l.srv.Close(context.Background())
		l.ts.Close()
	})
	return l
}

// verify verifies the campaign's removal, read-only.
func (l *liveService) verify(t testing.TB, id string) (*cleanup.Report, error) {
	t.Helper()
	c, err := l.root.Open(id)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return l.a.Verify(t.Context(), c)
}

// load rebuilds the campaign from its state directory.
func (l *liveService) load(t *testing.T, id string) (*adapter.Campaign, error) {
	t.Helper()
	c, err := l.root.Open(id)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return l.a.Load(c)
}

func randHex(n int) string {
	b := make([]byte, n/2)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// removeOnCleanup removes the campaign by exact id when a test ends with
// it still up, and fails when anything of it remains.
func (l *liveService) removeOnCleanup(t testing.TB, id string) {
	t.Cleanup(func() {
		ctx, cancel := testenv.CleanupContext(t)
		defer cancel()
		c, err := l.root.Open(id)
		if err != nil {
			return // never created
		}
		defer c.Close()
		if _, err := l.a.Verify(ctx, c); err == nil {
			return
		}
		if _, _, err := l.a.Cleanup(ctx, c, campaign.ReasonDown); err != nil {
			t.Errorf("cleanup of %s: %v", id, err)
		}
	})
}

func (l *liveService) call(t testing.TB, method, path string, body []byte) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), method, l.ts.URL+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+l.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	l.answers.Write(b)
	return resp.StatusCode, b
}

func (l *liveService) spec(id string, taskIDs []string) []byte {
	s := campaign.CampaignSpec{CampaignID: id, Server: campaign.ServerSpec{Image: l.img}, Labels: map[string]string{"com.example.launcher": "api-e2e"}}
	for i, tid := range taskIDs {
		s.Workspaces = append(s.Workspaces, campaign.WorkspaceSpec{TaskID: tid, AttemptID: fmt.Sprint("a", i), Image: l.img})
	}
	b, _ := json.Marshal(s)
	return b
}

func (l *liveService) create(t testing.TB, id string, taskIDs []string) api.CampaignView {
	t.Helper()
	l.removeOnCleanup(t, id)
	start := time.Now()
	v, err := apiclient.New(l.ts.URL, l.token, nil).Create(t.Context(), l.spec(id, taskIDs))
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Logf("create through the API (bring-up + attestation) of %d workspaces: %v", len(taskIDs), time.Since(start).Round(time.Millisecond))
	return *v
}

// playThroughProxy plays the bound task's oracle through baseURL. A
// reset asking for another task is refused as bound; a bare one plays
// the workspace's task.
func playThroughProxy(t *testing.T, baseURL, bound, asked string) {
	ctx := testenv.Context(t)
	s, err := client.Dial(ctx, baseURL)
	if err != nil {
		t.Errorf("%s: %v", bound, err)
		return
	}
	defer s.Close()
	// A step before any reset is refused by the proxy with OpenEnv's
	// error frame: it never reaches the workspace, where it would start
	// an episode of the catalogue's default task.
	_, err = s.Step(ctx, "list_files", nil)
	var se *client.ServerError
	if !errors.As(err, &se) || se.Code != "EXECUTION_ERROR" || !strings.Contains(se.Message, "reset") {
		t.Errorf("%s: a step before any reset: %v, want an EXECUTION_ERROR frame saying to reset first", bound, err)
		return
	}
	if r, err := s.Reset(ctx, client.ResetOptions{TaskID: asked}); err == nil || !strings.Contains(err.Error(), "bound to its task") {
		var served any
		if r != nil {
			served = r.Metadata["task_id"]
		}
		t.Errorf("asked for %s in the workspace bound to %s: %v (served %v), want refused as bound", asked, bound, err, served)
		return
	}
	r, err := s.Reset(ctx, client.ResetOptions{})
	if err != nil {
		t.Errorf("%s: reset: %v", bound, err)
		return
	}
	if served := r.Metadata["task_id"]; served != bound {
		t.Errorf("a bare reset in the workspace bound to %s played %v", bound, served)
		return
	}
	if _, err := oracle.PlayTask(bound, r.Observation.Task, workbenchtest.Stepper(ctx, s)); err != nil {
		t.Error(err)
	}
}

// TestAPIEndToEnd is the launcher's whole job on the real daemon, through
// HTTP only: create a campaign of four workspaces, play an oracle episode
// in each at once through the proxy (a reset asking for another task
// refused first, on the base_url and on the workspace's own socket),
// attest (ok), delete (verified), and nothing of it remains; no secret,
// capability or task id reached the logs or the state directory.
func TestAPIEndToEnd(t *testing.T) {
	l := startLive(t)
	id := "api-e2e-" + randHex(8)
	v := l.create(t, id, e2eTasks)
	if len(v.Workspaces) != 4 || v.State != campaign.StatusReady.String() || v.Attestation == nil || !v.Attestation.OK {
		t.Fatalf("created %+v", v)
	}
	var wg sync.WaitGroup
	start := time.Now()
	for i, w := range v.Workspaces {
		if w.TaskID != e2eTasks[i] {
			t.Fatalf("workspace %d bound to %s, want %s", i, w.TaskID, e2eTasks[i])
		}
		asked := e2eTasks[(i+1)%len(e2eTasks)]
		wg.Go(func() { playThroughProxy(t, w.BaseURL, w.TaskID, asked) })
	}
	wg.Wait()
	t.Logf("four concurrent oracle episodes through the proxy: %v", time.Since(start).Round(time.Millisecond))
	checkSocketsBound(t, l, v)
	if t.Failed() {
		t.FailNow()
	}
	measureOverhead(t, l, v)

	code, b := l.call(t, http.MethodPost, "/v1/campaigns/"+id+"/attestation", nil)
	if code != http.StatusOK {
		t.Fatalf("attest: %d %s", code, b)
	}
	var rep struct {
		OK           bool     `json:"ok"`
		FailedChecks []string `json:"failed_checks"`
	}
	json.Unmarshal(b, &rep)
	if !rep.OK {
		t.Fatalf("attestation not ok: %v", rep.FailedChecks)
	}
	if code, b := l.call(t, http.MethodGet, "/v1/campaigns/"+id+"/attestation", nil); code != http.StatusOK || !bytes.Contains(b, []byte(`"ok":true`)) {
		t.Errorf("stored attestation: %d %.200s", code, b)
	}

	start = time.Now()
	code, b = l.call(t, http.MethodDelete, "/v1/campaigns/"+id, nil)
	if code != http.StatusOK || !bytes.Contains(b, []byte(`"status":"verified"`)) {
		t.Fatalf("delete: %d %.400s", code, b)
	}
	t.Logf("delete through the API (cleanup verified): %v", time.Since(start).Round(time.Millisecond))
	if code, b := l.call(t, http.MethodGet, "/v1/campaigns/"+id+"/cleanup", nil); code != http.StatusOK || !bytes.Contains(b, []byte(`"status":"verified"`)) {
		t.Errorf("stored cleanup report: %d %.200s", code, b)
	}
	// Nothing remains: every journalled id absent, nothing labelled.
	if rep, err := l.verify(t, id); err != nil {
		t.Fatalf("verify after delete: %v (%v)", err, rep.FailedChecks)
	}
	if found, err := l.a.Driver.List(t.Context(), campaign.LabelCampaign+"="+id); err != nil || len(found) > 0 {
		t.Fatalf("after delete the daemon still has %v (%v)", found, err)
	}
	// Every workspace's oracle episode left its result, kept after the
	// removal, each of the workspace's own task (read with the Go client).
	eps, err := apiclient.New(l.ts.URL, l.token, nil).Episodes(t.Context(), id, -1)
	if err != nil {
		t.Fatalf("episodes after delete: %v", err)
	}
	graded := map[int]bool{}
	for _, e := range eps {
		if e.TaskID != v.Workspaces[e.Workspace].TaskID || e.AgentID != v.Workspaces[e.Workspace].AgentID {
			t.Errorf("a result of workspace %d names %s/%s", e.Workspace, e.TaskID, e.AgentID)
		}
		if e.End == results.EndSubmitted && e.Reward == 1 {
			graded[e.Workspace] = true
		}
	}
	if len(graded) != len(v.Workspaces) {
		t.Errorf("graded oracle results for workspaces %v of %d: %+v", graded, len(v.Workspaces), eps)
	}
	for _, w := range v.Workspaces {
		resp, err := http.Get(w.BaseURL + "/health")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("a removed workspace's base_url: %d", resp.StatusCode)
		}
	}
	// Secrets and task ids: see checkNoSecrets.
	var urls []string
	for _, w := range v.Workspaces {
		urls = append(urls, w.BaseURL)
	}
	l.checkNoSecrets(t, urls, e2eTasks)
}

// checkNoSecrets: the token, the API key, the workspaces' capabilities
// (the last element of each base_url) and the task ids are in no log
// line; no API answer holds the token or the API key; no state file
// holds the token, the API key or a capability.
func (l *liveService) checkNoSecrets(t *testing.T, baseURLs, taskIDs []string) {
	t.Helper()
	logs := l.logs.String()
	secrets := []string{l.token, l.apiKey}
	for _, u := range baseURLs {
		secrets = append(secrets, u[strings.LastIndex(u, "/")+1:])
	}
	for _, s := range append(secrets, taskIDs...) {
		if strings.Contains(logs, s) {
			t.Errorf("the logs hold %.12s...", s)
		}
	}
	for _, s := range []string{l.token, l.apiKey} {
		if strings.Contains(l.answers.String(), s) {
			t.Errorf("an API answer holds %.12s...", s)
		}
	}
	if !strings.Contains(logs, `"route":"/episode/{capability}/ws"`) {
		t.Error("no access log line for the proxy's sessions")
	}
	filepath.Walk(l.state, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(path)
		b = testenv.Readable(b) // a signed report: its payload too
		for _, s := range secrets {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("%s holds a secret (%.8s...)", path, s)
			}
		}
		return nil
	})
}

// checkSocketsBound: behind the proxy, each workspace's episode server
// is bound too (the bind file agentpen wrote at bring-up): on its unix
// socket, a reset naming another task is refused whoever asks.
func checkSocketsBound(t *testing.T, l *liveService, v api.CampaignView) {
	c, err := l.load(t, v.CampaignID)
	if err != nil {
		t.Fatal(err)
	}
	for i, ws := range c.Workspaces {
		hc := docker.UnixHTTPClient(ws.Socket, 30*time.Second)
		other := e2eTasks[(i+1)%len(e2eTasks)]
		resp, err := hc.Post("http://workbench/reset", "application/json", strings.NewReader(`{"task_id":"`+other+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		hc.CloseIdleConnections()
		if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(b), "bound to its task") {
			t.Errorf("workspace %d's socket: a reset naming %s: %d %.300s", i, other, resp.StatusCode, b)
		}
	}
}

// measureOverhead times state round trips through the proxy and straight
// to the workspace's socket (the proxy's added latency per step).
func measureOverhead(t *testing.T, l *liveService, v api.CampaignView) {
	const n = 200
	ctx := testenv.Context(t)
	c, err := l.load(t, v.CampaignID)
	if err != nil {
		t.Fatal(err)
	}
	direct := workbenchtest.Dial(t, ctx, c.Workspaces[0].Socket)
	proxied := workbenchtest.Dial(t, ctx, v.Workspaces[0].BaseURL)
	round := func(s *client.Session) time.Duration {
		var times []time.Duration
		for range n {
			start := time.Now()
			if _, err := s.State(ctx); err != nil {
				t.Fatal(err)
			}
			times = append(times, time.Since(start))
		}
		sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
		return times[n/2]
	}
	d, p := round(direct), round(proxied)
	t.Logf("state round trip, median of %d: direct %v, through the proxy %v (overhead %v)", n, d, p, p-d)
}

// taskScan runs as agent code in a workspace (run_python, a sandbox uid)
// after a reset through the proxy, and reports every place it can read
// that spells a needle: every readable file, its own workspace's included (but /proc, /sys and /dev,
// whose processes are read apart), the argv and environment of every
// process it may read, its own environment and host name. The needles
// arrive XORed so that the code itself (its argv, its file) never spells
// them.
const taskScan = `import json, os, socket
KEY = 0x5a
NEEDLES = [bytes(b ^ KEY for b in bytes.fromhex(h)) for h in %s]
hits, files, procs = [], 0, 0
def check(where, data):
    low = data.lower()
    for n in NEEDLES:
        if n.lower() in low:
            hits.append(where)
            return
# The episode's own workspace is reachable only by its path (its parent
# is closed to the uid), so it is walked as a root of its own.
walks = [os.walk("/", onerror=lambda e: None), os.walk(os.getcwd(), onerror=lambda e: None)]
for root, dirs, names in (entry for w in walks for entry in w):
    if root == "/":
        dirs[:] = [d for d in dirs if d not in ("proc", "sys", "dev")]
    for name in names:
        p = os.path.join(root, name)
        try:
            if os.path.islink(p) or not os.path.isfile(p):
                continue
            with open(p, "rb") as f:
                data = f.read(4 << 20)
        except OSError:
            continue
        files += 1
        check(p, data)
        check("name " + p, p.encode())
for pid in os.listdir("/proc"):
    if not pid.isdigit():
        continue
    for part in ("cmdline", "environ", "comm"):
        try:
            with open("/proc/%%s/%%s" %% (pid, part), "rb") as f:
                data = f.read()
        except OSError:
            continue
        procs += 1
        check("/proc/%%s/%%s" %% (pid, part), data)
check("env", repr(dict(os.environ)).encode())
check("hostname", socket.gethostname().encode())
print(json.dumps({"files": files, "procs": procs, "hits": hits[:20]}))
`

// TestTaskIDInvisibleToAgents: after a reset through the proxy, agent
// code in the workspace finds the task id nowhere it can read (files,
// argv and environment of the processes it may read, names); the scan
// finds a planted copy, so it would find the real one.
func TestTaskIDInvisibleToAgents(t *testing.T) {
	l := startLive(t)
	id := "api-scan-" + randHex(8)
	bound := []string{"config/port_conflict@3", "software/median@2"}
	v := l.create(t, id, bound)
	for i, w := range v.Workspaces {
		needles := []string{bound[i], strings.SplitN(bound[i], "@", 2)[0], strings.ReplaceAll(strings.SplitN(bound[i], "@", 2)[0], "/", "-")}
		var hexes []string
		for _, n := range needles {
			x := []byte(n)
			for j := range x {
				x[j] ^= 0x5a
			}
			hexes = append(hexes, `"`+hex.EncodeToString(x)+`"`)
		}
		code := fmt.Sprintf(taskScan, "["+strings.Join(hexes, ",")+"]")
		ctx, cancel := context.WithCancel(testenv.Context(t))
		e := workbenchtest.Dial(t, ctx, w.BaseURL)
		if r, err := e.Reset(ctx, client.ResetOptions{}); err != nil || r.Metadata["task_id"] != bound[i] {
			t.Fatalf("reset: %v, want %s served", err, bound[i])
		}
		step := workbenchtest.Stepper(ctx, e)
		scan := func() map[string]any {
			r, err := step("run_python", map[string]any{"code": code})
			if err != nil || r.Error != "" {
				t.Fatalf("run_python: %v %s", err, r.Error)
			}
			var out map[string]any
			if err := json.Unmarshal([]byte(oracle.LastLine(r.Output)), &out); err != nil {
				t.Fatalf("scan output %q: %v", r.Output, err)
			}
			return out
		}
		out := scan()
		t.Logf("workspace %d: scanned %v files and %v process files", i, out["files"], out["procs"])
		if hits := out["hits"].([]any); len(hits) > 0 {
			t.Errorf("workspace %d: agent code reads its task id at %v", i, hits)
		}
		if out["files"].(float64) < 100 || out["procs"].(float64) < 3 {
			t.Errorf("workspace %d: the scan read too little to prove anything: %v", i, out)
		}
		// The control: a file that spells the task id is found.
		if _, err := step("write_file", map[string]any{"path": "planted.txt", "content": "x " + strings.ToUpper(bound[i]) + " x"}); err != nil {
			t.Fatal(err)
		}
		if hits := scan()["hits"].([]any); len(hits) == 0 {
			t.Errorf("workspace %d: the scan missed a planted copy of the task id", i)
		}
		e.Close()
		cancel()
	}
	if code, b := l.call(t, http.MethodDelete, "/v1/campaigns/"+id, nil); code != http.StatusOK {
		t.Fatalf("delete: %d %.300s", code, b)
	}
}

// TestAPIClientGoneRollsBack: a launcher that gives up on its create in
// the middle of the bring-up leaves nothing behind: the bring-up is
// cancelled and rolled back by exact id (verified), and the journal
// says so.
func TestAPIClientGoneRollsBack(t *testing.T) {
	l := startLive(t)
	id := "api-gone-" + randHex(8)
	l.removeOnCleanup(t, id)
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, l.ts.URL+"/v1/campaigns", bytes.NewReader(l.spec(id, e2eTasks)))
	req.Header.Set("Authorization", "Bearer "+l.token)
	// Give up once the journal shows creates under way.
	go func() {
		journal := filepath.Join(l.root.CampaignDir(id), campaign.JournalFile)
		for ctx.Err() == nil {
			if b, err := os.ReadFile(journal); err == nil && bytes.Count(b, []byte(`"op":"created"`)) >= 2 {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
	}()
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the create answered %d before the client gave up", resp.StatusCode)
	}
	// The handler finishes the rollback after the client has gone.
	var err error
	if !testenv.Until(t, func() bool {
		rep, verr := l.verify(t, id)
		err = verr
		return err == nil && rep.OK
	}) {
		t.Fatalf("the cancelled bring-up left resources: %v", err)
	}
	// The rollback's verdict, then the bring-up's failure, are journalled
	// (the second just after the verification can see the removal).
	if !testenv.Until(t, func() bool {
		c, err := l.root.Open(id)
		if err != nil {
			t.Fatal(err)
		}
		st, rerr := c.Read()
		c.Close()
		err = rerr
		return err == nil && st.RollbackNote != "" && st.Cleanup == campaign.CleanupVerified
	}) {
		b, _ := os.ReadFile(filepath.Join(l.root.CampaignDir(id), campaign.JournalFile))
		t.Fatalf("the journal does not record the rollback (%v):\n%s", err, b)
	}
	// Listed as removed (its journal says so), with nothing to hand out,
	// once the handler has returned (it reads creating until then).
	var listed []byte
	if !testenv.Until(t, func() bool {
		code, b := l.call(t, http.MethodGet, "/v1/campaigns", nil)
		if code != http.StatusOK || bytes.Contains(b, []byte("base_url")) ||
			!bytes.Contains(b, []byte(`"state":"removed"`)) && !bytes.Contains(b, []byte(`"state":"creating"`)) {
			t.Fatalf("after the rollback: %d %s", code, b)
		}
		listed = b
		return bytes.Contains(b, []byte(`"state":"removed"`))
	}) {
		t.Fatalf("still creating at the test's deadline, long after the rollback was verified: %s", listed)
	}
}
