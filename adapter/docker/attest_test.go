package docker

import (
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/adapter/drivertest"
	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/dockerfake"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/store"
)

// TestAttestObservationFaults: daemon answers that fail (a 500, a dropped
// connection, a 404) fail the checks that needed them, the report is
// still written, and nothing is ok on the fake (it runs no exec: every
// probe fails closed).
func TestAttestObservationFaults(t *testing.T) {
	for _, tt := range []struct {
		name   string
		script func(fake *dockerfake.Daemon, c *adapter.Campaign)
		want   []string
	}{
		{"no_fault", func(*dockerfake.Daemon, *adapter.Campaign) {}, []string{"workspaces[0].probe.control", "server.process"}},
		{"workspace_inspect_500", func(fake *dockerfake.Daemon, c *adapter.Campaign) {
			fake.OnFunc("GET /containers/{id}/json", func(call dockerfake.Call) dockerfake.Reply {
				if strings.Contains(call.Path, c.Workspaces[0].ContainerID) {
					return dockerfake.Reply{Status: 500, Body: "boom"}
				}
				return dockerfake.Pass
			})
		}, []string{"workspaces[0].present"}},
		{"server_gone", func(fake *dockerfake.Daemon, c *adapter.Campaign) {
			fake.OnFunc("GET /containers/{id}/json", func(call dockerfake.Call) dockerfake.Reply {
				if strings.Contains(call.Path, c.ServerID) {
					return dockerfake.Reply{Status: 404, Body: "No such container"}
				}
				return dockerfake.Pass
			})
		}, []string{"server.present"}},
		{"network_dropped", func(fake *dockerfake.Daemon, c *adapter.Campaign) {
			fake.On("GET /networks/{id}", dockerfake.Reply{Drop: true})
		}, []string{"networks[0].present", "networks[1].present"}},
		{"info_500", func(fake *dockerfake.Daemon, c *adapter.Campaign) {
			fake.On("GET /info", dockerfake.Reply{Status: 500, Body: "busy"})
		}, []string{"daemon.info"}},
		{"lists_500", func(fake *dockerfake.Daemon, c *adapter.Campaign) {
			fake.On("GET /containers/json", dockerfake.Reply{Status: 500, Body: "busy"})
			fake.On("GET /networks", dockerfake.Reply{Status: 500, Body: "busy"})
		}, []string{"campaign.unexpected_containers", "campaign.unexpected_networks"}},
		{"extra_labelled_container", func(fake *dockerfake.Daemon, c *adapter.Campaign) {
			fake.AddContainer(dockerfake.Container{Name: "stranger", Image: fakeImage, Labels: map[string]string{campaign.LabelCampaign: c.Plan.CampaignID}})
		}, []string{"campaign.unexpected_containers"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, fake := fakeAdapter(t)
			const canary = "canary-fake-key-31f0aa9c"
			a.Getenv = func(k string) string { return map[string]string{campaign.DefaultAPIKeyEnv: canary}[k] }
			spec := fakeSpec("attest-faults", 2)
			spec.Server.AgentReachable = true // per-agent networks
			c := fakeCampaign(t, a, spec)
			tt.script(fake, c)
			rep, err := a.Attest(t.Context(), "attest-faults", adapter.AttestOptions{ProbeTimeout: 200e6})
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK {
				t.Fatal("ok on a fake daemon that runs no probe")
			}
			for _, w := range tt.want {
				if !slices.Contains(rep.FailedChecks, w) {
					t.Errorf("%s not among the failed checks %v", w, rep.FailedChecks)
				}
			}
			b, err := os.ReadFile(a.AttestationPath("attest-faults"))
			if err != nil {
				t.Fatal(err)
			}
			var onDisk attest.Report
			if err := json.Unmarshal(b, &onDisk); err != nil || onDisk.OK {
				t.Fatalf("report on disk: %v ok=%v", err, onDisk.OK)
			}
			if strings.Contains(string(b), canary) {
				t.Fatal("the report holds the key")
			}
			env, err := os.ReadFile(strings.TrimSuffix(a.AttestationPath("attest-faults"), ".json") + ".dsse.json")
			if err != nil || strings.Contains(string(testenv.Readable(env)), canary) || !strings.Contains(string(testenv.Readable(env)), "api_key") {
				t.Fatalf("the signed statement is missing (%v) or holds the key", err)
			}
			if fi, _ := os.Stat(a.AttestationPath("attest-faults")); fi.Mode().Perm() != 0o600 {
				t.Fatalf("report mode %v", fi.Mode())
			}
			if st, _ := a.State("attest-faults"); st.Status != campaign.StatusAttestationFailed || st.Attestation != campaign.AttestFailed {
				t.Fatalf("state after a failed attestation: %s %q", st.Status, st.Attestation)
			}
		})
	}
}

// TestAttestNoCampaign: a campaign with no state directory is an error,
// not a report.
func TestAttestNoCampaign(t *testing.T) {
	a, _ := fakeAdapter(t)
	_, err := a.Attest(t.Context(), "never-brought-up", adapter.AttestOptions{})
	want := `no such campaign "never-brought-up": nothing in ` + a.CampaignDir("never-brought-up") + ` (agentpen ls lists this state root's campaigns; --state-root names another)`
	if !errors.Is(err, store.ErrNoCampaign) || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
	if _, err := a.Attest(t.Context(), "../escape", adapter.AttestOptions{}); err == nil {
		t.Fatal("accepted a bad campaign id")
	}
}

// TestRoleSettingsFromCreateSpecs: the expected hardening is read from the
// specs bring-up creates with.
func TestRoleSettingsFromCreateSpecs(t *testing.T) {
	p, err := campaign.NewPlan(fakeSpec("roles", 1))
	if err != nil {
		t.Fatal(err)
	}
	rs := (&Driver{host: Host{SocketPath: "/run/user/1/docker.sock"}}).Settings(p)
	w := rs[campaign.RoleWork]
	if !slices.Equal(w.CapAdd, WorkspaceCaps) || !w.ReadOnlyRoot || !w.Init || w.Memory != WorkspaceMemory || w.PidsLimit != WorkspacePidsLimit || len(w.Tmpfs) != len(workspaceTmpfs) {
		t.Fatalf("workspace settings %+v", w)
	}
	s := rs[campaign.RoleServer]
	if len(s.CapAdd) != 0 || !slices.Equal(s.CapDrop, []string{"ALL"}) || s.ReadOnlyRoot || !s.Init || !slices.Equal(s.SecurityOpt, []string{"no-new-privileges"}) {
		t.Fatalf("server settings %+v", s)
	}
}

// fakeCampaign brings spec up on the fake daemon without awaiting
// readiness (the fake runs no process): a bring-up of a's configuration
// on a driver whose containers are ready once started.
func fakeCampaign(t *testing.T, a *drivertest.Harness, spec campaign.CampaignSpec) *adapter.Campaign {
	t.Helper()
	h := &drivertest.Harness{Adapter: withDriver(a.Adapter, unready{a.Driver}), Root: a.Root, StateRoot: a.StateRoot}
	c, err := h.BringUp(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
