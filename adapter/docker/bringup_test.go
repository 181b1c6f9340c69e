package docker

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/adapter/drivertest"
	"github.com/agentpen/agentpen/apikey"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/cleanup"
	"github.com/agentpen/agentpen/internal/testkit/dockerfake"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/store"
)

const fakeImage = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// fakeAdapter is an adapter.Adapter on a fake daemon whose socket path is a file in
// a temporary directory (run directories are made beside it).
func fakeAdapter(t *testing.T) (*drivertest.Harness, *dockerfake.Daemon) {
	t.Helper()
	// A short directory: workbench socket paths under it must fit in a
	// unix socket address, as under /run/user/<uid>.
	base, err := os.MkdirTemp("/tmp", "apf")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	sock := filepath.Join(base, "rootless", "docker.sock")
	if err := os.MkdirAll(filepath.Dir(sock), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	host, err := ResolveHost("unix://"+sock, false)
	if err != nil {
		t.Fatal(err)
	}
	fake := dockerfake.New()
	fake.AddImage("agentpen/workbench:dev", fakeImage)
	d, err := connect(t.Context(), host, fake.Client())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	env := map[string]string{campaign.DefaultAPIKeyEnv: "k3y-for-the-fake-daemon-0123456789"}
	return drivertest.NewHarness(t, &adapter.Adapter{Driver: d, Getenv: func(k string) string { return env[k] }, Parallelism: 1}, ""), fake
}

func fakeSpec(id string, workspaces int) campaign.CampaignSpec {
	s := campaign.CampaignSpec{CampaignID: id, Server: campaign.ServerSpec{Image: fakeImage}}
	for i := range workspaces {
		s.Workspaces = append(s.Workspaces, campaign.WorkspaceSpec{TaskID: "software/median", AttemptID: string(rune('a' + i)), Image: fakeImage})
	}
	return s
}

// journalled returns the campaign's folded journal.
func journalled(t *testing.T, a *drivertest.Harness, id string) []campaign.Resource {
	t.Helper()
	recs, err := a.Records(t, id), error(nil)
	if err != nil {
		t.Fatal(err)
	}
	return campaign.Resources(recs)
}

// deleted returns the ids of the DELETE calls to kind ("containers",
// "networks"), in order.
func deleted(fake *dockerfake.Daemon, kind string) []string {
	var ids []string
	for _, c := range fake.CallsTo("DELETE /" + kind + "/{id}") {
		ids = append(ids, strings.TrimPrefix(c.Path, "/"+kind+"/"))
	}
	return ids
}

// checkRolledBack asserts that every journalled resource with an id was
// removed, and that the DELETE calls named exactly those ids.
func checkRolledBack(t *testing.T, a *drivertest.Harness, fake *dockerfake.Daemon, id string) (containers, networks []string) {
	t.Helper()
	for _, r := range journalled(t, a, id) {
		if r.ID != "" && !r.Removed {
			t.Errorf("journalled %s %s (%s) not removed", r.Kind, r.Name, r.ID)
		}
		switch {
		case r.ID == "":
		case r.Kind == campaign.KindContainer:
			containers = append(containers, r.ID)
		case r.Kind == campaign.KindNetwork:
			networks = append(networks, r.ID)
		case r.Kind == campaign.KindDir:
			if _, err := os.Lstat(r.ID); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("run directory %s still exists (%v)", r.ID, err)
			}
		}
	}
	for kind, want := range map[string][]string{"containers": containers, "networks": networks} {
		got := deleted(fake, kind)
		slices.Sort(got)
		w := slices.Sorted(slices.Values(want))
		if !slices.Equal(got, w) {
			t.Errorf("DELETE %s = %v, want exactly the journalled ids %v", kind, got, w)
		}
	}
	return containers, networks
}

