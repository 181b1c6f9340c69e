package docker

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/adapter/docker/dockerjson"
	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/agentpen/agentpen/adapter/drivertest"
	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

var update = flag.Bool("update", false, "recapture the attestation fixtures in testdata/attest from the real daemon")

// fixtureKey is the API key of the fixture campaigns: not a secret, it is
// in the captured container JSON (the attestation drops it at decode).
const fixtureKey = "attest-fixture-key-9c41d7e2b8a05f36"

// TestCaptureAttestFixtures recaptures testdata/attest/{internal,per-agent,nat} from
// the real rootless daemon: a campaign is brought up, attested (it must
// attest ok), and its attest.Source and attest.Observation (the daemon's
// raw JSON and the probes' outputs) are written; then it is torn down.
// Run it with:
//
//	go test ./adapter/docker -run TestCaptureAttestFixtures -update
//
// then regenerate the golden reports with go test ./attest -update.
func TestCaptureAttestFixtures(t *testing.T) {
	if !*update {
		t.Skip("recapture with: go test ./adapter/docker -run TestCaptureAttestFixtures -update")
	}
	raw := testenv.RequireDocker(t)
	host, err := ResolveHost(raw, os.Getenv("AGENTPEN_ALLOW_CUSTOM_SOCKET") == "1")
	if err != nil {
		t.Fatal(err)
	}
	d, err := Connect(t.Context(), host)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	img, err := d.Resolve(t.Context(), testenv.WorkbenchImage())
	if err != nil {
		t.Fatalf("image %s: %v", testenv.WorkbenchImage(), err)
	}
	// The nat fixture's egress target: a listener of the test's own on a
	// host address (reached through slirp4netns; the traffic stays on
	// this machine).
	egress := hostAddressListener(t)
	// A launcher's own command: a workbench of its own on the socket.
	ownCommand := []string{"serve", "--listen", "unix://" + campaign.WorkbenchSocket}
	for _, fx := range []struct {
		name   string
		spec   campaign.CampaignSpec
		egress string
	}{
		{name: "internal", spec: campaign.CampaignSpec{
			Server: campaign.ServerSpec{Image: img},
			Workspaces: []campaign.WorkspaceSpec{
				// The bind file (denied to the agent's uid) and a path
				// that is not there: both outcomes of a forbidden path.
				{TaskID: "software/median@2", Image: img, Integrity: campaign.IntegritySpec{ForbiddenPaths: []string{campaign.WorkbenchTaskFile, "/srv/answers/key.json"}}},
				{TaskID: "data/csv_region_total@5", Image: img},
				// A launcher's own command: the network canaries are
				// probed from it (internal egress: none reached).
				{TaskID: "data/csv_region_total@5", AttemptID: "own", Image: img, Command: ownCommand},
			},
		}},
		{name: "per-agent", spec: campaign.CampaignSpec{
			// Internal egress with a network per agent: a launcher's own
			// command is probed against the stand-ins (none reached).
			Server: campaign.ServerSpec{Image: img, AgentReachable: true},
			Workspaces: []campaign.WorkspaceSpec{
				{TaskID: "data/csv_region_total@5", AttemptID: "own", Image: img, Command: ownCommand},
				{TaskID: "logs/first_error@1", Image: img},
			},
		}},
		{name: "nat", egress: egress, spec: campaign.CampaignSpec{
			Egress: campaign.EgressNAT,
			Server: campaign.ServerSpec{Image: img, MountDockerSocket: true, PublishLoopback: "127.0.0.1:" + freePort(t)},
			Workspaces: []campaign.WorkspaceSpec{
				{TaskID: "logs/first_error@1", Image: img}, {TaskID: "config/port_conflict", Image: img},
				// A launcher's own command under nat reaches every kind
				// of host: its spec allows each.
				{TaskID: "config/port_conflict", AttemptID: "own", Image: img, Command: ownCommand,
					Integrity: campaign.IntegritySpec{AllowedEgress: campaign.EgressClasses}},
			},
		}},
	} {
		t.Run(fx.name, func(t *testing.T) {
			fx.spec.CampaignID = fmt.Sprintf("fixture-%s-%d", fx.name, time.Now().UnixNano())
			a := drivertest.NewHarness(t, &adapter.Adapter{Driver: d, Getenv: func(k string) string {
				return map[string]string{campaign.DefaultAPIKeyEnv: fixtureKey}[k]
			}}, "")
			if _, err := a.BringUp(t.Context(), fx.spec); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { a.TearDown(context.Background(), fx.spec.CampaignID) })
			src, obs, rep, err := a.Observe(t.Context(), fx.spec.CampaignID, adapter.AttestOptions{EgressTarget: fx.egress})
			if err != nil {
				t.Fatal(err)
			}
			if !rep.OK {
				t.Fatalf("the fixture campaign does not attest: %v", rep.FailureLines())
			}
			// The daemon's answers as it wrote them (attest's tests decode
			// them with dockerjson), beside the probes' outputs.
			observation, err := merged(d.Capture(t.Context(), evidenceQuery(t, src)), obs)
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join("..", "..", "testdata", "attest", fx.name)
			os.MkdirAll(dir, 0o755)
			for name, v := range map[string]any{"source.json": src, "observation.json": observation} {
				b, err := json.MarshalIndent(v, "", "  ")
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, name), append(b, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// evidenceQuery is what the engine asks the driver for when it attests
// src's campaign.
func evidenceQuery(t *testing.T, src attest.Source) driver.EvidenceQuery {
	t.Helper()
	p, err := attest.PinnedPlan(src)
	if err != nil {
		t.Fatal(err)
	}
	q := driver.EvidenceQuery{CampaignID: src.Spec.CampaignID, KeyEnv: p.Server.Spec.APIKeyEnv, KeyPolicy: src.KeyPolicy}
	for _, r := range campaign.Resources(src.Records) {
		if r.ID != "" && !r.Removed {
			q.Resources = append(q.Resources, r)
		}
	}
	for ref := range p.ImageFields() {
		q.Images = append(q.Images, ref)
	}
	return q
}

// merged is an observation as the fixtures hold it: the daemon's raw
// answers (dockerjson.Capture) beside the rest of obs (the probes), its
// decoded runtime left out.
func merged(c dockerjson.Capture, obs attest.Observation) (map[string]json.RawMessage, error) {
	out := map[string]json.RawMessage{}
	for _, v := range []any{obs, c} {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &out); err != nil {
			return nil, err
		}
	}
	delete(out, "runtime")
	return out, nil
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// hostAddressListener listens on the host's first global unicast address
// and accepts until the test ends; it returns its address.
func hostAddressListener(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, ia := range addrs {
		p, err := netip.ParsePrefix(ia.String())
		if err != nil || !p.Addr().Is4() || !p.Addr().IsGlobalUnicast() || p.Addr().IsLoopback() {
			continue
		}
		l, err := net.Listen("tcp", netip.AddrPortFrom(p.Addr(), 0).String())
		if err != nil {
			continue
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		t.Cleanup(func() { l.Close(); <-done })
		return l.Addr().String()
	}
	t.Fatal("no IPv4 host address to listen on for the egress target")
	return ""
}
