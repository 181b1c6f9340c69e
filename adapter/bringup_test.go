package adapter

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/dockerfake"
)

const fakeImage = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// fakeAdapter is an Adapter on a fake daemon whose socket path is a file in
// a temporary directory (run directories are made beside it).
func fakeAdapter(t *testing.T) (*Adapter, *dockerfake.Daemon) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "rootless", "docker.sock")
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
	return &Adapter{Docker: d, StateRoot: t.TempDir(), Getenv: func(k string) string { return env[k] }, Parallelism: 1}, fake
}

func fakeSpec(id string, workspaces int) campaign.CampaignSpec {
	s := campaign.CampaignSpec{CampaignID: id, Server: campaign.ServerSpec{Image: fakeImage}}
	for i := range workspaces {
		s.Workspaces = append(s.Workspaces, campaign.WorkspaceSpec{TaskID: "software/median", AttemptID: string(rune('a' + i)), Image: fakeImage})
	}
	return s
}

// journalled returns the campaign's folded journal.
func journalled(t *testing.T, a *Adapter, id string) []campaign.Resource {
	t.Helper()
	recs, err := campaign.ReadJournal(filepath.Join(a.CampaignDir(id), campaign.JournalFile))
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
func checkRolledBack(t *testing.T, a *Adapter, fake *dockerfake.Daemon, id string) (containers, networks []string) {
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
		script func(t *testing.T, fake *dockerfake.Daemon, spec campaign.CampaignSpec)
		// want: journalled containers and networks (with ids) after the failure.
		wantContainers, wantNetworks int
		wantErr                      string
		// survivors: model resources that must outlive the rollback.
		survivors int
	}{
		{
			name: "network_create_500",
			script: func(t *testing.T, fake *dockerfake.Daemon, _ campaign.CampaignSpec) {
				fake.On("POST /networks/create", dockerfake.Reply{Status: 500, Body: "boom"})
			},
			wantErr: "create network",
		},
		{
			// The daemon made the network but the client heard an error:
			// its labels prove it is ours, so it is adopted and removed.
			name: "network_create_500_applied",
			script: func(t *testing.T, fake *dockerfake.Daemon, _ campaign.CampaignSpec) {
				fake.On("POST /networks/create", dockerfake.Reply{Status: 500, Body: "timeout", Apply: true})
			},
			wantNetworks: 1, wantErr: "create network",
		},
		{
			// A twin campaign's network has the name and the same labels:
			// a conflict is never adopted, so it is never removed.
			name: "network_create_409_never_adopted",
			script: func(t *testing.T, fake *dockerfake.Daemon, spec campaign.CampaignSpec) {
				p, err := campaign.NewPlan(spec)
				if err != nil {
					t.Fatal(err)
				}
				fake.AddNetwork(dockerfake.Network{Name: p.Network.Name, Driver: "bridge", Internal: true, Labels: p.Network.Labels})
			},
			wantErr: "already exists", survivors: 1,
		},
		{
			name: "server_create_500",
			script: func(t *testing.T, fake *dockerfake.Daemon, _ campaign.CampaignSpec) {
				fake.On("POST /containers/create", dockerfake.Reply{Status: 500, Body: "boom"})
			},
			wantNetworks: 1, wantErr: "create server",
		},
		{
			name: "server_create_409_never_adopted",
			script: func(t *testing.T, fake *dockerfake.Daemon, spec campaign.CampaignSpec) {
				p, err := campaign.NewPlan(spec)
				if err != nil {
					t.Fatal(err)
				}
				fake.AddContainer(dockerfake.Container{Name: p.Server.Name, Image: fakeImage, Labels: p.Server.Labels})
			},
			wantNetworks: 1, wantErr: "already in use", survivors: 1,
		},
		{
			name: "server_start_500",
			script: func(t *testing.T, fake *dockerfake.Daemon, _ campaign.CampaignSpec) {
				fake.On("POST /containers/{id}/start", dockerfake.Reply{Status: 500, Body: "cannot start"})
			},
			wantContainers: 1, wantNetworks: 1, wantErr: "start server",
		},
		{
			name: "second_workspace_create_500",
			script: func(t *testing.T, fake *dockerfake.Daemon, _ campaign.CampaignSpec) {
				fake.On("POST /containers/create", dockerfake.Pass, dockerfake.Pass, dockerfake.Reply{Status: 500, Body: "boom"})
			},
			wantContainers: 2, wantNetworks: 1, wantErr: "create workspace",
		},
		{
			// The container went away between the rollback's inspect and
			// its removal: NotFound on the removal counts as removed.
			name: "removal_not_found",
			script: func(t *testing.T, fake *dockerfake.Daemon, _ campaign.CampaignSpec) {
				fake.On("POST /containers/{id}/start", dockerfake.Reply{Status: 500, Body: "cannot start"})
				fake.On("DELETE /containers/{id}", dockerfake.Reply{Status: 404, Body: "No such container", Apply: true})
			},
			wantContainers: 1, wantNetworks: 1, wantErr: "start server",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, fake := fakeAdapter(t)
			spec := fakeSpec("fail-"+tt.name, 2)
			tt.script(t, fake, spec)
			before := len(fake.Containers()) + len(fake.Networks())
			_, err := a.BringUp(t.Context(), spec)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("BringUp error %v, want one saying %q", err, tt.wantErr)
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
	j, err := campaign.OpenJournal(a.CampaignDir(spec.CampaignID))
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Append(campaign.Record{Op: campaign.OpIntent, Kind: campaign.KindNetwork, Name: "n"}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	if _, err := a.BringUp(t.Context(), spec); !errors.Is(err, ErrCampaignExists) {
		t.Fatalf("BringUp over a journal with live resources: %v, want ErrCampaignExists", err)
	}
}

func TestTearDownRequiresOwnership(t *testing.T) {
	want := map[string]string{campaign.LabelCampaign: "c", campaign.LabelOwner: campaign.OwnerValue, campaign.LabelRole: campaign.RoleServer}
	tests := []struct {
		name       string
		labels     map[string]string
		wantDelete bool
		wantErr    error
	}{
		{"labels_match", map[string]string{campaign.LabelCampaign: "c", campaign.LabelOwner: campaign.OwnerValue, campaign.LabelRole: campaign.RoleServer, "x": "y"}, true, nil},
		{"other_campaign", map[string]string{campaign.LabelCampaign: "d", campaign.LabelOwner: campaign.OwnerValue, campaign.LabelRole: campaign.RoleServer}, false, ErrNotOwned},
		{"no_labels", nil, false, ErrNotOwned},
		{"missing_role", map[string]string{campaign.LabelCampaign: "c", campaign.LabelOwner: campaign.OwnerValue}, false, ErrNotOwned},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, fake := fakeAdapter(t)
			fake.AddContainer(dockerfake.Container{ID: "c1", Name: "srv", Labels: tt.labels})
			j, err := campaign.OpenJournal(a.CampaignDir("c"))
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range []campaign.Record{
				{Op: campaign.OpIntent, Kind: campaign.KindContainer, Role: campaign.RoleServer, Name: "srv", Labels: want},
				{Op: campaign.OpCreated, Kind: campaign.KindContainer, Role: campaign.RoleServer, Name: "srv", ID: "c1"},
			} {
				if err := j.Append(r); err != nil {
					t.Fatal(err)
				}
			}
			j.Close()
			err = a.TearDown(t.Context(), "c")
			dels := deleted(fake, "containers")
			if tt.wantDelete {
				if err != nil || !slices.Equal(dels, []string{"c1"}) {
					t.Fatalf("err %v, deletes %v; want one delete of c1", err, dels)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) || len(dels) != 0 {
				t.Fatalf("err %v, deletes %v; want %v and nothing deleted", err, dels, tt.wantErr)
			}
		})
	}
}

func TestTearDownTransientInspectRefuses(t *testing.T) {
	a, fake := fakeAdapter(t)
	spec := fakeSpec("transient", 1)
	fake.On("POST /containers/{id}/start", dockerfake.Reply{Status: 500, Body: "cannot start"})
	// The rollback's inspect fails with a daemon error: nothing is removed
	// on unknown evidence, and the journal still names the container.
	fake.On("GET /containers/{id}/json", dockerfake.Reply{Status: 500, Body: "daemon busy"})
	_, err := a.BringUp(t.Context(), spec)
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("BringUp error %v, want the rollback's ErrRefused", err)
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
}

// TestBringUpRefusesPlaceholderKey: a placeholder or publicly documented
// key is refused before anything is created, and the error names its
// fingerprint, never its value.
func TestBringUpRefusesPlaceholderKey(t *testing.T) {
	for _, key := range []string{"changeme", "${AGENTPEN_API_KEY}", "replace-me-please"} {
		a, fake := fakeAdapter(t)
		a.Getenv = func(k string) string { return map[string]string{campaign.DefaultAPIKeyEnv: key}[k] }
		_, err := a.BringUp(t.Context(), fakeSpec("placeholder-key", 1))
		var ve *campaign.ValidationError
		if !errors.As(err, &ve) || ve.Field != "server.api_key_env" {
			t.Fatalf("key %q: err %v, want a ValidationError on server.api_key_env", key, err)
		}
		if strings.Contains(err.Error(), key) {
			t.Fatalf("the error repeats the key: %v", err)
		}
		if n := len(fake.CallsTo("POST /networks/create")) + len(fake.CallsTo("POST /containers/create")); n != 0 {
			t.Fatalf("%d creates for a placeholder key", n)
		}
	}
}
