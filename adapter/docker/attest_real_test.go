package docker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/adapter/drivertest"
	"github.com/agentpen/agentpen/apikey"
	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/internal/testkit/testlog"
	"github.com/agentpen/agentpen/store"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
)

// realAdapter is an adapter.Adapter on the real rootless daemon whose environment
// holds key, logging into logs; cli is its SDK client, for the tests' own
// tampering.
func realAdapter(t testing.TB, key string, logs *testlog.Buffer) (*drivertest.Harness, *client.Client) {
	t.Helper()
	raw := testenv.RequireDocker(t)
	host, err := ResolveHost(raw, os.Getenv("AGENTPEN_ALLOW_CUSTOM_SOCKET") == "1")
	if err != nil {
		t.Fatal(err)
	}
	d, err := Connect(context.Background(), host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	a := drivertest.NewHarness(t, &adapter.Adapter{Driver: d, Getenv: func(k string) string {
		return map[string]string{campaign.DefaultAPIKeyEnv: key}[k]
	}}, "")
	if logs != nil {
		a.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return a, d.api.(*client.Client)
}

// realCampaign brings up the workbench grader and n workspaces of the
// workbench image and removes them when the test ends (by the journal,
// then, as a last resort, whatever still carries the campaign's label).
func realCampaign(t testing.TB, a *drivertest.Harness, cli *client.Client, n int, edit ...func(*campaign.CampaignSpec)) *adapter.Campaign {
	t.Helper()
	img, err := cli.ImageInspect(context.Background(), testenv.WorkbenchImage())
	if err != nil {
		t.Fatalf("image %s: %v (make images; %s picks another)", testenv.WorkbenchImage(), err, testenv.WorkbenchImageEnv)
	}
	id := fmt.Sprintf("attest-%d", time.Now().UnixNano())
	spec := campaign.CampaignSpec{CampaignID: id, Server: campaign.ServerSpec{Image: img.ID}}
	tasks := []string{"software/median@2", "data/csv_region_total@5", "logs/first_error@1", "config/port_conflict"}
	for i := range n {
		spec.Workspaces = append(spec.Workspaces, campaign.WorkspaceSpec{TaskID: tasks[i%len(tasks)], AttemptID: fmt.Sprint("a", i), Image: img.ID})
	}
	for _, e := range edit {
		e(&spec)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		a.TearDown(ctx, id)
		f := filters.NewArgs(filters.Arg("label", campaign.LabelCampaign+"="+id))
		cs, _ := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
		for _, c := range cs {
			cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
		}
		ns, _ := cli.NetworkList(ctx, network.ListOptions{Filters: f})
		for _, n := range ns {
			cli.NetworkRemove(ctx, n.ID)
		}
		for _, c := range cs {
			if inst := c.Labels[campaign.LabelInstance]; len(inst) >= 16 {
				os.RemoveAll(filepath.Join(dk(a.Adapter).runBase(), runRootName(inst)))
			}
		}
	})
	c, err := a.BringUp(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestAttestRealCampaign: a fresh campaign on the real daemon attests ok
// with every probe, and the canary key is nowhere but in the containers:
// not in the report, the logs, an error or any file under the state
// directory; its fingerprint is in the report.
func TestAttestRealCampaign(t *testing.T) {
	const canary = "canary-attest-key-6b1e94d07c2f"
	var logs testlog.Buffer
	a, cli := realAdapter(t, canary, &logs)
	c := realCampaign(t, a, cli, 2)
	rep, err := a.Attest(t.Context(), c.Plan.CampaignID, adapter.AttestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK {
		t.Fatalf("a fresh campaign does not attest:\n%s", strings.Join(rep.FailureLines(), "\n"))
	}
	// Every probe of the table ran, in every workspace, and passed.
	want := []string{"control", "grader_health", "grader_protected", "host_loopback", "host_addresses", "docker_socket"}
	for _, ws := range []string{"workspaces[0]", "workspaces[1]"} {
		for _, p := range want {
			if _, ok := rep.Connectivity.Checks[ws+".probe."+p]; !ok {
				t.Errorf("no %s.probe.%s check", ws, p)
			}
		}
		if !rep.Custody.Checks[ws+".process"].Pass {
			t.Errorf("%s custody", ws)
		}
	}
	for _, pr := range rep.Connectivity.Probes {
		if !pr.Pass || pr.Outcome == "" {
			t.Errorf("probe %+v", pr)
		}
	}
	if len(rep.Connectivity.Probes) < 2*(1+1+len(attest.GraderProtectedRoutes)+1+1) {
		t.Errorf("only %d probes", len(rep.Connectivity.Probes))
	}
	if rep.Limits.MemoryEnforced || !strings.Contains(rep.Limits.Note, "NOT enforced") {
		t.Errorf("limits on this rootless cgroup v1 daemon: %+v", rep.Limits)
	}
	// The canary: nowhere in the state directory, the logs or the report.
	b, err := os.ReadFile(a.AttestationPath(c.Plan.CampaignID))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), apikey.Fingerprint(canary)) {
		t.Fatal("the report does not name the key's fingerprint")
	}
	if strings.Contains(logs.String(), canary) || !strings.Contains(logs.String(), `"msg":"attestation"`) {
		t.Fatalf("logs hold the key, or no attestation line:\n%s", logs.String())
	}
	filepath.WalkDir(a.StateRoot, func(path string, de fs.DirEntry, err error) error {
		if err == nil && !de.IsDir() {
			if b, _ := os.ReadFile(path); strings.Contains(string(testenv.Readable(b)), canary) {
				t.Errorf("%s holds the key", path)
			}
		}
		return nil
	})
	// A failed attestation's lines and errors carry no key either.
	cli.ContainerRemove(t.Context(), c.Workspaces[1].ContainerID, container.RemoveOptions{Force: true})
	rep, err = a.Attest(t.Context(), c.Plan.CampaignID, adapter.AttestOptions{ProbeTimeout: 500 * time.Millisecond})
	if err != nil || rep.OK {
		t.Fatalf("after removing a workspace: err %v ok %v", err, rep.OK)
	}
	if strings.Contains(strings.Join(rep.FailureLines(), "\n"), canary) {
		t.Fatal("failure lines hold the key")
	}
}

// tamper is one way to break a campaign through the daemon after
// bring-up, and the checks the attestation must then fail.
type tamper struct {
	name string
	do   func(t *testing.T, a *drivertest.Harness, cli *client.Client, c *adapter.Campaign)
	// exact are the failed checks, exactly; atLeast, some of them (when
	// the tampering also takes away the evidence of other checks).
	exact, atLeast []string
	// perAgent runs it on a campaign with a network per agent (the
	// default campaign has no network to tamper with).
	perAgent bool
}

// agentReachable makes a campaign with a network per agent.
func agentReachable(s *campaign.CampaignSpec) { s.Server.AgentReachable = true }

// TestAttestTampered: tampering through the daemon after bring-up makes
// the attestation fail with the right checks.
func TestAttestTampered(t *testing.T) {
	const key = "tamper-test-key-2f8c61d9"
	for _, tt := range []tamper{
		{name: "second_network", exact: []string{"workspaces[0].networks_unplanned"}, perAgent: true,
			do: func(t *testing.T, a *drivertest.Harness, cli *client.Client, c *adapter.Campaign) {
				n, err := cli.NetworkCreate(t.Context(), "agentpen-test-"+c.Plan.Key+"-second", network.CreateOptions{Internal: true, Labels: map[string]string{"agentpen-test": c.Plan.CampaignID}})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					cli.NetworkDisconnect(context.Background(), n.ID, c.Workspaces[0].ContainerID, true)
					cli.NetworkRemove(context.Background(), n.ID)
				})
				if err := cli.NetworkConnect(t.Context(), n.ID, c.Workspaces[0].ContainerID, nil); err != nil {
					t.Fatal(err)
				}
			}},
		// On the default bridge the workspace has outbound NAT: the host's
		// addresses answer, and agentpen's listener there sees it.
		{name: "default_bridge", exact: []string{"workspaces[0].networks_forbidden", "workspaces[0].probe.host_addresses", "connectivity.host_listener"}, perAgent: true,
			do: func(t *testing.T, a *drivertest.Harness, cli *client.Client, c *adapter.Campaign) {
				if err := cli.NetworkConnect(t.Context(), "bridge", c.Workspaces[0].ContainerID, nil); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "extra_labelled_container", exact: []string{"campaign.unexpected_containers"},
			do: func(t *testing.T, a *drivertest.Harness, cli *client.Client, c *adapter.Campaign) {
				handMade(t, cli, &container.Config{Image: c.Plan.Server.Spec.Image, Cmd: []string{"sleep", "600"}, Labels: clone(c.Plan.Server.Labels)}, nil, "agentpen-test-"+c.Plan.Key+"-extra", false)
			}},
		// A workspace joined to another agent's network: a path between
		// agents, which the network's members and the probes show.
		{name: "another_agents_network", atLeast: []string{"workspaces[0].networks_unplanned", "networks[1].members", "workspaces[0].probe.agent_to_agent"}, perAgent: true,
			do: func(t *testing.T, a *drivertest.Harness, cli *client.Client, c *adapter.Campaign) {
				if err := cli.NetworkConnect(t.Context(), c.NetworkIDs[1], c.Workspaces[0].ContainerID, nil); err != nil {
					t.Fatal(err)
				}
			}},
		// Two workspaces given the same uid block by hand.
		{name: "same_uid_block", atLeast: []string{"isolation.uid_blocks_disjoint", "workspaces[0].label.io.agentpen.uid-block", "workspaces[0].probe.uid_block"},
			do: func(t *testing.T, a *drivertest.Harness, cli *client.Client, c *adapter.Campaign) {
				other := c.Plan.Agents[1]
				handMadeWorkspace(t, a, cli, c, key, func(s *containerSpec) {
					s.Config.Labels[campaign.LabelUIDBlock] = other.Labels[campaign.LabelUIDBlock]
					for i, e := range s.Config.Env {
						if strings.HasPrefix(e, "WORKBENCH_UID_BASE=") {
							s.Config.Env[i] = "WORKBENCH_UID_BASE=" + strconv.Itoa(other.UIDBase)
						}
					}
				}, true)
			}},
		{name: "replaced_other_labels", atLeast: []string{"workspaces[0].present", "networks[0].members"}, perAgent: true,
			do: func(t *testing.T, a *drivertest.Harness, cli *client.Client, c *adapter.Campaign) {
				ag := c.Plan.Agents[0]
				cli.ContainerRemove(t.Context(), c.Workspaces[0].ContainerID, container.RemoveOptions{Force: true})
				s := workspaceSpec(c.Plan, ag, runDirOf(t, c.Workspaces[0]), graderDirOf(a.Adapter, c.Plan), key)
				s.Config.Labels = map[string]string{"com.example": "impostor"}
				handMade(t, cli, s.Config, s.HostConfig, ag.Name, true, s.Networking)
			}},
		{name: "replaced_other_image", atLeast: []string{"workspaces[0].present", "campaign.unexpected_containers"},
			do: func(t *testing.T, a *drivertest.Harness, cli *client.Client, c *adapter.Campaign) {
				ag := c.Plan.Agents[0]
				cli.ContainerRemove(t.Context(), c.Workspaces[0].ContainerID, container.RemoveOptions{Force: true})
				base, err := cli.ImageInspect(t.Context(), "agentpen/python-base:bookworm")
				if err != nil {
					t.Fatal(err)
				}
				handMade(t, cli, &container.Config{Image: base.ID, Cmd: []string{"sleep", "600"}, Labels: clone(ag.Labels)}, nil, ag.Name, true)
			}},
		{name: "socket_in_workspace", exact: []string{"workspaces[0].docker_socket", "workspaces[0].probe.docker_socket"},
			do: func(t *testing.T, a *drivertest.Harness, cli *client.Client, c *adapter.Campaign) {
				handMadeWorkspace(t, a, cli, c, key, func(s *containerSpec) {
					s.HostConfig.Mounts = append(s.HostConfig.Mounts, mount.Mount{Type: mount.TypeBind, Source: dk(a.Adapter).Host().SocketPath, Target: "/var/run/docker.sock"})
				})
			}},
		{name: "extra_capability", exact: []string{"workspaces[0].caps", "workspaces[0].process"},
			do: func(t *testing.T, a *drivertest.Harness, cli *client.Client, c *adapter.Campaign) {
				handMadeWorkspace(t, a, cli, c, key, func(s *containerSpec) {
					s.HostConfig.CapAdd = append(s.HostConfig.CapAdd, "CAP_NET_RAW")
				})
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, cli := realAdapter(t, key, nil)
			var edit []func(*campaign.CampaignSpec)
			if tt.perAgent {
				edit = append(edit, agentReachable)
			}
			c := realCampaign(t, a, cli, 2, edit...)
			tt.do(t, a, cli, c)
			// Without the up check: a container replaced by hand is
			// journalled removed after readiness, which makes Attest
			// refuse the campaign as being removed; the evidence is what
			// this test is about.
			_, _, rep, err := a.Observe(t.Context(), c.Plan.CampaignID, adapter.AttestOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK {
				t.Fatal("a tampered campaign attests ok")
			}
			if tt.exact != nil {
				want := slices.Clone(tt.exact)
				sort.Strings(want)
				if !slices.Equal(rep.FailedChecks, want) {
					t.Fatalf("failed %v, want exactly %v:\n%s", rep.FailedChecks, want, strings.Join(rep.FailureLines(), "\n"))
				}
			}
			for _, w := range tt.atLeast {
				if !slices.Contains(rep.FailedChecks, w) {
					t.Errorf("%s not among the failed checks %v", w, rep.FailedChecks)
				}
			}
		})
	}
}

// handMade creates (and, when start, starts) a container the test owns
// and removes when it ends.
func handMade(t *testing.T, cli *client.Client, cfg *container.Config, hc *container.HostConfig, name string, start bool, nc ...*network.NetworkingConfig) string {
	t.Helper()
	var netc *network.NetworkingConfig
	if len(nc) > 0 {
		netc = nc[0]
	}
	resp, err := cli.ContainerCreate(t.Context(), cfg, hc, netc, nil, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.ContainerRemove(context.Background(), resp.ID, container.RemoveOptions{Force: true}) })
	if start {
		if err := cli.ContainerStart(t.Context(), resp.ID, container.StartOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return resp.ID
}

// handMadeWorkspace replaces workspace 0 by one the test creates by hand
// from the same spec, changed by edit, journals it as the campaign's (its
// intent, its id, the old id removed) and waits until it serves.
func handMadeWorkspace(t *testing.T, a *drivertest.Harness, cli *client.Client, c *adapter.Campaign, key string, edit func(*containerSpec), journalOld ...bool) {
	t.Helper()
	old := c.Workspaces[0]
	ag := c.Plan.Agents[0]
	if err := cli.ContainerRemove(t.Context(), old.ContainerID, container.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	s := workspaceSpec(c.Plan, ag, runDirOf(t, old), graderDirOf(a.Adapter, c.Plan), key)
	intent := clone(s.Config.Labels)
	edit(&s)
	id := handMade(t, cli, s.Config, s.HostConfig, s.Name, true, s.Networking)
	sc, err := a.Root.Open(c.Plan.CampaignID)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	j, err := sc.OpenJournal()
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	gen := c.Plan.Generation
	if len(journalOld) == 0 || !journalOld[0] {
		// The hand-made container's own labels are its intent; with
		// journalOld, the journal keeps the planned ones (the tampering is
		// then in the labels).
		intent = s.Config.Labels
	}
	for _, r := range []campaign.Record{
		{Op: campaign.OpIntent, Gen: gen, Kind: campaign.KindContainer, Role: campaign.RoleWork, Name: s.Name, Labels: intent, Note: "created by hand (test)"},
		{Op: campaign.OpCreated, Gen: gen, Kind: campaign.KindContainer, Role: campaign.RoleWork, Name: s.Name, ID: id},
		{Op: campaign.OpRemoved, Gen: gen, Kind: campaign.KindContainer, Role: campaign.RoleWork, Name: s.Name, ID: old.ContainerID},
	} {
		if err := j.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := dk(a.Adapter).waitWorkspace(t.Context(), id, ag.AgentID, old.Socket); err != nil {
		t.Fatal(err)
	}
}

// TestBringUpAttestedHoldsTheLock (real daemon): BringUpAttested attests
// under its hold of the campaign's lock (another agentpen cannot take it
// in between: a down used to remove a campaign while up attested it), and
// a bring-up stopped during its attestation writes no report and leaves a
// campaign that is not up (it read as up, and the API served it as ready,
// unattested); attest refuses it saying why, and down removes it.
func TestBringUpAttestedHoldsTheLock(t *testing.T) {
	a, cli := realAdapter(t, "canary-lock-key-5d0e3f1a2b7c9e4d", nil)
	img, err := cli.ImageInspect(t.Context(), testenv.WorkbenchImage())
	if err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("attest-lock-%d", time.Now().UnixNano())
	spec := campaign.CampaignSpec{CampaignID: id, Server: campaign.ServerSpec{Image: img.ID},
		Workspaces: []campaign.WorkspaceSpec{{TaskID: "software/median@2", Image: img.ID}}}
	t.Cleanup(func() { a.Cleanup(context.Background(), id) })
	other := drivertest.NewHarness(t, &adapter.Adapter{Driver: dk(a.Adapter)}, "")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var lockErr error
	a.Progress = func(p adapter.Progress) {
		if p.Step != adapter.StepAttesting {
			return
		}
		// Another agentpen, another state root, the same daemon.
		locks, err := other.Locks()
		if err != nil {
			lockErr = err
		} else if l, err := locks.Campaign(t.Context(), campaign.Key(id), 50*time.Millisecond); err == nil {
			l.Unlock()
		} else {
			lockErr = err
		}
		cancel() // stop the bring-up during its attestation
	}
	c, rep, err := a.BringUpAttested(ctx, spec, adapter.AttestOptions{})
	if !errors.Is(lockErr, store.ErrLocked) {
		t.Errorf("another agentpen took the campaign's lock during the bring-up's attestation (%v)", lockErr)
	}
	if c == nil || rep != nil || err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("interrupted attestation: campaign %v, report %v, err %v; want the campaign, no report, an interrupted error", c != nil, rep, err)
	}
	if reports, _ := filepath.Glob(filepath.Join(a.CampaignDir(id), "attestation-*")); len(reports) > 0 {
		t.Fatalf("an interrupted attestation wrote a report: %v", reports)
	}
	st, err := a.State(id)
	if err != nil || !st.Ready || st.Attestation != campaign.AttestPending || st.Status != campaign.StatusStartingOrFailed {
		t.Fatalf("state after the interrupted attestation: ready %v attestation %q status %s (%v); want ready, pending, starting_or_failed", st.Ready, st.Attestation, st.Status, err)
	}
	if _, err := a.Attest(t.Context(), id, adapter.AttestOptions{}); !errors.Is(err, adapter.ErrNotUp) || !strings.Contains(err.Error(), "being attested") {
		t.Fatalf("attest of a campaign stopped mid-attestation: %v", err)
	}
	crep, err := a.Cleanup(t.Context(), id)
	if err != nil || !crep.OK {
		t.Fatalf("down: %v %+v", err, crep)
	}
}
