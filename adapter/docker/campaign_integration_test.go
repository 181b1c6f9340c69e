package docker_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentpen/agentpen/adapter/docker"
	"github.com/agentpen/agentpen/adapter/drivertest"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/store"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

const pythonBase = "agentpen/python-base:bookworm"

// TestMain lets the test binary act as an agentpen process that is killed
// in the middle of a bring-up (TestBringUpKilled).
// It also runs the driver conformance suite's children (drivertest.Main):
// an agentpen killed mid bring-up or mid removal, on the daemon the
// suite's target names (conformanceHostEnv).
func TestMain(m *testing.M) {
	if os.Getenv("AGENTPEN_TEST_BRINGUP_CHILD") == "1" {
		os.Exit(bringUpChild())
	}
	drivertest.Main(m, reopenConformance)
}

// realDocker connects to the rootless daemon or skips/fails per testenv.
func realDocker(t *testing.T) (*docker.Driver, *client.Client) { return realDockerB(t) }

func realDockerB(t testing.TB) (*docker.Driver, *client.Client) {
	t.Helper()
	raw := testenv.RequireDocker(t)
	host, err := docker.ResolveHost(raw, os.Getenv("AGENTPEN_ALLOW_CUSTOM_SOCKET") == "1")
	if err != nil {
		t.Fatal(err)
	}
	d, err := docker.Connect(t.Context(), host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	cli, err := client.NewClientWithOpts(client.WithHost(host.URL), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return d, cli
}

// imageID returns the local id of ref, failing when it is missing.
func imageID(t *testing.T, cli *client.Client, ref string) string { return imageIDB(t, cli, ref) }

func imageIDB(t testing.TB, cli *client.Client, ref string) string {
	t.Helper()
	img, err := cli.ImageInspect(t.Context(), ref)
	if err != nil {
		t.Fatalf("image %s: %v (make images builds it)", ref, err)
	}
	return img.ID
}

func uniqueCampaign(t *testing.T) string {
	b := make([]byte, 4)
	rand.Read(b)
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	return "t-" + name[:min(30, len(name))] + "-" + hex.EncodeToString(b)
}

// owned lists the containers and networks carrying the campaign's label.
// Tests use it to verify; agentpen itself never deletes by label.
func owned(t *testing.T, cli *client.Client, campaignID string) (containers, networks map[string]string) {
	t.Helper()
	f := filters.NewArgs(filters.Arg("label", campaign.LabelCampaign+"="+campaignID))
	cs, err := cli.ContainerList(context.Background(), container.ListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	containers = map[string]string{}
	for _, c := range cs {
		containers[strings.TrimPrefix(c.Names[0], "/")] = c.ID
	}
	ns, err := cli.NetworkList(context.Background(), network.ListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	networks = map[string]string{}
	for _, n := range ns {
		networks[n.Name] = n.ID
	}
	return containers, networks
}

// forceRemove is the tests' own last-resort cleanup of a campaign's
// leftovers (by the ids the label listing found).
func forceRemove(cli *client.Client, campaignID string) {
	ctx := context.Background()
	f := filters.NewArgs(filters.Arg("label", campaign.LabelCampaign+"="+campaignID))
	cs, _ := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	sock := strings.TrimPrefix(os.Getenv("DOCKER_HOST"), "unix://")
	for _, c := range cs {
		cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
		if inst := c.Labels[campaign.LabelInstance]; len(inst) >= 16 && sock != "" {
			os.RemoveAll(filepath.Join(filepath.Dir(sock), "agentpen", "i-"+inst[:16]))
		}
	}
	ns, _ := cli.NetworkList(ctx, network.ListOptions{Filters: f})
	for _, n := range ns {
		cli.NetworkRemove(ctx, n.ID)
	}
}

func sleeperSpec(campaignID, img string, n int) campaign.CampaignSpec {
	s := campaign.CampaignSpec{
		CampaignID: campaignID,
		Server:     campaign.ServerSpec{Image: img, Command: []string{"sleep", "600"}, ReadyCommand: []string{"true"}},
	}
	for i := range n {
		s.Workspaces = append(s.Workspaces, campaign.WorkspaceSpec{TaskID: fmt.Sprintf("software/median@%d", i), Image: img, Command: []string{"sleep", "600"}})
	}
	return s
}

func TestBringUpNeedsKey(t *testing.T) {
	d, cli := realDocker(t)
	img := imageID(t, cli, pythonBase)
	id := uniqueCampaign(t)
	a := drivertest.NewHarness(t, &adapter.Adapter{Driver: d, Getenv: func(string) string { return "" }}, "")
	spec := sleeperSpec(id, img, 1)
	spec.Workspaces[0].Command = nil // the default: the episode server grading remotely
	_, err := a.BringUp(t.Context(), spec)
	if !errors.Is(err, campaign.ErrInvalid) || !strings.Contains(err.Error(), campaign.DefaultAPIKeyEnv) {
		t.Fatalf("err = %v; want a validation error naming %s", err, campaign.DefaultAPIKeyEnv)
	}
	if cs, ns := owned(t, cli, id); len(cs)+len(ns) != 0 {
		t.Fatalf("a refused campaign created %v %v", cs, ns)
	}
}

func TestBringUpBadImage(t *testing.T) {
	d, cli := realDocker(t)
	id := uniqueCampaign(t)
	a := drivertest.NewHarness(t, &adapter.Adapter{Driver: d}, "")
	spec := sleeperSpec(id, "sha256:"+strings.Repeat("ab", 32), 1)
	_, err := a.BringUp(t.Context(), spec)
	if !errors.Is(err, campaign.ErrInvalid) || !strings.Contains(err.Error(), "no such image") {
		t.Fatalf("err = %v; want a validation error naming the missing image", err)
	}
	if cs, ns := owned(t, cli, id); len(cs)+len(ns) != 0 {
		t.Fatalf("a refused campaign created %v %v", cs, ns)
	}
	if _, err := os.Stat(a.CampaignDir(id)); !os.IsNotExist(err) {
		t.Fatalf("a refused campaign left a state directory: %v", err)
	}
}

func TestBringUpNameConflict(t *testing.T) {
	d, cli := realDocker(t)
	img := imageID(t, cli, pythonBase)
	id := uniqueCampaign(t)
	t.Cleanup(func() { forceRemove(cli, id) })
	a := drivertest.NewHarness(t, &adapter.Adapter{Driver: d}, "")
	spec := sleeperSpec(id, img, 1)
	plan := a.Plan(t, spec)
	// Someone else's container already has the server's name.
	squatter, err := cli.ContainerCreate(t.Context(), &container.Config{Image: img, Cmd: []string{"true"}}, nil, nil, nil, plan.Server.Name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.ContainerRemove(context.Background(), squatter.ID, container.RemoveOptions{Force: true}) })

	_, err = a.BringUp(t.Context(), spec)
	if err == nil || !strings.Contains(err.Error(), plan.Server.Name) {
		t.Fatalf("err = %v; want a conflict naming %s", err, plan.Server.Name)
	}
	if _, err := cli.ContainerInspect(t.Context(), squatter.ID); err != nil {
		t.Fatalf("rollback touched a container it did not create: %v", err)
	}
	cs, ns := owned(t, cli, id)
	if len(cs)+len(ns) != 0 {
		t.Fatalf("rollback left %v %v", cs, ns)
	}
	recs, err := a.Records(t, id), error(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range campaign.Resources(recs) {
		if r.ID != "" && !r.Removed {
			t.Fatalf("journal: %+v created and not removed", r)
		}
	}
	if last := recs[len(recs)-1]; !strings.Contains(last.Note, "rolled back") {
		t.Fatalf("last journal record %+v does not say the bring-up was rolled back", last)
	}
}

func TestBringUpNeverReady(t *testing.T) {
	d, cli := realDocker(t)
	img := imageID(t, cli, pythonBase)
	id := uniqueCampaign(t)
	t.Cleanup(func() { forceRemove(cli, id) })
	a := drivertest.NewHarness(t, &adapter.Adapter{Driver: d, ReadyTimeout: 3 * time.Second}, "")
	spec := sleeperSpec(id, img, 1)
	spec.Workspaces[0].Command = []string{"sh", "-c", "echo workbench-not-starting >&2; sleep 600"}
	_, err := a.BringUp(t.Context(), spec)
	if !errors.Is(err, adapter.ErrNotReady) {
		t.Fatalf("err = %v; want ErrNotReady", err)
	}
	if !strings.Contains(err.Error(), "workspace agent-") || !strings.Contains(err.Error(), "workbench-not-starting") {
		t.Fatalf("error should name the workspace and carry its last log lines: %v", err)
	}
	if cs, ns := owned(t, cli, id); len(cs)+len(ns) != 0 {
		t.Fatalf("rollback left %v %v", cs, ns)
	}
}

// bringUpChild is the process TestBringUpKilled kills: a bring-up of many
// workspaces that never become ready.
func bringUpChild() int {
	host, err := docker.ResolveHost(os.Getenv("DOCKER_HOST"), os.Getenv("AGENTPEN_ALLOW_CUSTOM_SOCKET") == "1")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	d, err := docker.Connect(context.Background(), host)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	n := 8
	fmt.Sscan(os.Getenv("WORKSPACES"), &n)
	parallel := 2
	ctx := context.Background()
	if os.Getenv("AGENTPEN_TEST_CATCH_SIGNALS") == "1" {
		// As agentpen up does: a signal cancels the bring-up, which rolls
		// back before the process exits.
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		parallel = adapter.DefaultParallelism
	}
	a := &adapter.Adapter{Driver: d, Parallelism: parallel, ReadyTimeout: 10 * time.Minute}
	root, err := store.CreateRoot(os.Getenv("STATE_ROOT"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	popts, err := root.PlanOptions()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	p, err := campaign.Validate(sleeperSpec(os.Getenv("CAMPAIGN"), os.Getenv("IMAGE"), n), nil, popts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	_, err = a.BringUp(ctx, root, p)
	fmt.Fprintln(os.Stderr, "bring-up returned:", err)
	return 4
}

func TestBringUpKilled(t *testing.T) {
	_, cli := realDocker(t)
	img := imageID(t, cli, pythonBase)
	id := uniqueCampaign(t)
	t.Cleanup(func() { forceRemove(cli, id) })
	state := t.TempDir()
	exe, _ := os.Executable()
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), "AGENTPEN_TEST_BRINGUP_CHILD=1", "STATE_ROOT="+state, "CAMPAIGN="+id, "IMAGE="+img)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	journal := filepath.Join(state, "campaigns", campaign.Key(id), campaign.JournalFile)
	// Kill it once some workspaces exist and others are on their way.
	if !testenv.Until(t, func() bool {
		recs, _ := drivertest.ReadJournal(journal)
		created := 0
		for _, r := range recs {
			if r.Op == campaign.OpCreated && r.Kind == campaign.KindContainer {
				created++
			}
		}
		return created >= 4
	}) {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("bring-up made no progress; child said: %s", stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	// Let any create the daemon was already running finish.
	time.Sleep(2 * time.Second)

	recs, err := drivertest.ReadJournal(journal)
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]campaign.Resource{}
	for _, r := range campaign.Resources(recs) {
		named[r.Name] = r
	}
	cs, ns := owned(t, cli, id)
	if len(cs) < 4 {
		t.Fatalf("only %d containers exist after the kill; the test did not kill mid-bring-up", len(cs))
	}
	for name, cid := range cs {
		r, ok := named[name]
		if !ok || r.Kind != campaign.KindContainer {
			t.Errorf("container %s (%s) exists but the journal does not name it", name, cid[:12])
		}
		if ok && r.ID != "" && r.ID != cid {
			t.Errorf("journal id %s for %s, daemon has %s", r.ID, name, cid)
		}
	}
	for name := range ns {
		if _, ok := named[name]; !ok {
			t.Errorf("network %s exists but the journal does not name it", name)
		}
	}
	// And every journalled id exists (nothing was removed).
	for _, r := range campaign.Resources(recs) {
		if r.Kind == campaign.KindContainer && r.ID != "" {
			if cs[r.Name] != r.ID {
				t.Errorf("journal says %s is %s; daemon has %q", r.Name, r.ID, cs[r.Name])
			}
		}
	}
}

func netInspectOpts() network.InspectOptions { return network.InspectOptions{} }

// TestBringUpCancelled cancels the context in the middle of a bring-up:
// BringUp returns the cancellation and removes everything it created.
func TestBringUpCancelled(t *testing.T) {
	d, cli := realDocker(t)
	img := imageID(t, cli, pythonBase)
	id := uniqueCampaign(t)
	t.Cleanup(func() { forceRemove(cli, id) })
	a := drivertest.NewHarness(t, &adapter.Adapter{Driver: d, Parallelism: 2, ReadyTimeout: time.Minute}, "")
	ctx, cancel := context.WithCancel(t.Context())
	journal := filepath.Join(a.CampaignDir(id), campaign.JournalFile)
	go func() {
		defer cancel()
		for range 3000 {
			recs, _ := drivertest.ReadJournal(journal)
			n := 0
			for _, r := range recs {
				if r.Op == campaign.OpCreated && r.Kind == campaign.KindContainer {
					n++
				}
			}
			if n >= 3 {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	_, err := a.BringUp(ctx, sleeperSpec(id, img, 6))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v; want context.Canceled", err)
	}
	if cs, ns := owned(t, cli, id); len(cs)+len(ns) != 0 {
		t.Fatalf("cancelled bring-up left %v %v", cs, ns)
	}
	recs, _ := drivertest.ReadJournal(journal)
	for _, r := range campaign.Resources(recs) {
		if r.ID != "" && !r.Removed {
			t.Fatalf("journal: %+v not removed", r)
		}
	}
}

// TestCampaignNATPublish: with egress "nat" and a loopback publish, the
// server is reachable from the host on that loopback address only.
func TestCampaignNATPublish(t *testing.T) {
	d, cli := realDocker(t)
	base := imageID(t, cli, pythonBase)
	wb := imageID(t, cli, workbenchImage)
	id := uniqueCampaign(t)
	t.Cleanup(func() { forceRemove(cli, id) })
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	spec := campaign.CampaignSpec{
		CampaignID: id,
		Egress:     campaign.EgressNAT,
		Server: campaign.ServerSpec{
			Image: base, Command: []string{"python3", "-m", "http.server", "8080"},
			PublishLoopback: fmt.Sprintf("127.0.0.1:%d", port),
			ReadyCommand:    []string{"python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/')"},
		},
		Workspaces: []campaign.WorkspaceSpec{{TaskID: "data/csv_region_total", Image: wb}},
	}
	a := drivertest.NewHarness(t, &adapter.Adapter{Driver: d, Getenv: func(k string) string {
		return map[string]string{campaign.DefaultAPIKeyEnv: "nat-test-key-0f3a9c5e7b21d4"}[k]
	}}, "")
	c, err := a.BringUp(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer a.TearDown(context.Background(), id)
	netw, err := cli.NetworkInspect(t.Context(), c.NetworkIDs[0], network.InspectOptions{})
	if err != nil || netw.Internal {
		t.Fatalf("nat network internal=%v err=%v", netw.Internal, err)
	}
	info, err := cli.ContainerInspect(t.Context(), c.ServerID)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range info.HostConfig.PortBindings {
		for _, pb := range b {
			if pb.HostIP != "127.0.0.1" {
				t.Fatalf("bound on %q", pb.HostIP)
			}
		}
	}
	// The port is published by rootlesskit's port driver, which may
	// come after the server's readiness: until the test's deadline.
	var resp *http.Response
	testenv.Until(t, func() bool {
		resp, err = http.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
		return err == nil
	})
	if err != nil {
		t.Fatalf("published server unreachable on loopback: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
}