func TestBringUpFailures(t *testing.T) {
	tests := []struct {
		name   string
		script func(t *testing.T, fake *dockerfake.Daemon, p *campaign.Plan)
		// want: journalled containers and networks (with ids) after the failure.
		wantContainers, wantNetworks int
		wantErr                      string
		// survivors: model resources that must outlive the rollback.
		survivors int
		// noJournal: refused before the campaign's journal was made.
		noJournal bool
		// none: the default topology (no network); the rest have a network
		// per agent.
		none bool
	}{
		{
			name: "network_create_500",
			script: func(t *testing.T, fake *dockerfake.Daemon, p *campaign.Plan) {
				fake.On("POST /networks/create", dockerfake.Reply{Status: 500, Body: "boom"})
			},
			wantErr: "create network",
		},
		{
			// The daemon made the network but the client heard an error:
			// its labels prove it is ours, so it is adopted and removed
			// (the second is never asked for: the first failure stops the
			// bring-up, one create at a time here).
			name: "network_create_500_applied",
			script: func(t *testing.T, fake *dockerfake.Daemon, p *campaign.Plan) {
				fake.On("POST /networks/create", dockerfake.Reply{Status: 500, Body: "timeout", Apply: true})
			},
			wantNetworks: 1, wantErr: "create network",
		},
		{
			// A twin campaign (same id, another state root) already has
			// resources with the campaign's labels: refused before anything
			// is created, and nothing of the twin's is touched.
			name: "twin_refused",
			script: func(t *testing.T, fake *dockerfake.Daemon, p *campaign.Plan) {
				fake.AddNetwork(dockerfake.Network{Name: p.Networks[0].Name, Driver: "bridge", Internal: true, Labels: p.Networks[0].Labels})
			},
			wantErr: "conflict", survivors: 1, noJournal: true,
		},
		{
			// The second network's name is taken by a network the label
			// check cannot see (made between the check and the create): a
			// conflict is never adopted, so it is never removed; the first
			// network is.
			name: "network_create_409_never_adopted",
			script: func(t *testing.T, fake *dockerfake.Daemon, p *campaign.Plan) {
				fake.AddNetwork(dockerfake.Network{Name: p.Networks[1].Name, Driver: "bridge", Internal: true})
			},
			wantNetworks: 1, wantErr: "already exists", survivors: 1,
		},
		{
			name: "server_create_500",
			script: func(t *testing.T, fake *dockerfake.Daemon, p *campaign.Plan) {
				fake.On("POST /containers/create", dockerfake.Reply{Status: 500, Body: "boom"})
			},
			wantNetworks: 2, wantErr: "create server",
		},
		{
			name: "none_server_create_500", none: true,
			script: func(t *testing.T, fake *dockerfake.Daemon, p *campaign.Plan) {
				fake.On("POST /containers/create", dockerfake.Reply{Status: 500, Body: "boom"})
			},
			wantErr: "create server",
		},
		{
			name: "none_second_workspace_create_500", none: true,
			script: func(t *testing.T, fake *dockerfake.Daemon, p *campaign.Plan) {
				fake.On("POST /containers/create", dockerfake.Pass, dockerfake.Pass, dockerfake.Reply{Status: 500, Body: "boom"})
			},
			wantContainers: 2, wantErr: "create workspace",
		},
		{
			name: "server_create_409_never_adopted",
			script: func(t *testing.T, fake *dockerfake.Daemon, p *campaign.Plan) {
				fake.AddContainer(dockerfake.Container{Name: p.Server.Name, Image: fakeImage, Labels: map[string]string{"squatter": "yes"}})
			},
			wantNetworks: 2, wantErr: "already in use", survivors: 1,
		},
		{
			name: "server_start_500",
			script: func(t *testing.T, fake *dockerfake.Daemon, p *campaign.Plan) {
				fake.On("POST /containers/{id}/start", dockerfake.Reply{Status: 500, Body: "cannot start"})
			},
			wantContainers: 1, wantNetworks: 2, wantErr: "start server",
		},
		{
			name: "second_workspace_create_500",
			script: func(t *testing.T, fake *dockerfake.Daemon, p *campaign.Plan) {
				fake.On("POST /containers/create", dockerfake.Pass, dockerfake.Pass, dockerfake.Reply{Status: 500, Body: "boom"})
			},
			wantContainers: 2, wantNetworks: 2, wantErr: "create workspace",
		},
		{
			// The container went away between the rollback's inspect and
			// its removal: NotFound on the removal counts as removed.
			name: "removal_not_found",
			script: func(t *testing.T, fake *dockerfake.Daemon, p *campaign.Plan) {
				fake.On("POST /containers/{id}/start", dockerfake.Reply{Status: 500, Body: "cannot start"})
				fake.On("DELETE /containers/{id}", dockerfake.Reply{Status: 404, Body: "No such container", Apply: true})
			},
			wantContainers: 1, wantNetworks: 2, wantErr: "start server",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, fake := fakeAdapter(t)
			spec := fakeSpec("fail-"+tt.name, 2)
			spec.Server.AgentReachable = !tt.none
			tt.script(t, fake, a.Plan(t, spec))
			before := len(fake.Containers()) + len(fake.Networks())
			_, err := a.BringUp(t.Context(), spec)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("BringUp error %v, want one saying %q", err, tt.wantErr)
			}
			if tt.noJournal {
				if _, err := os.Stat(filepath.Join(a.CampaignDir(spec.CampaignID), campaign.JournalFile)); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("a refused bring-up made a journal (%v)", err)
				}
				if calls := fake.CallsTo("POST /networks/create"); len(calls) != 0 || len(fake.CallsTo("DELETE /networks/{id}")) != 0 {
					t.Fatalf("a refused bring-up created or removed something: %v", fake.Calls())
				}
				return
			}
			containers, networks := checkRolledBack(t, a, fake, spec.CampaignID)
			if len(containers) != tt.wantContainers || len(networks) != tt.wantNetworks {
				t.Errorf("journalled %d containers %d networks, want %d and %d", len(containers), len(networks), tt.wantContainers, tt.wantNetworks)
			}
			if before != tt.survivors {
				t.Fatalf("test set-up: %d resources before, want %d", before, tt.survivors)
			}
			if left := len(fake.Containers()) + len(fake.Networks()); left != tt.survivors {
				t.Errorf("the daemon holds %d resources after the rollback, want %d (%v %v)", left, tt.survivors, fake.Containers(), fake.Networks())
			}
			// Every intent is in the journal: what may exist is named.
			for _, r := range journalled(t, a, spec.CampaignID) {
				if r.Name == "" {
					t.Errorf("a journalled resource has no name: %+v", r)
				}
			}
		})
	}
}

