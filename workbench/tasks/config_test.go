package tasks

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestConfigWrongAnswers gives every config family a plausible mistake (a
// grep that reads comments, staging's gaps taken for required ones, a
// commented-out override, debug on in any environment...) and checks its
// grade and reason.
func TestConfigWrongAnswers(t *testing.T) {
	t.Parallel()
	runWrongAnswers(t, "config", []wrongAnswer{
		{
			family: "port_conflict", reason: ReasonExtra,
			answer: func(t *testing.T, task *Task) string { // grep: every number on any line naming a port
				re := regexp.MustCompile(`(?i)port\S*\s*[=:]\s*"?(\d+)`)
				owners := map[string]map[string]bool{}
				for _, f := range task.Files {
					name := strings.TrimSuffix(path.Base(f.Path), path.Ext(f.Path))
					for _, m := range re.FindAllStringSubmatch(f.Content, -1) {
						if owners[m[1]] == nil {
							owners[m[1]] = map[string]bool{}
						}
						owners[m[1]][name] = true
					}
				}
				hit := map[string]bool{}
				for _, names := range owners {
					if len(names) > 1 {
						for n := range names {
							hit[n] = true
						}
					}
				}
				return strings.Join(mapKeys(hit), ",")
			},
		},
		{
			family: "missing_required", reason: ReasonExtra,
			answer: func(t *testing.T, task *Task) string { // every key staging has and production lacks
				staging, _ := task.File("config/staging.yaml")
				prod, _ := task.File("config/production.yaml")
				have := yamlLeaves(prod)
				var out []string
				for k := range yamlLeaves(staging) {
					if !have[k] {
						out = append(out, k)
					}
				}
				return strings.Join(out, ", ")
			},
		},
		{
			family: "effective_value", reason: ReasonWrongNumber,
			answer: func(t *testing.T, task *Task) string { // the commented-out override
				env, _ := task.File("app.env")
				m := regexp.MustCompile(`(?m)^# APP_\w+=(\d+)$`).FindStringSubmatch(env)
				if m == nil {
					t.Fatalf("%s: no commented override", task.TaskID)
				}
				return m[1]
			},
		},
		{
			family: "type_mismatch", reason: ReasonMissing,
			answer: func(t *testing.T, task *Task) string { // only quoted values suspected
				var schema struct{ Properties map[string]map[string]string }
				mustJSON(t, task, "schema.json", &schema)
				toml, _ := task.File("settings.toml")
				var out []string
				section := ""
				for _, line := range strings.Split(toml, "\n") {
					if strings.HasPrefix(line, "[") {
						section = strings.Trim(line, "[]")
						continue
					}
					k, v, ok := strings.Cut(line, " = ")
					if ok && strings.HasPrefix(v, `"`) && schema.Properties[section][k] != "string" {
						out = append(out, section+"."+k)
					}
				}
				return strings.Join(out, ", ")
			},
		},
		{
			family: "debug_in_prod", reason: ReasonExtra,
			answer: func(t *testing.T, task *Task) string { // debug on, whatever the environment
				on := regexp.MustCompile(`(?mi)"?debug"?\s*[=:]\s*(true|yes|on|1)\b`)
				var out []string
				for _, f := range task.Files {
					if on.MatchString(f.Content) {
						out = append(out, path.Base(f.Path))
					}
				}
				return strings.Join(out, ", ")
			},
		},
		{
			family: "staging_only_keys", reason: ReasonWrongItems,
			answer: func(t *testing.T, task *Task) string { // the symmetric difference
				a, b := jsonLeaves(t, task, "staging.json"), jsonLeaves(t, task, "production.json")
				var out []string
				for k := range a {
					if !b[k] {
						out = append(out, k)
					}
				}
				for k := range b {
					if !a[k] {
						out = append(out, k)
					}
				}
				sort.Strings(out)
				return strings.Join(out, ", ")
			},
		},
		{
			family: "replica_total", reason: ReasonWrongNumber,
			answer: func(t *testing.T, task *Task) string { // every namespace's Deployments
				total := 0
				for _, f := range task.Files {
					for _, doc := range strings.Split(f.Content, "---\n") {
						if !strings.Contains(doc, "\nkind: Deployment\n") {
							continue
						}
						var n int
						if _, err := fmt.Sscanf(doc[strings.Index(doc, "  replicas: "):], "  replicas: %d", &n); err != nil {
							t.Fatal(err)
						}
						total += n
					}
				}
				return fmt.Sprint(total)
			},
		},
	})
}

// TestConfigPartialSets checks partial credit for the config set families
// and order errors for its list families.
func TestConfigPartialSets(t *testing.T) {
	t.Parallel()
	runPartialSets(t, "config")
}

// TestRenderConfig pins the writers the config families share.
func TestRenderConfig(t *testing.T) {
	t.Parallel()
	settings := []kv{{"name", "api"}, {"server", []kv{{"port", 8080}, {"debug", true}, {"host", "0.0.0.0:1"}}}}
	tests := []struct{ format, want string }{
		{"yaml", "name: api\nserver:\n  port: 8080\n  debug: true\n  host: \"0.0.0.0:1\"\n"},
		{"toml", "name = \"api\"\n\n[server]\nport = 8080\ndebug = true\nhost = \"0.0.0.0:1\"\n"},
		{"ini", "name = api\n\n[server]\nport = 8080\ndebug = true\nhost = 0.0.0.0:1\n"},
		{"json", "{\n  \"name\": \"api\",\n  \"server\": {\n    \"port\": 8080,\n    \"debug\": true,\n    \"host\": \"0.0.0.0:1\"\n  }\n}\n"},
		{"env", "name=api\n"},
	}
	for _, tt := range tests {
		t.Run(tt.format, func(t *testing.T) {
			got := renderConfig(tt.format, settings)
			if tt.format == "env" {
				got = renderConfig("env", settings[:1])
			}
			if got != tt.want {
				t.Errorf("renderConfig(%s) = %q, want %q", tt.format, got, tt.want)
			}
			if tt.format == "json" && !json.Valid([]byte(got)) {
				t.Errorf("renderConfig(json) is not JSON: %s", got)
			}
		})
	}
	for _, s := range []string{"yes", "No", "on", "", "12", "1.5", "a: b", "#x"} {
		if got := scalar("yaml", s); !strings.HasPrefix(got, `"`) {
			t.Errorf("scalar(yaml, %q) = %s, want it quoted", s, got)
		}
	}
}

// yamlLeaves returns the dotted paths of the two-level YAML the config
// families write, comments skipped.
func yamlLeaves(text string) map[string]bool {
	out := map[string]bool{}
	section := ""
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		key, _, _ := strings.Cut(strings.TrimSpace(line), ":")
		if !strings.HasPrefix(line, " ") {
			section = key
			continue
		}
		out[section+"."+key] = true
	}
	return out
}

func jsonLeaves(t *testing.T, task *Task, path string) map[string]bool {
	t.Helper()
	var tree map[string]map[string]any
	mustJSON(t, task, path, &tree)
	out := map[string]bool{}
	for s, keys := range tree {
		for k := range keys {
			out[s+"."+k] = true
		}
	}
	return out
}
