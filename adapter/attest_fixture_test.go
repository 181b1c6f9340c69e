package adapter

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

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

var update = flag.Bool("update", false, "recapture the attestation fixtures in testdata/attest from the real daemon")

// fixtureKey is the API key of the fixture campaigns: not a secret, it is
// in the captured container JSON (the attestation drops it at decode).
const fixtureKey = "attest-fixture-key-9c41d7e2b8a05f36"

// TestCaptureAttestFixtures recaptures testdata/attest/{internal,nat} from
// the real rootless daemon: a campaign is brought up, attested (it must
// attest ok), and its attest.Source and attest.Observation (the daemon's
// raw JSON and the probes' outputs) are written; then it is torn down.
// Run it with:
//
//	go test ./adapter -run TestCaptureAttestFixtures -update
//
// then regenerate the golden reports with go test ./attest -update.
func TestCaptureAttestFixtures(t *testing.T) {
	if !*update {
		t.Skip("recapture with: go test ./adapter -run TestCaptureAttestFixtures -update")
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
	imgs, err := d.Images(t.Context(), "agentpen/")
	if err != nil {
		t.Fatal(err)
	}
	img := imgs[testenv.WorkbenchImage()]
	if img == "" {
		t.Fatalf("image %s missing", testenv.WorkbenchImage())
	}
	// The nat fixture's egress target: a listener of the test's own on a
	// host address (reached through slirp4netns; the traffic stays on
	// this machine).
	egress := hostAddressListener(t)
	for _, fx := range []struct {
		name   string
		spec   campaign.CampaignSpec
		egress string
	}{
		{name: "internal", spec: campaign.CampaignSpec{
			Server: campaign.ServerSpec{Image: img},
			Workspaces: []campaign.WorkspaceSpec{
				{TaskID: "software/median@2", Image: img}, {TaskID: "data/csv_region_total@5", Image: img},
			},
		}},
		{name: "nat", egress: egress, spec: campaign.CampaignSpec{
			Egress: campaign.EgressNAT,
			Server: campaign.ServerSpec{Image: img, MountDockerSocket: true, PublishLoopback: "127.0.0.1:" + freePort(t)},
			Workspaces: []campaign.WorkspaceSpec{
				{TaskID: "logs/first_error@1", Image: img}, {TaskID: "config/port_conflict", Image: img},
			},
		}},
	} {
		t.Run(fx.name, func(t *testing.T) {
			fx.spec.CampaignID = fmt.Sprintf("fixture-%s-%d", fx.name, time.Now().UnixNano())
			a := NewHarness(t, &Adapter{Docker: d, Getenv: func(k string) string {
				return map[string]string{campaign.DefaultAPIKeyEnv: fixtureKey}[k]
			}}, "")
			if _, err := a.BringUp(t.Context(), fx.spec); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { a.TearDown(context.Background(), fx.spec.CampaignID) })
			src, obs, rep, err := a.attestID(t.Context(), fx.spec.CampaignID, AttestOptions{EgressTarget: fx.egress}, true)
			if err != nil {
				t.Fatal(err)
			}
			if !rep.OK {
				t.Fatalf("the fixture campaign does not attest: %v", rep.FailureLines())
			}
			dir := filepath.Join("..", "testdata", "attest", fx.name)
			os.MkdirAll(dir, 0o755)
			for name, v := range map[string]any{"source.json": src, "observation.json": obs} {
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