func TestBringUpRefusesExistingCampaign(t *testing.T) {
	a, _ := fakeAdapter(t)
	spec := fakeSpec("twice", 1)
	j := a.OpenJournal(t, spec.CampaignID)
	if err := j.Append(campaign.Record{Op: campaign.OpIntent, Kind: campaign.KindNetwork, Name: "n"}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	_, err := a.BringUp(t.Context(), spec)
	if !errors.Is(err, adapter.ErrCampaignExists) || !errors.Is(err, adapter.ErrConflict) {
		t.Fatalf("BringUp over a journal with live resources: %v, want adapter.ErrCampaignExists", err)
	}
	want := `campaign "twice" already exists: its generation 0 has 1 resources not verified removed (journal in ` + a.CampaignDir("twice") + `); run agentpen down twice first`
	if err.Error() != want {
		t.Fatalf("message\n%s\nwant\n%s", err, want)
	}
}

func TestTearDownRequiresOwnership(t *testing.T) {
	want := map[string]string{campaign.LabelCampaign: "c", campaign.LabelOwner: campaign.OwnerValue, campaign.LabelRole: campaign.RoleServer}
	tests := []struct {
		name       string
		labels     map[string]string
		wantDelete bool
	}{
		{"labels_match", map[string]string{campaign.LabelCampaign: "c", campaign.LabelOwner: campaign.OwnerValue, campaign.LabelRole: campaign.RoleServer, "x": "y"}, true},
		{"other_campaign", map[string]string{campaign.LabelCampaign: "d", campaign.LabelOwner: campaign.OwnerValue, campaign.LabelRole: campaign.RoleServer}, false},
		{"no_labels", nil, false},
		{"missing_role", map[string]string{campaign.LabelCampaign: "c", campaign.LabelOwner: campaign.OwnerValue}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, fake := fakeAdapter(t)
			fake.AddContainer(dockerfake.Container{ID: "c1", Name: "srv", Labels: tt.labels})
			j := a.OpenJournal(t, "c")
			for _, r := range []campaign.Record{
				{Op: campaign.OpIntent, Kind: campaign.KindContainer, Role: campaign.RoleServer, Name: "srv", Labels: want},
				{Op: campaign.OpCreated, Kind: campaign.KindContainer, Role: campaign.RoleServer, Name: "srv", ID: "c1"},
			} {
				if err := j.Append(r); err != nil {
					t.Fatal(err)
				}
			}
			j.Close()
			rep, err := a.Cleanup(t.Context(), "c")
			dels := deleted(fake, "containers")
			if tt.wantDelete {
				if err != nil || !slices.Equal(dels, []string{"c1"}) || rep.Status != cleanup.Verified {
					t.Fatalf("err %v, deletes %v, status %s; want one delete of c1, verified", err, dels, rep.Status)
				}
				return
			}
			if !errors.Is(err, adapter.ErrNotVerified) || len(dels) != 0 {
				t.Fatalf("err %v, deletes %v; want adapter.ErrNotVerified and nothing deleted", err, dels)
			}
			if len(rep.LeftAlone) != 1 || rep.LeftAlone[0].ID != "c1" || !strings.Contains(rep.LeftAlone[0].Reason, "not_ours") {
				t.Fatalf("left alone %+v, want c1 as not ours", rep.LeftAlone)
			}
		})
	}
}

