package main

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/launcher"
)

// TestTasksCommand: agentpen tasks prints what the API answers (the
// catalogue, and one task as the agent sees it), needs no daemon, and
// refuses an id the catalogue does not serve with exit 2.
func TestTasksCommand(t *testing.T) {
	noEnv := func(string) string { return "" }
	var out, errb bytes.Buffer
	if err := run(t.Context(), []string{"tasks", "--json"}, &out, &errb, noEnv); err != nil {
		t.Fatal(err)
	}
	var list struct{ Tasks []launcher.TaskSummary }
	if err := json.Unmarshal(out.Bytes(), &list); err != nil || !reflect.DeepEqual(list.Tasks, launcher.TaskList()) {
		t.Fatalf("tasks --json: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := run(t.Context(), []string{"tasks", "--json", "software/median@2"}, &out, &errb, noEnv); err != nil {
		t.Fatal(err)
	}
	var task launcher.Task
	want, _ := launcher.LookupTask("software/median@2")
	if err := json.Unmarshal(out.Bytes(), &task); err != nil || !reflect.DeepEqual(&task, want) {
		t.Fatalf("tasks --json ID: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := run(t.Context(), []string{"tasks"}, &out, &errb, noEnv); err != nil || !strings.Contains(out.String(), "software/median") {
		t.Fatalf("tasks: %v %s", err, out.String())
	}
	err := run(t.Context(), []string{"tasks", "nope/x"}, &out, &errb, noEnv)
	if exitCode(err) != exitBadInput || !strings.Contains(err.Error(), "agentpen tasks lists the catalogue") {
		t.Fatalf("an unknown task: exit %d %v", exitCode(err), err)
	}
}

// TestImagesCommand: agentpen images lists the daemon's images, the
// workbench image among them with the workbench version it carries.
func TestImagesCommand(t *testing.T) {
	e := newCLIEnv(t)
	out, errs, code := e.run("images", "--json")
	if code != 0 {
		t.Fatalf("images: exit %d %s", code, errs)
	}
	var got struct {
		Images []struct {
			ID        string   `json:"id"`
			Tags      []string `json:"tags"`
			Workbench string   `json:"workbench"`
		} `json:"images"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	id := e.ids[testenv.WorkbenchImage()]
	for _, img := range got.Images {
		if img.ID == id {
			if img.Workbench == "" {
				t.Fatalf("%s carries no workbench version (make images labels it)", testenv.WorkbenchImage())
			}
			return
		}
	}
	t.Fatalf("%s (%s) is not listed: %s", testenv.WorkbenchImage(), id, out)
}
