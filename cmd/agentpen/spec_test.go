package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/internal/cli"
)

const testImage = "sha256:467865c8118be4686e2311c164c5be5912a4c412007e6f80881a4356851eeb7e"

// TestSpecCommand: spec schema prints the JSON Schema; spec check says
// valid (exit 0) or names every problem by field path (exit 2), in words
// or as JSON, without a daemon (DOCKER_HOST is not even read).
func TestSpecCommand(t *testing.T) {
	noEnv := func(string) string { return "" }
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.json", `{"campaign_id":"demo-1","server":{"image":"`+testImage+`"},
 "workspaces":[{"task_id":"software/median@2","image":"`+testImage+`"}]}`)
	bad := write("bad.json", `{"campaign_id":"demo 1","server":{"image":"agentpen/workbench:dev","imgae":"x"},
 "workspaces":[{"task_id":"nope/x@1","image":"`+testImage+`"}]}`)
	broken := write("broken.json", "{\"campaign_id\": \"x\",\n  \"server\": }")
	for _, c := range []struct {
		name       string
		args       []string
		code       int
		stdout     []string
		stderr     []string
		jsonStdout bool
	}{
		{name: "schema", args: []string{"spec", "schema"}, stdout: []string{`"$schema": "https://json-schema.org/draft/2020-12/schema"`, `"CampaignSpec"`}, jsonStdout: true},
		{name: "valid", args: []string{"spec", "check", good}, stdout: []string{"valid: campaign demo-1, 1 workspace(s), topology none, egress internal"}},
		{name: "valid_json", args: []string{"spec", "check", "--json", good}, stdout: []string{`"ok": true`, `"topology": "none"`}, jsonStdout: true},
		// DecodeSpec stops at the unknown field: nothing else is judged
		// until the document's shape is right.
		{name: "unknown_field", args: []string{"spec", "check", bad}, code: 2, stderr: []string{"agentpen spec check: spec " + bad + ": server.imgae: unknown field"}},
		{name: "values", args: []string{"spec", "check", strings.Replace(bad, "bad", "values", 1)}, code: 2},
		{name: "malformed", args: []string{"spec", "check", broken}, code: 2, stderr: []string{"line 2, column"}},
		{name: "missing_file", args: []string{"spec", "check", filepath.Join(dir, "nope.json")}, code: 2, stderr: []string{"agentpen spec check: spec " + filepath.Join(dir, "nope.json") + ": no such file or directory\n"}},
		{name: "directory", args: []string{"spec", "check", dir}, code: 2, stderr: []string{"agentpen spec check: spec " + dir + ": is a directory, not a spec file\n"}},
		{name: "no_subcommand", args: []string{"spec"}, code: 2, stderr: []string{"agentpen spec: want a subcommand: schema or check", "agentpen spec --help"}},
		{name: "help", args: []string{"spec", "--help"}, stdout: []string{"agentpen spec check [--json] SPEC.json|-", "docs/spec.md"}},
		{name: "check_help", args: []string{"spec", "check", "--help"}, stdout: []string{"Usage: agentpen spec check"}},
		{name: "check_no_file", args: []string{"spec", "check"}, code: 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "values" {
				write("values.json", `{"campaign_id":"demo 1","server":{"image":"agentpen/workbench:latest"},
 "workspaces":[{"task_id":"nope/x@1","image":"`+testImage+`"}]}`)
				c.stderr = []string{`campaign_id "demo 1"`, `server.image "agentpen/workbench:latest": latest is whatever was built last`, `workspaces[0].task_id "nope/x@1": is not in the workbench catalogue`}
			}
			var out, errb bytes.Buffer
			err := run(t.Context(), c.args, &out, &errb, noEnv)
			if msg := cli.Message("agentpen", err); msg != "" {
				errb.WriteString(msg + "\n")
			}
			if got := exitCode(err); got != c.code {
				t.Fatalf("exit %d, want %d: %v\nstdout %s\nstderr %s", got, c.code, err, out.String(), errb.String())
			}
			for _, w := range c.stdout {
				if !strings.Contains(out.String(), w) {
					t.Errorf("stdout %q lacks %q", out.String(), w)
				}
			}
			for _, w := range c.stderr {
				if !strings.Contains(errb.String(), w) {
					t.Errorf("stderr %q lacks %q", errb.String(), w)
				}
				if n := strings.Count(errb.String(), w); n > 1 {
					t.Errorf("stderr says %q %d times", w, n)
				}
			}
			if c.jsonStdout && !json.Valid(out.Bytes()) {
				t.Errorf("stdout is not JSON: %s", out.String())
			}
		})
	}
	// --json on a bad spec: the problems on stdout, one per field.
	var out, errb bytes.Buffer
	err := run(t.Context(), []string{"spec", "check", "--json", filepath.Join(dir, "values.json")}, &out, &errb, noEnv)
	var res struct {
		OK     bool
		Errors []struct{ Field, Message string }
	}
	if exitCode(err) != 2 || json.Unmarshal(out.Bytes(), &res) != nil || res.OK || len(res.Errors) != 3 ||
		res.Errors[0].Field != "campaign_id" || res.Errors[1].Field != "server.image" || res.Errors[2].Field != "workspaces[0].task_id" {
		t.Fatalf("--json: exit %d, %s", exitCode(err), out.String())
	}
}