func TestCleanupTransientInspectRefuses(t *testing.T) {
	a, fake := fakeAdapter(t)
	a.CleanupTimeout = 500 * time.Millisecond
	spec := fakeSpec("transient", 1)
	fake.On("POST /containers/{id}/start", dockerfake.Reply{Status: 500, Body: "cannot start"})
	// The rollback's inspect fails with a daemon error until the deadline:
	// nothing is removed on unknown evidence, the report fails, and the
	// journal still names the container.
	fake.On("GET /containers/{id}/json", dockerfake.Reply{Status: 500, Body: "daemon busy"})
	_, err := a.BringUp(t.Context(), spec)
	if !errors.Is(err, adapter.ErrNotVerified) {
		t.Fatalf("BringUp error %v, want the rollback's adapter.ErrNotVerified", err)
	}
	if dels := deleted(fake, "containers"); len(dels) != 0 {
		t.Fatalf("removed %v on a 500 inspect", dels)
	}
	var live int
	for _, r := range journalled(t, a, spec.CampaignID) {
		if r.Kind == campaign.KindContainer && r.ID != "" && !r.Removed {
			live++
		}
	}
	if live != 1 {
		t.Fatalf("journal names %d live containers, want the 1 left for cleanup", live)
	}
	if got := fake.Containers(); len(got) != 1 {
		t.Fatalf("the daemon holds %v, want the one container left alone", got)
	}
	// The daemon recovers: a later cleanup removes it and verifies.
	fake.On("GET /containers/{id}/json", dockerfake.Pass)
	rep, err := a.Cleanup(t.Context(), spec.CampaignID)
	if err != nil || rep.Status != cleanup.Verified || len(fake.Containers()) != 0 {
		t.Fatalf("cleanup after recovery: %v, status %s, left %v", err, rep.Status, fake.Containers())
	}
}

