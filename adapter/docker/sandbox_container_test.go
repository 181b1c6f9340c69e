package docker

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

// sandboxTestImage is the image the sandbox tests run in: the workspace
// image's base, with /usr/bin/python3 (never pulled; make images builds it).
const sandboxTestImage = "agentpen/python-base:bookworm"

// TestSandboxInWorkspaceContainer runs the sandbox's and the episode
// environment's own tests (the hostile corpus, the oracle episodes, the
// namespace, filter and kill tests) inside a real workspace container: the
// test binaries are built statically here and started as the container's
// command under exactly workspaceSpec's hardening (--init, read-only root,
// the four capabilities, no-new-privileges, the workspace's own seccomp
// profile and masked paths, the sized tmpfs mounts, the /run/workbench
// bind), with no network. The repository's testdata is
// bound read-only where the binaries look for it.
func TestSandboxInWorkspaceContainer(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireDocker(t)
	cli := sandboxDocker(t)
	if _, err := cli.ImageInspect(t.Context(), sandboxTestImage); err != nil {
		t.Fatalf("image %s: %v (make images builds it)", sandboxTestImage, err)
	}
	_, self, _, _ := runtime.Caller(0)
	repo := filepath.Dir(filepath.Dir(filepath.Dir(self)))

	// The binaries go into a directory the rootless daemon's user can
	// read, bound at /run/workbench; the repository (testdata, and the
	// sources a test reads) is bound read-only at its own path, which the
	// binaries carry (built without -trimpath).
	work, err := os.MkdirTemp("", "sbx-ctr-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	if err := os.Chmod(work, 0o755); err != nil {
		t.Fatal(err)
	}
	pkgs := []string{"sandbox", "episode"}
	for _, pkg := range pkgs {
		build := exec.Command("go", "test", "-c", "-o", filepath.Join(work, pkg+".test"), "./workbench/"+pkg)
		build.Dir = repo
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build %s tests: %v\n%s", pkg, err, out)
		}
	}

	// The exact hardening of a campaign workspace, from workspaceSpec.
	p := &campaign.Plan{Topology: campaign.TopologyNone}
	a := campaign.AgentPlan{Name: "sandbox-tests", Spec: campaign.WorkspaceSpec{Image: sandboxTestImage}}
	graderDir := filepath.Join(work, "grader") // empty: no grader here
	if err := os.Mkdir(graderDir, 0o755); err != nil {
		t.Fatal(err)
	}
	spec := workspaceSpec(p, a, work, graderDir, "")
	hc := spec.HostConfig
	hc.NetworkMode = "none"
	hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: repo, Target: repo, ReadOnly: true})
	if !*hc.Init || !hc.ReadonlyRootfs || len(hc.CapAdd) != 4 || hc.SecurityOpt[0] != "no-new-privileges" {
		t.Fatalf("workspaceSpec lost its hardening: %+v", hc)
	}
	// The tests make world-writable directories in /run (episode code must
	// find them read-only), so the tests get /run exactly as a workspace
	// has it, and the episode tree its own tmpfs.
	if !strings.Contains(hc.Tmpfs["/run/agent-workbench"], "size=") {
		t.Fatalf("workspaceSpec has no sized tmpfs for the episode tree: %v", hc.Tmpfs)
	}

	// make hostile runs kill_under_load 200 times beside busy loops: far
	// longer than make test's runs, where the binaries run -short (5
	// runs: the host's run of the same tests makes 50) so the adapter's
	// package stays within its bound on a busy machine.
	limit, short := 14*time.Minute, "-test.short"
	if os.Getenv("WORKBENCH_KILL_UNDER_LOAD_RUNS") != "" {
		limit, short = 60*time.Minute, "-test.short=false"
	}
	for _, pkg := range pkgs {
		t.Run(pkg, func(t *testing.T) {
			cfg := spec.Config
			// The launcher's machine code is checked against its source on
			// the host (binutils is not in the image).
			cfg.Cmd = []string{campaign.WorkbenchRunDir + "/" + pkg + ".test", "-test.count=1", "-test.timeout=" + limit.String(), "-test.v", short,
				"-test.skip", "^TestLauncherCodeMatchesSource$"}
			cfg.WorkingDir = filepath.Join(repo, "workbench", pkg)
			cfg.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "AGENTPEN_REQUIRE_DOCKER=1"}
			if n := os.Getenv("WORKBENCH_KILL_UNDER_LOAD_RUNS"); n != "" {
				cfg.Env = append(cfg.Env, "WORKBENCH_KILL_UNDER_LOAD_RUNS="+n) // scripts/hostile-load.sh
			}
			ctx, cancel := context.WithTimeout(t.Context(), limit+time.Minute)
			defer cancel()
			created, err := cli.ContainerCreate(ctx, cfg, hc, nil, nil, "")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				cli.ContainerRemove(context.Background(), created.ID, container.RemoveOptions{Force: true})
			})
			if err := cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
				t.Fatal(err)
			}
			waitC, errC := cli.ContainerWait(ctx, created.ID, container.WaitConditionNotRunning)
			var code int64
			select {
			case w := <-waitC:
				code = w.StatusCode
			case err := <-errC:
				t.Fatalf("wait: %v", err)
			}
			logs, err := cli.ContainerLogs(context.Background(), created.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			stdcopy.StdCopy(&out, &out, io.LimitReader(logs, 8<<20))
			logs.Close()
			text := out.String()
			if code != 0 || !strings.Contains(text, "\nPASS\n") {
				t.Fatalf("%s tests in the workspace container exited %d; what failed:\n%s\nthe end:\n%s", pkg, code, failures(text), tail(text, 3000))
			}
			// Nothing may have skipped itself (no root, no Docker...).
			if strings.Contains(text, "--- SKIP") {
				t.Fatalf("%s tests skipped in the workspace container:\n%s", pkg, tail(text, 6000))
			}
			t.Logf("%s: %d tests and subtests passed in the workspace container", pkg, strings.Count(text, "--- PASS"))
		})
	}
}

func sandboxDocker(t *testing.T) *client.Client {
	t.Helper()
	host, err := ResolveHost(os.Getenv("DOCKER_HOST"), os.Getenv("AGENTPEN_ALLOW_CUSTOM_SOCKET") == "1")
	if err != nil {
		t.Fatal(err)
	}
	cli, err := client.NewClientWithOpts(client.WithHost(host.URL), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// failures picks out of go test -v output the lines that say what failed:
// the --- FAIL lines and every message a test logged (file.go:N: ...).
func failures(out string) string {
	var b strings.Builder
	n := 0
	for _, l := range strings.Split(out, "\n") {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "--- FAIL") || strings.HasPrefix(t, "panic:") || fileLine.MatchString(t) {
			b.WriteString(l + "\n")
			if n++; n == 200 {
				b.WriteString("...\n")
				break
			}
		}
	}
	return b.String()
}

var fileLine = regexp.MustCompile(`^\w+\.go:\d+: `)

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
