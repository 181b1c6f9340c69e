package custody

import (
	"embed"
	"fmt"
	"slices"
	"strings"
)

// schemas are the reports' JSON Schemas (draft 2020-12), generated from
// the report types and their doc comments (go test ./custody -run
// TestReportSchemas -update), one per Kind.
//
//go:embed schemas/*.schema.json
var schemas embed.FS

// SchemaKinds are the kinds of report Schema knows.
func SchemaKinds() []string {
	var out []string
	for _, k := range Kinds {
		out = append(out, k.Name)
	}
	return out
}

// Schema returns the JSON Schema of the predicate of kind (a report's
// JSON), with a description of every field.
func Schema(kind string) ([]byte, error) {
	if !slices.Contains(SchemaKinds(), kind) {
		return nil, fmt.Errorf("no report kind %q (the kinds: %s)", kind, strings.Join(SchemaKinds(), ", "))
	}
	return schemas.ReadFile("schemas/" + kind + ".schema.json")
}
