package drivertest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/agentpen/agentpen/adapter/drivertest"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/fakedriver"
)

const fakeImage = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// hand is another client of the fake's runtime.
type hand struct{ rt *fakedriver.Runtime }

func (h hand) Remove(_ context.Context, r campaign.Resource) error { return h.rt.Remove(r.ID, "") }

func (h hand) Occupy(_ context.Context, kind campaign.Kind, name string) (string, error) {
	return h.rt.Create(&driver.Object{Kind: kind, Name: name})
}

func (h hand) Copy(_ context.Context, r campaign.Resource, name string, labels map[string]string) (string, error) {
	return h.rt.Create(&driver.Object{Kind: r.Kind, Role: r.Role, Name: name, Labels: labels})
}

func (h hand) Relabel(_ context.Context, r campaign.Resource, labels map[string]string) error {
	if r.ID == "none" {
		return nil // Mutants asks whether relabelling is possible
	}
	return h.rt.Relabel(r.ID, labels)
}

func fakeTarget() drivertest.Target {
	d := fakedriver.New(map[string]string{"agentpen/workbench:dev": fakeImage})
	return drivertest.Target{
		Driver: d,
		Spec: func(id string, n int) campaign.CampaignSpec {
			s := campaign.CampaignSpec{CampaignID: id, Server: campaign.ServerSpec{Image: fakeImage}}
			for i := range n {
				s.Workspaces = append(s.Workspaces, campaign.WorkspaceSpec{TaskID: "software/median", AttemptID: fmt.Sprint(i), Image: fakeImage})
			}
			return s
		},
		Refused: func(id string) campaign.CampaignSpec {
			return campaign.CampaignSpec{CampaignID: id, Server: campaign.ServerSpec{Image: "agentpen/absent:1"},
				Workspaces: []campaign.WorkspaceSpec{{TaskID: "software/median", Image: "agentpen/absent:1"}}}
		},
		Hand: hand{d.Runtime},
		Getenv: func(k string) string {
			return map[string]string{campaign.DefaultAPIKeyEnv: "k3y-for-the-fake-driver-0123456789"}[k]
		},
	}
}

// TestSuiteOnFakeDriver: the engine keeps every demand of the suite on
// an in-memory runtime.
func TestSuiteOnFakeDriver(t *testing.T) {
	drivertest.Run(t, fakeTarget())
}

// TestSuiteCatchesMutants: every case a driver can fail fails on a
// driver broken the way it guards against.
func TestSuiteCatchesMutants(t *testing.T) {
	drivertest.Mutants(t, fakeTarget())
}
