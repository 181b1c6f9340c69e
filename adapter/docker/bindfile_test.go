package docker

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/dockerfake"
	"github.com/agentpen/agentpen/workbench/bind"
)

// TestBringUpWritesBindFile: every workspace that runs the workbench has
// its bind file in its run directory before its container is created:
// its task and a newline, mode 0400, owned by the daemon's user (the
// socket's owner); its command names the file's path, never the task. A
// launcher's own command gets no file.
func TestBringUpWritesBindFile(t *testing.T) {
	a, fake := fakeAdapter(t)
	spec := fakeSpec("bound", 2)
	spec.Workspaces[1].TaskID = "sql/top_customer@3"
	spec.Workspaces[1].Command = []string{"sleep", "infinity"} // a launcher's own
	st, err := os.Stat(dk(a.Adapter).Host().SocketPath)
	if err != nil {
		t.Fatal(err)
	}
	owner := st.Sys().(*syscall.Stat_t)
	var mu sync.Mutex
	seen := map[string]string{} // workspace command -> what its run directory held at create
	fake.OnFunc("POST /containers/create", func(c dockerfake.Call) dockerfake.Reply {
		var body struct {
			Cmd        []string
			Labels     map[string]string
			HostConfig struct {
				Mounts []struct{ Source, Target string }
			}
		}
		json.Unmarshal(c.Body, &body)
		if body.Labels[campaign.LabelRole] != campaign.RoleWork {
			return dockerfake.Pass
		}
		var runDir string
		for _, m := range body.HostConfig.Mounts {
			if m.Target == campaign.WorkbenchRunDir {
				runDir = m.Source
			}
		}
		path := filepath.Join(runDir, bind.FileName)
		got := "no file"
		if fi, err := os.Lstat(path); err == nil {
			sys := fi.Sys().(*syscall.Stat_t)
			b, _ := os.ReadFile(path)
			got = string(b)
			if fi.Mode() != bind.FileMode || sys.Uid != owner.Uid || sys.Gid != owner.Gid {
				got = "bad file: " + fi.Mode().String()
			}
		}
		mu.Lock()
		seen[body.Cmd[0]] = got
		mu.Unlock()
		for _, arg := range body.Cmd {
			if arg == "software/median" || arg == "sql/top_customer@3" {
				t.Errorf("the workspace's command names its task: %v", body.Cmd)
			}
		}
		return dockerfake.Pass
	})
	a.ReadyTimeout = time.Second
	a.BringUp(t.Context(), spec) // whether it comes up on the fake is not this test's
	if seen["serve"] != "software/median\n" {
		t.Errorf("the workbench workspace's run directory held %q at create, want its bind file", seen["serve"])
	}
	if seen["sleep"] != "no file" {
		t.Errorf("a launcher's command got %q, want no bind file", seen["sleep"])
	}
}
