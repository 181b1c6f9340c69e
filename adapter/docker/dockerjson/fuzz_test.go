package dockerjson

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/apikey"
)

// fixtureNames are the attestation's fixtures (testdata/attest), captured
// from the real rootless daemon.
var fixtureNames = []string{"internal", "per-agent", "nat"}

func loadCapture(t testing.TB, name string) Capture {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "attest", name, "observation.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c Capture
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return c
}

// seedRaws adds every raw daemon answer of the fixtures to f.
func seedRaws(f *testing.F, pick func(c Capture) []Raw) {
	for _, name := range fixtureNames {
		for _, r := range pick(loadCapture(f, name)) {
			f.Add([]byte(r.JSON))
		}
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"Config":{"Env":["A=sekrit-value-1","B","=x","C=="]}}`))
}

func containerRaws(c Capture) []Raw {
	var out []Raw
	for _, r := range c.Containers {
		out = append(out, r)
	}
	return out
}

// FuzzDecodeContainer: decoding never panics, and no environment value
// that appears only in the environment survives into what was decoded.
func FuzzDecodeContainer(f *testing.F) {
	seedRaws(f, containerRaws)
	f.Fuzz(func(t *testing.T, raw []byte) {
		d := Container(Raw{JSON: raw}, "AGENTPEN_API_KEY", apikey.Default())
		if d.Problem("container") != "" {
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
	seedRaws(f, func(c Capture) []Raw {
		out := []Raw{c.Info, c.ContainerList, c.NetworkList, c.UIDBlocks}
		for _, r := range c.Networks {
			out = append(out, r)
		}
		for _, r := range c.Images {
			out = append(out, r)
		}
		return out
	})
	f.Fuzz(func(t *testing.T, raw []byte) {
		r := Raw{JSON: raw}
		Info(r)
		Network(r)
		Image(r)
		List(r)
	})
}
