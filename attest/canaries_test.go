package attest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/campaign"
)

// The network canaries and the grader's key of a launcher's own command,
// as a hostile review of their first version found them (issue 44).

// canaryCheck evaluates f and returns ws's network_canaries check.
func canaryCheck(t *testing.T, f *fixture, ws string) (Check, *Report) {
	t.Helper()
	rep := Evaluate(f.src, f.observed())
	c, ok := rep.Checks()[ws+".probe.network_canaries"]
	if !ok {
		t.Fatalf("no %s.probe.network_canaries check", ws)
	}
	return c, rep
}

// TestNATCanariesNeedEveryKindAllowed: under nat the route out reaches
// every host, so each kind the spec does not allow fails whatever the
// stand-ins answered: a refusal (pasta, a firewall's REJECT, a lying
// probe) or a timeout (a busy slirp4netns) is no proof there.
func TestNATCanariesNeedEveryKindAllowed(t *testing.T) {
	for _, outcome := range []string{"refused", "timeout", "unreachable"} {
		t.Run(outcome, func(t *testing.T) {
			f := loadFixture(t, "nat")
			f.src.Spec.Workspaces[2].Integrity.AllowedEgress = nil
			src := f.obs.ProbeEnv.Peers[ws2]
			var res []map[string]any
			for i := range 4 {
				res = append(res, map[string]any{"id": fmt.Sprintf("%s/network_canaries/%d", ws2, i), "kind": "tcp", "outcome": outcome, "error": "dial tcp: " + outcome})
			}
			res = append(res,
				map[string]any{"id": ws2 + "/network_canaries/4", "kind": "route", "outcome": "found", "source": src},
				map[string]any{"id": ws2 + "/network_canaries/5", "kind": "route", "outcome": "found", "source": src})
			for _, r := range res {
				f.setProbe(t, PhaseMain, ws2, r["id"].(string), r)
			}
			c, _ := canaryCheck(t, f, ws2)
			if c.Pass {
				t.Fatalf("egress nat, no kind allowed, the stand-ins %s: the check passes", outcome)
			}
			for _, class := range campaign.EgressClasses {
				if !strings.Contains(c.Reason, class+": egress nat routes") {
					t.Errorf("the reason does not name %s: %s", class, c.Reason)
				}
			}
		})
	}
}

// TestCanariesWithoutANetwork: a launcher's own command with no network
// (topology none) needs no stand-in: its interfaces (lo alone) show no
// host outside is reachable. So a host without an address to stand them
// on (IPv6-only hosts had none: stand-ins were IPv4 only), or a stand-in
// someone else connected to, does not fail it.
func TestCanariesWithoutANetwork(t *testing.T) {
	f := loadFixture(t, "internal")
	var ls []Listener
	for _, l := range f.obs.Listeners {
		if l.Kind != ListenerCanary {
			ls = append(ls, l)
		}
	}
	f.obs.Listeners = ls
	if c, rep := canaryCheck(t, f, ws2); !c.Pass {
		t.Fatalf("a workspace with no network on a host without stand-ins: %s (failed: %v)", c.Reason, rep.FailedChecks)
	}
	f = loadFixture(t, "internal")
	for i, l := range f.obs.Listeners {
		if l.Kind == ListenerCanary {
			f.obs.Listeners[i].Accepted = 1
		}
	}
	if c, _ := canaryCheck(t, f, ws2); !c.Pass {
		t.Fatalf("a workspace without a network fails for a connection it could not make: %s", c.Reason)
	}
}

// renameKeyEnv makes f's campaign name its grader key GRADER_KEY (a
// name campaign.SecretBearing does not flag) instead of
// AGENTPEN_API_KEY, in the spec, in what the daemon answered and in the
// custody probes' command lines.
func renameKeyEnv(t *testing.T, f *fixture) {
	t.Helper()
	f.src.Spec.Server.APIKeyEnv = "GRADER_KEY"
	for id, raw := range f.raw.Containers {
		s := string(raw.JSON)
		s = strings.ReplaceAll(s, `"AGENTPEN_API_KEY=`, `"GRADER_KEY=`)
		s = strings.ReplaceAll(s, `=AGENTPEN_API_KEY"`, `=GRADER_KEY"`)
		s = strings.ReplaceAll(s, `"AGENTPEN_API_KEY"`, `"GRADER_KEY"`)
		raw.JSON = json.RawMessage(s)
		f.raw.Containers[id] = raw
	}
	e, err := expect(f.src)
	if err != nil {
		t.Fatal(err)
	}
	f.exp = e
	obs := f.observed()
	for _, c := range e.Containers {
		if img, ok := plannedImage(obs, c.Image); ok && c.Serves != "" || c.Role == campaign.RoleServer {
			argv := append(slices.Clone(img.Entrypoint), c.Cmd...)
			phase := PhaseMain
			if c.Role == campaign.RoleServer {
				phase = PhaseBefore
			}
			f.probe(t, phase, c.Subject, c.Subject+"/process/0", func(m map[string]any) {
				m["process"].(map[string]any)["argv_digest"] = argvDigest(argv)
			})
		}
	}
}

// TestOwnCommandHoldsTheKeyUnderAnotherName (review of 8eefc6d): the
// attestation has no check that a workspace which does not need the
// grader's key (a launcher's own command) does not hold it. env_secrets
// goes by the variable's name (campaign.SecretBearing), and
// server.api_key_env may name the key GRADER_KEY, which it does not
// flag: a driver that gives the key to a launcher's own command (as
// Docker did before 8eefc6d; the commit message says "the attestation
// already said so", true only for names like AGENTPEN_API_KEY) attests
// ok. Every container's key is decoded by name (Container.Key):
// checkKeys could say a workspace without NeedsKey holds none.
func TestOwnCommandHoldsTheKeyUnderAnotherName(t *testing.T) {
	f := loadFixture(t, "nat")
	renameKeyEnv(t, f)
	if rep := Evaluate(f.src, f.observed()); !rep.OK {
		t.Fatalf("the fixture with the key renamed: %v", rep.FailureLines())
	}
	f.container(t, ws2, func(m map[string]any) {
		c := m["Config"].(map[string]any)
		c["Env"] = append(c["Env"].([]any), "GRADER_KEY=attest-fixture-key-9c41")
	})
	if rep := Evaluate(f.src, f.observed()); rep.OK {
		t.Fatalf("a launcher's own command holding the grader's key (as GRADER_KEY) attests ok")
	}
}

// TestMetadataReferenceRecorded: the route to the metadata stand-in, on
// which the metadata route's verdict rests, is among the report's probe
// records beside it.
func TestMetadataReferenceRecorded(t *testing.T) {
	f := loadFixture(t, "per-agent")
	c, rep := canaryCheck(t, f, ws0)
	if !c.Pass {
		t.Fatalf("the fixture: %s", c.Reason)
	}
	for _, p := range rep.Connectivity.Probes {
		if p.ID == ws0+"/network_canaries/5" && strings.HasPrefix(p.Outcome, "found ") {
			return
		}
	}
	t.Fatalf("the reference route is not in the report (observed %v)", c.Observed)
}
