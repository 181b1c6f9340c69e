package launcher

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/api"
	"github.com/agentpen/agentpen/workbench/tasks"
)

// workbenchTasksJSON runs workbench tasks --json (built from this tree)
// and returns the ids it lists.
func workbenchTasksJSON(t *testing.T) []string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command builds the workbench here: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "workbench")
	if out, err := exec.Command(goBin, "build", "-o", bin, "../cmd/workbench").CombinedOutput(); err != nil {
		t.Fatalf("build the workbench: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "tasks", "--json").Output()
	if err != nil {
		t.Fatalf("workbench tasks --json: %v", err)
	}
	var list []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range list {
		ids = append(ids, s.ID)
	}
	return ids
}

// TestTasksAreTheWorkbenchs: GET /v1/tasks lists the ids workbench tasks
// --json lists, in its order, each with its domain, title and answer
// kind, and nothing else.
func TestTasksAreTheWorkbenchs(t *testing.T) {
	ts := newTestServer(t, newFakeBackend(t))
	resp, b := ts.do(t, http.MethodGet, "/v1/tasks", nil, true)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	var got struct{ Tasks []TaskSummary }
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range got.Tasks {
		ids = append(ids, s.ID)
		if s.Domain == "" || s.Title == "" || s.AnswerKind == "" || !strings.HasPrefix(s.ID, s.Domain+"/") {
			t.Errorf("task %+v", s)
		}
	}
	if want := workbenchTasksJSON(t); !slices.Equal(ids, want) {
		t.Fatalf("GET /v1/tasks lists %v\nworkbench tasks --json lists %v", ids, want)
	}
	if resp, _ := ts.do(t, http.MethodGet, "/v1/tasks", nil, false); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without the token: %d", resp.StatusCode)
	}
}

// TestTaskAsTheAgentSeesIt: GET /v1/tasks/{id} is the prompt and the
// files a reset of that task shows the agent, for every family and a
// variant, and holds none of the answer key: no field of it (the body
// decodes into Task with no field left over), and no hidden case of a
// code task in its text.
func TestTaskAsTheAgentSeesIt(t *testing.T) {
	ts := newTestServer(t, newFakeBackend(t))
	for _, s := range tasks.Specs() {
		for _, id := range []string{s.ID, s.ID + "@7"} {
			resp, b := ts.do(t, http.MethodGet, "/v1/tasks/"+strings.Replace(id, "/", "%2F", 1), nil, true)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: %d %s", id, resp.StatusCode, b)
			}
			var got Task
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&got); err != nil {
				t.Fatalf("%s: %v", id, err)
			}
			want, err := tasks.Build(id)
			if err != nil {
				t.Fatal(err)
			}
			if got.ID != id || got.Prompt != want.Instruction || len(got.Files) != len(want.Files) {
				t.Fatalf("%s: got %s, %d files; want the reset's prompt and %d files", id, got.ID, len(got.Files), len(want.Files))
			}
			for i, f := range want.Files {
				if got.Files[i].Path != f.Path || got.Files[i].Content != f.Content || got.Files[i].Bytes != len(f.Content) {
					t.Errorf("%s: file %d is %s, want %s", id, i, got.Files[i].Path, f.Path)
				}
			}
			// An extraction task's answer is in its files by design (the
			// agent finds it there); a code task's hidden cases are in
			// nothing the agent sees.
			var secrets []string
			for _, h := range want.Key.Hidden {
				if j, _ := json.Marshal(h.Args); len(j) >= 12 {
					secrets = append(secrets, string(j))
				}
			}
			for _, sec := range secrets {
				if bytes.Contains(b, []byte(sec)) || strings.Contains(got.Prompt, sec) {
					t.Errorf("%s: the answer key (%.12q...) is in what the API shows", id, sec)
				}
			}
		}
	}
	for _, path := range []string{"/v1/tasks/nope%2Fnothing", "/v1/tasks/software%2Fmedian@x"} {
		resp, b := ts.do(t, http.MethodGet, path, nil, true)
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(decodeProblem(t, resp, b).Detail, "GET /v1/tasks lists it") {
			t.Errorf("%s: %d %s", path, resp.StatusCode, b)
		}
	}
}

// TestImages: GET /v1/images is the daemon's images as the adapter lists
// them; a daemon that does not answer is a 503 that says so.
func TestImages(t *testing.T) {
	be := newFakeBackend(t)
	ts := newTestServer(t, be)
	created := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	be.images = []api.Image{{ID: fakeImage, Tags: []string{"agentpen/workbench:dev"}, Created: created, Workbench: "v1.2-3-gabc"},
		{ID: "sha256:" + strings.Repeat("cd", 32), Tags: []string{"debian:bookworm"}, Created: created.Add(-time.Hour)}}
	resp, b := ts.do(t, http.MethodGet, "/v1/images", nil, true)
	var got struct{ Images []api.Image }
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &got) != nil || !slices.EqualFunc(got.Images, be.images, func(x, y api.Image) bool {
		return x.ID == y.ID && slices.Equal(x.Tags, y.Tags) && x.Created.Equal(y.Created) && x.Workbench == y.Workbench
	}) {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if strings.Contains(string(b), `"workbench":""`) {
		t.Errorf("an image without the workbench says workbench \"\": %s", b)
	}
	be.imageErr = fmt.Errorf("list images: %w: no answer", adapter.ErrDaemonUnreachable)
	resp, b = ts.do(t, http.MethodGet, "/v1/images", nil, true)
	if p := decodeProblem(t, resp, b); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(p.Detail, "unreachable") {
		t.Fatalf("daemon gone: %d %s", resp.StatusCode, b)
	}
}
