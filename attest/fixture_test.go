package attest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/adapter/docker/dockerjson"
)

// The fixtures in testdata/attest were captured from the real rootless
// daemon (go test ./adapter/docker -run TestCaptureAttestFixtures -update): a
// campaign's attest.Source and attest.Observation, the daemon's raw JSON
// and the probes' outputs as they came.
//
// cluster was captured from the project's Kubernetes node (go test -tags
// kube ./adapter/kube -run TestCampaignAttestsOnTheNode -update): its
// observation holds the API server's answers as the kube driver decoded
// them (evidence.Runtime), with the probes' outputs.
var fixtureNames = []string{"internal", "per-agent", "nat"}

type fixture struct {
	name string
	src  Source
	// raw is what the daemon answered, as captured; obs the rest of the
	// observation (the probes): observed decodes raw into it.
	raw dockerjson.Capture
	obs Observation
	exp *expectation
}

// observed is the observation as the Docker driver hands it to Evaluate:
// the daemon's answers decoded.
func (f *fixture) observed() Observation {
	obs := f.obs
	if f.src.Bringup.Cluster() {
		return obs // decoded by the kube driver as captured
	}
	obs.Runtime = f.raw.Decode(f.exp.KeyEnv, f.src.KeyPolicy)
	if obs.ProbeEnv.Images == nil {
		obs.ProbeEnv.Images = (&Expectation{f.exp}).ImageIDs(obs) // as the adapter plans
	}
	return obs
}

func loadFixture(t testing.TB, name string) *fixture {
	t.Helper()
	dir := filepath.Join("..", "testdata", "attest", name)
	f := &fixture{name: name}
	for file, vs := range map[string][]any{"source.json": {&f.src}, "observation.json": {&f.obs, &f.raw}} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vs {
			if err := json.Unmarshal(b, v); err != nil {
				t.Fatalf("%s/%s: %v", name, file, err)
			}
		}
	}
	e, err := expect(f.src)
	if err != nil {
		t.Fatal(err)
	}
	f.exp = e
	return f
}

// id is the journalled container id of a subject ("server",
// "workspaces[0]").
func (f *fixture) id(t testing.TB, subject string) string {
	for _, c := range f.exp.Containers {
		if c.Subject == subject {
			return c.ID
		}
	}
	t.Fatalf("%s: no subject %s", f.name, subject)
	return ""
}

// editJSON decodes raw, lets fn change it, and encodes it back.
func editJSON(t testing.TB, raw json.RawMessage, fn func(v any) any) json.RawMessage {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	v = fn(v)
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// at walks a decoded JSON object along keys.
func at(v any, keys ...string) map[string]any {
	m := v.(map[string]any)
	for _, k := range keys {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	return m
}

// container edits a subject's inspect JSON.
func (f *fixture) container(t testing.TB, subject string, fn func(m map[string]any)) {
	id := f.id(t, subject)
	raw := f.raw.Containers[id]
	raw.JSON = editJSON(t, raw.JSON, func(v any) any { fn(v.(map[string]any)); return v })
	f.raw.Containers[id] = raw
}

// network edits the inspect JSON of the first agent network.
func (f *fixture) network(t testing.TB, fn func(m map[string]any)) {
	t.Helper()
	if len(f.exp.Networks) == 0 {
		t.Fatalf("%s: no agent network to edit", f.name)
	}
	id := f.exp.Networks[0].ID
	raw := f.raw.Networks[id]
	raw.JSON = editJSON(t, raw.JSON, func(v any) any { fn(v.(map[string]any)); return v })
	f.raw.Networks[id] = raw
}

func (f *fixture) info(t testing.TB, fn func(m map[string]any)) {
	f.raw.Info.JSON = editJSON(t, f.raw.Info.JSON, func(v any) any { fn(v.(map[string]any)); return v })
}

func (f *fixture) list(t testing.TB, raw *dockerjson.Raw, add map[string]any) {
	raw.JSON = editJSON(t, raw.JSON, func(v any) any { return append(v.([]any), add) })
}

// probe edits the result with id of a subject's run in phase.
func (f *fixture) probe(t testing.TB, phase, subject, id string, fn func(m map[string]any)) {
	t.Helper()
	for i, r := range f.obs.Runs {
		if r.Phase != phase || r.Subject != subject {
			continue
		}
		found := false
		b := editJSON(t, json.RawMessage(r.Stdout), func(v any) any {
			for _, res := range v.(map[string]any)["results"].([]any) {
				if m := res.(map[string]any); m["id"] == id {
					fn(m)
					found = true
				}
			}
			return v
		})
		if !found {
			t.Fatalf("%s: no probe %s in %s/%s", f.name, id, phase, subject)
		}
		f.obs.Runs[i].Stdout = string(b)
		return
	}
	t.Fatalf("%s: no run %s/%s", f.name, phase, subject)
}

// record edits the journal's intent record of a container (by name).
func (f *fixture) intent(t testing.TB, subject string, fn func(labels map[string]string) map[string]string) {
	name := ""
	for _, c := range f.exp.Containers {
		if c.Subject == subject {
			name = c.Name
		}
	}
	for i, r := range f.src.Records {
		if r.Op == "intent" && r.Name == name {
			f.src.Records[i].Labels = fn(r.Labels)
			return
		}
	}
	t.Fatalf("%s: no intent for %s", f.name, subject)
}

// normalize maps "workspaces[N]" to "workspaces[0]" in a check name, so
// one mutation of the first workspace stands for every workspace.
func normalize(check string) string {
	for _, list := range []string{"workspaces[", "networks["} {
		if rest, ok := strings.CutPrefix(check, list); ok {
			if i := strings.Index(rest, "]"); i >= 0 {
				return list + "0]" + rest[i+1:]
			}
		}
	}
	return check
}
