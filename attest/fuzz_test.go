package attest

import (
	"slices"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/workbench/probe/wire"
)

// FuzzDecodeProbeJSON: the decoders of what the probes and the grader
// print never panic on anything (the daemon's JSON is decoded by the
// driver: adapter/docker/dockerjson fuzzes its decoders).
func FuzzDecodeProbeJSON(f *testing.F) {
	for _, name := range fixtureNames {
		for _, r := range loadFixture(f, name).obs.Runs {
			f.Add([]byte(r.Stdout))
		}
	}
	f.Add([]byte(`{"routes":{}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		decodeCounts(raw)
		decodeProbeOutput(string(raw))
	})
}

// FuzzProbeOutputNeverLies: whatever a workspace's probe exec printed, a
// report that is ok means that output held a connected positive control,
// an unreachable host loopback and no visible Docker socket.
func FuzzProbeOutputNeverLies(f *testing.F) {
	base := loadFixture(f, "internal")
	var stdout string
	for _, r := range base.obs.Runs {
		if r.Phase == PhaseMain && r.Subject == ws0 {
			stdout = r.Stdout
		}
	}
	f.Add(stdout)
	f.Add(strings.Replace(stdout, `"timeout"`, `"connected"`, 1))
	f.Add(strings.ReplaceAll(stdout, `"outcome":"none"`, `"outcome":"visible"`))
	f.Add(`{"results":[]}`)
	f.Add(``)
	f.Fuzz(func(t *testing.T, out string) {
		fx := loadFixture(t, "internal")
		for i, r := range fx.obs.Runs {
			if r.Phase == PhaseMain && r.Subject == ws0 {
				fx.obs.Runs[i].Stdout = out
			}
		}
		if !Evaluate(fx.src, fx.observed()).OK {
			return
		}
		po, err := decodeProbeOutput(out)
		if err != nil {
			t.Fatalf("ok from an output that does not decode: %q", out)
		}
		got := map[string]wire.Outcome{}
		for _, r := range po.Results {
			got[r.ID] = r
		}
		if got[ws0+"/control/0"].Outcome != "connected" {
			t.Fatalf("ok without a connected control: %q", out)
		}
		if !slices.Contains(unreachableOutcomes, got[ws0+"/host_loopback/0"].Outcome) {
			t.Fatalf("ok with the host loopback %q", got[ws0+"/host_loopback/0"].Outcome)
		}
		for _, s := range got[ws0+"/docker_socket/0"].Sockets {
			if s.IsSocket {
				t.Fatalf("ok with a visible socket %s", s.Path)
			}
		}
	})
}
