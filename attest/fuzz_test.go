package attest

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/apikey"
)

// seedRaws adds every raw daemon answer of the fixtures to f.
func seedRaws(f *testing.F, pick func(o Observation) []Raw) {
	for _, name := range fixtureNames {
		fx := loadFixture(f, name)
		for _, r := range pick(fx.obs) {
			f.Add([]byte(r.JSON))
		}
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"Config":{"Env":["A=sekrit-value-1","B","=x","C=="]}}`))
}

func containerRaws(o Observation) []Raw {
	var out []Raw
	for _, r := range o.Containers {
		out = append(out, r)
	}
	return out
}

// FuzzDecodeContainer: decoding never panics, and no environment value
// that appears only in the environment survives into what was decoded.
func FuzzDecodeContainer(f *testing.F) {
	seedRaws(f, containerRaws)
	f.Fuzz(func(t *testing.T, raw []byte) {
		d, err := decodeContainer(raw, "AGENTPEN_API_KEY", apikey.Default())
		if err != nil {
			return
		}
		var env struct{ Config struct{ Env []string } }
		if json.Unmarshal(raw, &env) != nil {
			return
		}
		out, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range env.Config.Env {
			_, v, ok := strings.Cut(kv, "=")
			if !ok || len(v) < 6 || bytes.Count(raw, []byte(v)) != 1 {
				continue
			}
			if bytes.Contains(out, []byte(v)) {
				t.Fatalf("the environment value %q survived decoding", v)
			}
		}
		for _, n := range d.EnvNames {
			if strings.Contains(n, "=") {
				t.Fatalf("an env name holds '=': %q", n)
			}
		}
	})
}

// FuzzDecodeDaemonJSON: the other decoders never panic on anything.
func FuzzDecodeDaemonJSON(f *testing.F) {
	seedRaws(f, func(o Observation) []Raw {
		out := []Raw{o.Info, o.ContainerList, o.NetworkList, o.UIDBlocks}
		for _, r := range o.Networks {
			out = append(out, r)
		}
		for _, r := range o.Images {
			out = append(out, r)
		}
		return out
	})
	f.Fuzz(func(t *testing.T, raw []byte) {
		decodeInfo(raw)
		decodeNetwork(raw)
		decodeImage(raw)
		decodeList(raw)
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
		if !Evaluate(fx.src, fx.obs).OK {
			return
		}
		po, err := decodeProbeOutput(out)
		if err != nil {
			t.Fatalf("ok from an output that does not decode: %q", out)
		}
		got := map[string]probeResult{}
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
