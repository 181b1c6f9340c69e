package launcher

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/workbench/tasks"
)

// compileSpecSchema compiles SpecSchema with a draft 2020-12 validator.
func compileSpecSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	b, err := SpecSchema()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(SpecSchemaID, doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(SpecSchemaID)
	if err != nil {
		t.Fatalf("the spec schema does not compile: %v", err)
	}
	return sch
}

// schemaRefusals validates body against sch and returns the paths of
// the fields it refuses, in up's notation ("workspaces[1].task_id"); one
// "" for a body that is not JSON at all. nil when the schema accepts it.
func schemaRefusals(t *testing.T, sch *jsonschema.Schema, body []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return []string{""}
	}
	err := sch.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("validate: %v", err)
	}
	var paths []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			p := upPath(e.InstanceLocation)
			// An unknown property is reported at its object; up names the
			// property itself.
			if ap, ok := e.ErrorKind.(*kind.AdditionalProperties); ok {
				for _, name := range ap.Properties {
					paths = append(paths, strings.TrimPrefix(p+"."+name, "."))
				}
				return
			}
			paths = append(paths, p)
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	slices.Sort(paths)
	return slices.Compact(paths)
}

// upPath turns a JSON pointer's tokens into up's field path.
func upPath(loc []string) string {
	var b strings.Builder
	for _, tok := range loc {
		if _, err := strconv.Atoi(tok); err == nil {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteString(".")
		}
		b.WriteString(tok)
	}
	return b.String()
}

// upRefusals returns the field paths up (ValidateSpec) names for body, in
// order; one "" for malformed JSON. nil when up accepts it.
func upRefusals(body []byte) []string {
	_, err := campaign.ParseSpec(bytes.NewReader(body), tasks.Known, campaign.PlanOptions{})
	if err == nil {
		return nil
	}
	var out []string
	for _, e := range campaign.FieldErrors(err) {
		out = append(out, e.Field)
	}
	var se *campaign.SyntaxError
	if errors.As(err, &se) {
		out = append(out, se.Field)
	}
	return out
}

// beyondSchema are the bad specs JSON Schema cannot refuse, and why: up
// and the API refuse them on rules that need code.
var beyondSchema = map[string]string{
	"task_id_unknown":           "the workbench catalogue",
	"task_id_variant":           "the catalogue's variant range",
	"task_ids_unknown_both":     "the workbench catalogue",
	"extra_env_secret":          "a variable whose name says it holds a secret belongs in secret_env",
	"secret_env_service_token":  "agentpen's own AGENTPEN_* variables are never copied (a pattern without lookahead cannot say so)",
	"api_key_env_service_token": "agentpen's own AGENTPEN_* variables are never copied, but the grader key",
	"labels_reserved":           "label keys under io.agentpen. are agentpen's",
	"publish_internal":          "publish_loopback needs egress nat (a rule across two fields)",
	"duplicate_workspace":       "two workspaces with the same task and attempt",
}

// goodSpecs are the valid specs of the tests: the API tests' base spec,
// the shapes the adapter's real-daemon tests bring up, and the example of
// docs/spec.md.
func goodSpecs(t *testing.T) map[string][]byte {
	t.Helper()
	img := fakeImage
	full := campaign.CampaignSpec{
		CampaignID: "full-1", Egress: campaign.EgressNAT, Labels: map[string]string{"com.example.launcher": "x"},
		Server: campaign.ServerSpec{
			Image: "registry.example/grader@sha256:" + strings.Repeat("ab", 32), Command: []string{"grader", "--listen", ":9000"},
			Port: 9000, APIKeyEnv: "GRADER_KEY", DataHostPath: "/srv/data", DataContainerPath: "/data",
			AgentReachable: true, PublishLoopback: "127.0.0.1:18080", ReadyCommand: []string{"true"},
			ExtraEnv: map[string]string{"LOG_LEVEL": "debug"}, SecretEnv: []string{"GRADER_DB_PASSWORD"},
		},
	}
	for i := range 3 {
		full.Workspaces = append(full.Workspaces, campaign.WorkspaceSpec{
			TaskID: "software/median@2", AttemptID: fmt.Sprint("try-", i), Image: img, Command: []string{"serve"},
			WorkspaceHostPath: "/srv/ws", ExtraEnv: map[string]string{"MODE": "fast"}, Labels: map[string]string{"com.example.run": "1"},
		})
	}
	reachable := campaign.CampaignSpec{CampaignID: "reach", Server: campaign.ServerSpec{Image: img, AgentReachable: true}}
	sixtyFour := campaign.CampaignSpec{CampaignID: "many", Server: campaign.ServerSpec{Image: img}}
	for i := range campaign.MaxWorkspaces {
		ws := campaign.WorkspaceSpec{TaskID: "data/csv_region_total@5", AttemptID: fmt.Sprint(i), Image: img}
		sixtyFour.Workspaces = append(sixtyFour.Workspaces, ws)
		if i < 2 {
			reachable.Workspaces = append(reachable.Workspaces, ws)
		}
	}
	out := map[string][]byte{"api_base": specJSON("camp-1", "software/median@7", "sql/top_customer@3")}
	for name, s := range map[string]campaign.CampaignSpec{"all_fields": full, "agent_reachable": reachable, "64_workspaces": sixtyFour} {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = b
	}
	out["docs_example"] = specExample(t)
	return out
}