// TestBringUpCancelledCreateCompletesLater: the bring-up is cancelled
// while a workspace create is in flight and the daemon completes that
// create afterwards. The rollback must find it (one inspect right after
// the cancel used to miss it, and the container leaked in Created state).
func TestBringUpCancelledCreateCompletesLater(t *testing.T) {
	a, fake := fakeAdapter(t)
	spec := fakeSpec("cancelled", 3)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var n atomic.Int32
	fake.OnFunc("POST /containers/create", func(c dockerfake.Call) dockerfake.Reply {
		if n.Add(1) == 3 { // the second workspace
			cancel()
			time.Sleep(300 * time.Millisecond)
		}
		return dockerfake.Pass
	})
	_, err := a.BringUp(ctx, spec)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "cleanup verified") {
		t.Fatalf("BringUp error %v, want cancelled and a verified rollback", err)
	}
	// Let the in-flight create land if the rollback did not wait for it.
	testenv.WaitFor(t, "the fake's calls carried out", func() bool { return fake.InFlight() == 0 })
	if left := fake.Containers(); len(left) != 0 {
		t.Fatalf("containers left after the rollback: %v", left)
	}
	checkRolledBack(t, a, fake, spec.CampaignID)
}

// TestCleanupRetriesThroughARestart: the daemon drops connections and
// answers 503 for a while (a restart) in the middle of a cleanup; the
// cleanup retries within its deadline and ends verified.
func TestCleanupRetriesThroughARestart(t *testing.T) {
	a, fake := fakeAdapter(t)
	a.CleanupTimeout = 300 * time.Millisecond
	spec := fakeSpec("restart", 2)
	fake.On("POST /containers/{id}/start", dockerfake.Reply{Status: 500, Body: "cannot start"})
	fake.On("GET /containers/{id}/json", dockerfake.Reply{Status: 500, Body: "busy"})
	if _, err := a.BringUp(t.Context(), spec); err == nil {
		t.Fatal("bring-up succeeded")
	}
	a.CleanupTimeout = 30 * time.Second
	down := []dockerfake.Reply{{Drop: true}, {Status: 503, Body: "restarting"}, {Drop: true}, dockerfake.Pass}
	fake.On("GET /containers/{id}/json", down...)
	fake.On("DELETE /containers/{id}", down...)
	fake.On("GET /networks/{id}", down...)
	fake.On("GET /containers/json", down...)
	rep, err := a.Cleanup(t.Context(), spec.CampaignID)
	if err != nil || rep.Status != cleanup.Verified {
		t.Fatalf("cleanup through a restart: %v (failed %v)", err, rep.FailedChecks)
	}
	if left := fake.Containers(); len(left) != 0 {
		t.Fatalf("left %v", left)
	}
}

