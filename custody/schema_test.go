package custody_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/cleanup"
	"github.com/agentpen/agentpen/custody"
	"github.com/invopop/jsonschema"
	sjs "github.com/santhosh-tekuri/jsonschema/v6"
)

var update = flag.Bool("update", false, "rewrite the reports' schemas in schemas/")

// reportTypes are the Go types of each kind's predicate.
var reportTypes = map[string]any{
	custody.Attestation.Name: &attest.Report{},
	custody.Cleanup.Name:     &cleanup.Report{},
}

// generateSchema reflects the report type of kind, with the doc comments
// of the packages its types come from as descriptions.
func generateSchema(t *testing.T, kind string) []byte {
	t.Helper()
	r := &jsonschema.Reflector{}
	for _, dir := range []string{"attest", "cleanup", "campaign", "apikey"} {
		if err := r.AddGoComments("github.com/agentpen/agentpen", dir); err != nil {
			t.Fatal(err)
		}
	}
	// A field of an embedded struct is described by its own comment.
	r.LookupComment = func(t reflect.Type, field string) string {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if field == "" || t.Kind() != reflect.Struct {
			return ""
		}
		for i := range t.NumField() {
			if f := t.Field(i); f.Anonymous {
				if _, ok := f.Type.FieldByName(field); ok {
					return r.CommentMap[f.Type.PkgPath()+"."+f.Type.Name()+"."+field]
				}
			}
		}
		return ""
	}
	s := r.Reflect(reportTypes[kind])
	s.ID = jsonschema.ID("https://agentpen.dev/schemas/" + kind + "-report.json")
	s.Title = "agentpen " + kind + " report"
	s.Description = "The predicate of " + map[string]string{
		custody.Attestation.Name: custody.PredicateAttestation, custody.Cleanup.Name: custody.PredicateCleanup}[kind] +
		" statements, and the file " + kind + "-<generation>-<n>.json beside them."
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestReportSchemas: the schemas agentpen report schema prints are the
// ones the report types and their comments generate now (regenerate with
// -update), every property has a description, and real reports validate.
func TestReportSchemas(t *testing.T) {
	if len(reportTypes) != len(custody.Kinds) {
		t.Fatalf("report types for %d kinds, %d kinds", len(reportTypes), len(custody.Kinds))
	}
	wd, _ := os.Getwd()
	t.Chdir("..") // AddGoComments names packages after paths from the module's root
	for _, kind := range custody.SchemaKinds() {
		got := generateSchema(t, kind)
		path := filepath.Join(wd, "schemas", kind+".schema.json")
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		have, err := custody.Schema(kind)
		if err != nil {
			t.Fatal(err)
		}
		if !*update && !bytes.Equal(have, got) {
			t.Errorf("%s is not what the report types generate now: go test ./custody -run TestReportSchemas -update", path)
		}
		var doc map[string]any
		json.Unmarshal(got, &doc)
		for _, missing := range undescribed(doc) {
			t.Errorf("%s: %s has no description (a doc comment on the field)", kind, missing)
		}
	}
}

// undescribed lists the properties of the schema's definitions without a
// description.
func undescribed(doc map[string]any) []string {
	var out []string
	defs, _ := doc["$defs"].(map[string]any)
	for name, d := range defs {
		props, _ := d.(map[string]any)["properties"].(map[string]any)
		for p, ps := range props {
			m, _ := ps.(map[string]any)
			if desc, _ := m["description"].(string); desc == "" {
				out = append(out, name+"."+p)
			}
		}
	}
	return out
}

// TestReportsValidate: reports of each kind, as the fixtures make them,
// validate against their schema, and one with a field of the wrong type
// does not.
func TestReportsValidate(t *testing.T) {
	dir, _ := signedCampaign(t, lifecycle{})
	for kind, file := range map[string]string{"attestation": "attestation-1-1.json", "cleanup": "cleanup-1-1.json"} {
		b, _ := custody.Schema(kind)
		doc, err := sjs.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		c := sjs.NewCompiler()
		if err := c.AddResource(kind+".json", doc); err != nil {
			t.Fatal(err)
		}
		sch, err := c.Compile(kind + ".json")
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		inst, _ := sjs.UnmarshalJSON(bytes.NewReader(readFile(t, filepath.Join(dir, file))))
		if err := sch.Validate(inst); err != nil {
			t.Errorf("%s does not validate: %v", file, err)
		}
		bad := reflect.ValueOf(inst).Interface().(map[string]any)
		bad["generation"] = "one"
		if sch.Validate(bad) == nil {
			t.Errorf("%s: a string generation validates", kind)
		}
	}
}
