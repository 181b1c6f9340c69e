package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/testenv"
	"github.com/agentpen/agentpen/internal/testkit/workbenchtest"
	"github.com/agentpen/agentpen/workbench/client"
)

// TestServeUIDRange (root): a server given a uid block by the environment
// (as a campaign gives each workspace one) runs every episode's code as a
// uid of that block, never its last (the kill thread's), and concurrent
// episodes as distinct uids; every session the block has room for works.
func TestServeUIDRange(t *testing.T) {
	testenv.RequireRoot(t)
	const base, count = 40064, 4 // 3 episode uids, 40067 the killer
	ls := workbenchtest.Serve(t, workbenchtest.Options{
		Env:  []string{"WORKBENCH_UID_BASE=" + strconv.Itoa(base), "WORKBENCH_UID_COUNT=" + strconv.Itoa(count)},
		Args: []string{"--max-sessions", "3"},
	})
	ctx := testenv.Context(t)
	task := onePerDomain(t)[0].ID
	uids := make([]int, 3)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []string
	for i := range uids {
		wg.Go(func() {
			w := workbenchtest.Dial(t, ctx, ls.URL)
			if _, err := w.Reset(ctx, client.ResetOptions{TaskID: task}); err != nil {
				mu.Lock()
				errs = append(errs, err.Error())
				mu.Unlock()
				return
			}
			r, err := w.Step(ctx, "run_python", workbenchtest.Args(map[string]any{"code": "import os\nprint(os.getuid(), os.getgid())"}))
			if err != nil {
				mu.Lock()
				errs = append(errs, err.Error())
				mu.Unlock()
				return
			}
			line, _, _ := strings.Cut(r.Observation.Output, "\n")
			f := strings.Fields(line)
			if len(f) != 2 || f[0] != f[1] {
				mu.Lock()
				errs = append(errs, "run_python printed "+r.Observation.Output)
				mu.Unlock()
				return
			}
			uids[i], _ = strconv.Atoi(f[0])
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("sessions failed: %v", errs)
	}
	seen := map[int]bool{}
	for _, u := range uids {
		if u < base || u >= base+count-1 {
			t.Errorf("episode code ran as uid %d, outside the episode uids %d..%d of the block", u, base, base+count-2)
		}
		if seen[u] {
			t.Errorf("two concurrent episodes ran as uid %d: %v", u, uids)
		}
		seen[u] = true
	}
	if !strings.Contains(ls.Logs.String(), `"range":"40064-40067"`) {
		t.Errorf("the server did not log its uid range:\n%s", ls.Logs.String())
	}
}

// TestServeBadUIDRange (root): a malformed or incomplete uid block, or
// more sessions than it has uids, stops the server at start with a message
// naming the problem, never a fallback to the default range.
func TestServeBadUIDRange(t *testing.T) {
	testenv.RequireRoot(t)
	for _, c := range []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"base_only", []string{"WORKBENCH_UID_BASE=40000"}, nil, 1, "set both or neither"},
		{"not_number", []string{"WORKBENCH_UID_BASE=4e4", "WORKBENCH_UID_COUNT=64"}, nil, 1, "not numbers"},
		{"below_space", []string{"WORKBENCH_UID_BASE=1000", "WORKBENCH_UID_COUNT=64"}, nil, 1, "must lie within 20000..65533"},
		{"past_space", []string{"WORKBENCH_UID_BASE=65500", "WORKBENCH_UID_COUNT=64"}, nil, 1, "must lie within"},
		{"one_uid", []string{"WORKBENCH_UID_BASE=40000", "WORKBENCH_UID_COUNT=1"}, nil, 1, "at least 2 uids"},
		{"too_many_sessions", []string{"WORKBENCH_UID_BASE=40000", "WORKBENCH_UID_COUNT=4"}, []string{"--max-sessions", "8"}, 2, "--max-sessions 8: the uid range 40000-40003 has 3 episode uids"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"serve", "--listen", "127.0.0.1:0", "--home-dir", t.TempDir()}, c.args...)
			cmd := exec.CommandContext(testenv.Context(t), binary(t), args...)
			cmd.Env = append(os.Environ(), c.env...)
			out, err := cmd.CombinedOutput()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != c.code {
				t.Fatalf("serve with %v exited %v, want exit %d:\n%s", c.env, err, c.code, out)
			}
			if !strings.Contains(string(out), c.want) {
				t.Fatalf("serve with %v said %q, want %q", c.env, out, c.want)
			}
		})
	}
}