// TestBringUpRefusesLongSocketPath: a daemon whose socket directory is too
// long for the workbench's socket address is refused before anything is
// created.
func TestBringUpRefusesLongSocketPath(t *testing.T) {
	base, err := os.MkdirTemp("/tmp", "apl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	// Short enough for the daemon's own socket, too long for the
	// workbench's below it.
	long := filepath.Join(base, strings.Repeat("d", 40), "rootless", "docker.sock")
	if err := os.MkdirAll(filepath.Dir(long), 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(long, nil, 0o600)
	host, err := ResolveHost("unix://"+long, false)
	if err != nil {
		t.Fatal(err)
	}
	fake := dockerfake.New()
	fake.AddImage("x", fakeImage)
	d, err := connect(t.Context(), host, fake.Client())
	if err != nil {
		t.Fatal(err)
	}
	a := drivertest.NewHarness(t, &adapter.Adapter{Driver: d, Getenv: func(string) string { return "k3y-for-the-fake-daemon-0123456789" }}, "")
	if _, err := a.BringUp(t.Context(), fakeSpec("long", 1)); err == nil || !strings.Contains(err.Error(), "unix socket address") {
		t.Fatalf("BringUp: %v, want the socket-path refusal", err)
	}
	if calls := fake.CallsTo("POST /networks/create"); len(calls) != 0 {
		t.Fatalf("created a network: %v", calls)
	}
}

// TestCleanupListingFailsClosed: a label listing that never answers (here
// a 404 for the list route itself) is not "nothing left".
func TestCleanupListingFailsClosed(t *testing.T) {
	a, fake := fakeAdapter(t)
	a.CleanupTimeout = 300 * time.Millisecond
	spec := fakeSpec("listing", 1)
	fake.On("POST /containers/{id}/start", dockerfake.Reply{Status: 500, Body: "cannot start"})
	// The first listing (the twin check) answers; every later one is a 404.
	fake.On("GET /containers/json", dockerfake.Pass, dockerfake.Reply{Status: 404, Body: "page not found"})
	_, err := a.BringUp(t.Context(), spec)
	if !errors.Is(err, adapter.ErrNotVerified) {
		t.Fatalf("BringUp: %v, want a rollback not verified", err)
	}
	// The report, not the error (which names three checks): on a loaded
	// machine the 300 ms can end before the listing, and then other
	// checks fail too, but never this one.
	st, err := a.State(spec.CampaignID)
	if err != nil || st.CleanupReport == "" {
		t.Fatalf("the rollback's report is not in the journal: %+v %v", st, err)
	}
	b, err := os.ReadFile(filepath.Join(a.CampaignDir(spec.CampaignID), st.CleanupReport))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		FailedChecks []string `json:"failed_checks"`
	}
	if err := json.Unmarshal(b, &rep); err != nil || !slices.Contains(rep.FailedChecks, "labelled_none_left") {
		t.Fatalf("the rollback's report fails %v (%v), want labelled_none_left among them", rep.FailedChecks, err)
	}
}

// TestBringUpRefusesKey: an unset, placeholder, publicly documented or
// short key is refused before anything is created, with the exact message
// agentpen up prints: it names the fingerprint, never the value, and ends
// with how to make a key.
func TestBringUpRefusesKey(t *testing.T) {
	const fix = "; make one: export AGENTPEN_API_KEY=$(openssl rand -hex 32)"
	for _, tt := range []struct{ name, key, want string }{
		{"unset", "", "server.api_key_env: AGENTPEN_API_KEY is unset or empty" + fix},
		{"changeme", "changeme", "server.api_key_env: AGENTPEN_API_KEY holds a placeholder or a publicly documented example key (fingerprint 057ba03d6c441048), not a real key" + fix},
		{"template", "${AGENTPEN_API_KEY}", "server.api_key_env: AGENTPEN_API_KEY holds a placeholder or a publicly documented example key (fingerprint " + apikey.Fingerprint("${AGENTPEN_API_KEY}") + "), not a real key" + fix},
		{"replace_me", "replace-me-please-0123456789", "server.api_key_env: AGENTPEN_API_KEY holds a placeholder or a publicly documented example key (fingerprint " + apikey.Fingerprint("replace-me-please-0123456789") + "), not a real key" + fix},
		{"short", "k3y-0f-23-characters-xx", "server.api_key_env: AGENTPEN_API_KEY holds a key shorter than 24 characters" + fix},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, fake := fakeAdapter(t)
			a.Getenv = func(k string) string { return map[string]string{campaign.DefaultAPIKeyEnv: tt.key}[k] }
			_, err := a.BringUp(t.Context(), fakeSpec("refused-key", 1))
			var ve *campaign.ValidationError
			if !errors.As(err, &ve) || ve.Field != "server.api_key_env" {
				t.Fatalf("err %v, want a ValidationError on server.api_key_env", err)
			}
			if err.Error() != tt.want {
				t.Fatalf("message\n%s\nwant\n%s", err, tt.want)
			}
			if n := len(fake.CallsTo("POST /networks/create")) + len(fake.CallsTo("POST /containers/create")); n != 0 {
				t.Fatalf("%d creates for a refused key", n)
			}
		})
	}
}

