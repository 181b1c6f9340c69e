package episode

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"testing"
)

// TestToolSpecs: every agent tool the environment serves is listed once
// (finish, the trainer's, is not), each schema is a JSON object schema,
// and every description states the refusal rule with the configured
// limit.
func TestToolSpecs(t *testing.T) {
	specs := Config{Limits: Limits{MaxInvalidInARow: 4}}.Tools()
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
		var schema struct {
			Type       string         `json:"type"`
			Properties map[string]any `json:"properties"`
		}
		if err := json.Unmarshal(s.InputSchema, &schema); err != nil || schema.Type != "object" || schema.Properties == nil {
			t.Errorf("%s: schema %s: %v", s.Name, s.InputSchema, err)
		}
		if !strings.Contains(s.Description, "Four invalid calls in a row end the episode") {
			t.Errorf("%s: the description does not state the refusal rule: %q", s.Name, s.Description)
		}
	}
	var served []string
	for name := range (&Environment{}).tools() {
		if name != "finish" {
			served = append(served, name)
		}
	}
	sort.Strings(served)
	listed := slices.Sorted(slices.Values(names))
	if !slices.Equal(listed, served) {
		t.Errorf("listed tools %v, served %v", listed, served)
	}
}