// specExample is the example spec of docs/spec.md (the block after the
// "## Example" heading).
func specExample(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "spec.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "## Example\n")
	if !ok {
		t.Fatal("docs/spec.md has no ## Example section")
	}
	_, rest, ok = strings.Cut(rest, "```json\n")
	ex, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/spec.md's example is not a json block")
	}
	return []byte(ex)
}

// TestSpecSchemaAgrees: the generated JSON Schema accepts every valid spec
// of the tests, and refuses every bad one up refuses with the same field
// paths (a subset of up's: up also applies rules no schema can state,
// listed in beyondSchema, which the schema must accept rather than refuse
// on another field).
func TestSpecSchemaAgrees(t *testing.T) {
	sch := compileSpecSchema(t)
	for name, body := range goodSpecs(t) {
		if got := upRefusals(body); got != nil {
			t.Errorf("%s: up refuses a good spec: %v", name, got)
		}
		if got := schemaRefusals(t, sch, body); got != nil {
			t.Errorf("%s: the schema refuses a spec up accepts: %v", name, got)
		}
	}
	for _, c := range badSpecs() {
		up := upRefusals(c.body)
		if up == nil {
			t.Errorf("%s: up accepts it", c.name)
			continue
		}
		got := schemaRefusals(t, sch, c.body)
		if why, ok := beyondSchema[c.name]; ok {
			if got != nil {
				t.Errorf("%s (beyond the schema: %s): the schema refuses %v", c.name, why, got)
			}
			continue
		}
		if len(got) == 0 {
			t.Errorf("%s: up refuses %v, the schema accepts it", c.name, up)
			continue
		}
		for _, p := range got {
			if !slices.Contains(up, p) {
				t.Errorf("%s: the schema refuses %q, up names %v", c.name, p, up)
			}
		}
	}
}

// TestSpecSchemaPatterns: the patterns the schema states are the ones the
// code checks.
func TestSpecSchemaPatterns(t *testing.T) {
	b, err := SpecSchema()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Defs map[string]struct {
			Properties map[string]struct {
				Pattern  string `json:"pattern"`
				MaxItems *int   `json:"maxItems"`
			} `json:"properties"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ def, prop, want string }{
		{"CampaignSpec", "campaign_id", campaign.IDPattern},
		{"ServerSpec", "image", campaign.ImagePattern},
		{"ServerSpec", "api_key_env", campaign.EnvNamePattern},
		{"WorkspaceSpec", "task_id", campaign.TaskIDPattern},
		{"WorkspaceSpec", "attempt_id", campaign.IDPattern},
		{"WorkspaceSpec", "image", campaign.ImagePattern},
	} {
		if got := doc.Defs[c.def].Properties[c.prop].Pattern; got != c.want {
			t.Errorf("%s.%s: schema pattern %q, code %q", c.def, c.prop, got, c.want)
		}
	}
	if m := doc.Defs["CampaignSpec"].Properties["workspaces"].MaxItems; m == nil || *m != campaign.MaxWorkspaces {
		t.Errorf("workspaces maxItems %v, want %d", m, campaign.MaxWorkspaces)
	}
}

var updateDocs = flag.Bool("update", false, "rewrite docs/spec.md's generated part")