// TestReportsOfEachGeneration: each generation's cleanup report is a file
// of its own, never moved or rewritten; while generation 2 comes up,
// nothing speaks for it but its journal (generation 1's verified report
// used to sit in cleanup.json until it was set aside), and the journal
// names the report of the latest generation.
func TestReportsOfEachGeneration(t *testing.T) {
	a, fake := fakeAdapter(t)
	spec := fakeSpec("gens", 1)
	dir := a.CampaignDir(spec.CampaignID)
	readReport := func(name string) (cleanup.Report, []byte) {
		t.Helper()
		var rep cleanup.Report
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || json.Unmarshal(b, &rep) != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return rep, b
	}
	// Generation 1 fails at its server and is rolled back, verified.
	fake.On("POST /containers/create", dockerfake.Reply{Status: 500, Body: "boom"})
	if _, err := a.BringUp(t.Context(), spec); err == nil {
		t.Fatal("BringUp succeeded")
	}
	rep1, raw1 := readReport("cleanup-1-1.json")
	if rep1.Generation != 1 || rep1.Status != cleanup.Verified || rep1.WrittenAt.IsZero() || rep1.Instance == "" {
		t.Fatalf("generation 1's report: generation %d %s at %v instance %q", rep1.Generation, rep1.Status, rep1.WrittenAt, rep1.Instance)
	}
	// Generation 2 stops at its first create: by then its state says no
	// cleanup of it, whatever files are beside the journal.
	var during store.State
	fake.OnFunc("POST /containers/create", func(dockerfake.Call) dockerfake.Reply {
		during, _ = a.State(spec.CampaignID)
		return dockerfake.Reply{Status: 500, Body: "boom"}
	})
	if _, err := a.BringUp(t.Context(), spec); err == nil {
		t.Fatal("BringUp succeeded")
	}
	if during.Latest().N != 2 || during.Cleanup != "" || during.CleanupReport != "" || during.Status != campaign.StatusStartingOrFailed {
		t.Fatalf("state while generation 2 came up: %+v", during)
	}
	if _, raw := readReport("cleanup-1-1.json"); string(raw) != string(raw1) {
		t.Fatal("generation 1's report changed")
	}
	rep2, _ := readReport("cleanup-2-1.json")
	st, err := a.State(spec.CampaignID)
	if err != nil || st.CleanupReport != "cleanup-2-1.json" {
		t.Fatalf("state: %+v %v", st, err)
	}
	if g := st.Latest(); rep2.Generation != 2 || rep2.Instance != g.Instance || rep2.Instance == rep1.Instance {
		t.Fatalf("generation 2's report names generation %d instance %q; the journal's latest is %d %q", rep2.Generation, rep2.Instance, g.N, g.Instance)
	}
}

// TestInFlightCreateAfterSiblingConflict: one create is refused with a
// conflict (a squatter holds its name) while a sibling's create is in
// flight, and the daemon carries the sibling's out after the bring-up
// gave up on it. The sibling's create must fail as cancelled, and be
// resolved and removed by the rollback. With errgroup.WithContext (agent
// networks) the sibling's create failed with the squatter's conflict
// instead (the HTTP client returns the context's cause), was journalled
// as never created and leaked; TestBringUpNameConflict caught the same
// for a workspace created beside the server on the real daemon.
func TestInFlightCreateAfterSiblingConflict(t *testing.T) {
	tests := []struct {
		name  string
		route string
		none  bool
	}{
		{name: "container", route: "POST /containers/create", none: true},
		{name: "network", route: "POST /networks/create"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, fake := fakeAdapter(t)
			a.Parallelism = 2
			spec := fakeSpec("sibling-"+tt.name, 2)
			spec.Server.AgentReachable = !tt.none
			p := a.Plan(t, spec)
			squatted := p.Server.Name
			if tt.none {
				fake.AddContainer(dockerfake.Container{Name: squatted, Image: fakeImage, Labels: map[string]string{"squatter": "yes"}})
			} else {
				squatted = p.Networks[0].Name
				fake.AddNetwork(dockerfake.Network{Name: squatted, Driver: "bridge", Internal: true})
			}
			sibling := make(chan struct{})
			var once sync.Once
			fake.OnFunc(tt.route, func(c dockerfake.Call) dockerfake.Reply {
				name := c.Query.Get("name")
				if name == "" { // a network's name is in its body
					var body struct{ Name string }
					json.Unmarshal(c.Body, &body)
					name = body.Name
				}
				if name == squatted {
					<-sibling // the conflict once the sibling's create is in flight
					return dockerfake.Pass
				}
				first := false
				once.Do(func() { first = true; close(sibling) })
				if first {
					time.Sleep(300 * time.Millisecond) // the bring-up gives up on it meanwhile
				}
				return dockerfake.Pass
			})
			_, err := a.BringUp(t.Context(), spec)
			if err == nil || !strings.Contains(err.Error(), squatted) || !strings.Contains(err.Error(), "cleanup verified") {
				t.Fatalf("BringUp: %v, want the conflict on %s and a verified rollback", err, squatted)
			}
			// A create the rollback missed would have landed now.
			testenv.WaitFor(t, "the fake's calls carried out", func() bool { return fake.InFlight() == 0 })
			if n := len(fake.Containers()) + len(fake.Networks()); n != 1 {
				t.Fatalf("the daemon holds %d resources after the rollback, want the squatter only: %v %v", n, fake.Containers(), fake.Networks())
			}
			checkRolledBack(t, a, fake, spec.CampaignID)
		})
	}
}

// TestRunDirLinkNeverFollowed: the daemon's user owns the runtime
// directory the run directories live in; one that replaces a run root by
// a link to a directory of root's, holding a directory of the run
// directory's name, made down remove root's directory through it
// (os.RemoveAll of the path followed the link). Now the link is never
// followed: the run directory is left alone as not ours, and what the
// link points at is untouched.
func TestRunDirLinkNeverFollowed(t *testing.T) {
	for _, where := range []string{"run_root", "run_dir"} {
		t.Run(where, func(t *testing.T) {
			a, _ := fakeAdapter(t)
			c := fakeCampaign(t, a, fakeSpec("linked", 1))
			runDir := runDirOf(t, c.Workspaces[0])
			victim := t.TempDir()
			precious := filepath.Join(victim, filepath.Base(runDir), "precious")
			os.MkdirAll(filepath.Dir(precious), 0o700)
			os.WriteFile(precious, []byte("root's\n"), 0o600)
			planted := runDir
			target := filepath.Join(victim, filepath.Base(runDir))
			if where == "run_root" {
				planted, target = filepath.Dir(runDir), victim
			}
			if err := os.RemoveAll(planted); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, planted); err != nil {
				t.Fatal(err)
			}
			rep, err := a.Cleanup(t.Context(), "linked")
			if !errors.Is(err, adapter.ErrNotVerified) {
				t.Fatalf("cleanup through a planted link: %v, want not verified", err)
			}
			if b, err := os.ReadFile(precious); err != nil || string(b) != "root's\n" {
				t.Fatalf("what the link points at: %q %v", b, err)
			}
			var left bool
			for _, e := range rep.LeftAlone {
				left = left || e.ID == runDir && strings.Contains(e.Reason, "never followed")
			}
			if !left {
				t.Fatalf("the run directory is not left alone as a link: %+v", rep.LeftAlone)
			}
		})
	}
}
