package docker_test

import (
	"archive/tar"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/adapter/drivertest"
	"github.com/agentpen/agentpen/attest"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/gittest"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

// taskRepo makes a task's repository in dir at its base (returned), then
// plants its leak: "" none, "branch" a branch at the fix, "reflog" the
// fix reset away (the reflogs keep it), "dangling" the fix reset away and
// the reflogs expired (a dangling commit), "orig" a merge's leftover.
func taskRepo(t *testing.T, dir, leak string) (base, fix string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(s string) {
		if err := os.WriteFile(filepath.Join(dir, "median.py"), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gittest.Run(t, dir, "init", "-q", "-b", "main")
	write("def median(xs):\n    return sorted(xs)[len(xs)//2]\n")
	gittest.Run(t, dir, "add", "median.py")
	gittest.Run(t, dir, "commit", "-q", "-m", "the task")
	base = gittest.Run(t, dir, "rev-parse", "HEAD")
	if leak == "" {
		return base, ""
	}
	if leak == "orig" {
		if err := os.WriteFile(filepath.Join(dir, "median.py.orig"), []byte("the fix\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return base, ""
	}
	if leak == "branch" {
		gittest.Run(t, dir, "checkout", "-q", "-b", "fix")
	}
	write("def median(xs):\n    s = sorted(xs)\n    return (s[(len(s)-1)//2] + s[len(s)//2]) / 2\n")
	gittest.Run(t, dir, "commit", "-q", "-am", "the fix")
	fix = gittest.Run(t, dir, "rev-parse", "HEAD")
	switch leak {
	case "branch":
		gittest.Run(t, dir, "checkout", "-q", "main")
	case "reflog":
		gittest.Run(t, dir, "reset", "-q", "--hard", base)
		os.Remove(filepath.Join(dir, ".git", "ORIG_HEAD"))
	case "dangling":
		gittest.Run(t, dir, "reset", "-q", "--hard", base)
		os.Remove(filepath.Join(dir, ".git", "ORIG_HEAD"))
		gittest.Run(t, dir, "reflog", "expire", "--expire=now", "--all")
	}
	return base, fix
}

// buildWithWorkspace builds an image of from with dir's tree at
// /workspace (root's files, their modes kept, as the image author's) and
// lines after, and removes it when the test ends; it returns the
// image's id.
func buildWithWorkspace(t *testing.T, cli *client.Client, from, dir string, lines ...string) string {
	t.Helper()
	var ctxTar bytes.Buffer
	tw := tar.NewWriter(&ctxTar)
	df := "FROM " + from + "\nCOPY workspace /workspace\n" + strings.Join(lines, "\n") + "\n"
	tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(df))})
	tw.Write([]byte(df))
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(filepath.Join("workspace", rel))
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		if d.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if info.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			tw.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tw.Close()
	tag := "agentpen/test-integrity:" + strings.ToLower(filepath.Base(dir)) + "-" + strings.ToLower(uniqueCampaign(t)[len(uniqueCampaign(t))-8:])
	resp, err := cli.ImageBuild(t.Context(), &ctxTar, build.ImageBuildOptions{Tags: []string{tag}, Remove: true, ForceRemove: true, Version: build.BuilderV1})
	if err != nil {
		t.Fatalf("build %s: %v", tag, err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if bytes.Contains(out, []byte(`"error"`)) {
		t.Fatalf("build %s: %s", tag, out)
	}
	t.Cleanup(func() { cli.ImageRemove(context.Background(), tag, image.RemoveOptions{PruneChildren: true}) })
	return imageID(t, cli, tag)
}

// TestIntegrityGitLeaks: workspaces whose images each plant one leak of
// the fix in their repository (a branch at it, a reflog entry, a
// dangling commit, a merge's leftover) fail the bring-up's attestation,
// each its own git_history check naming the vector and, where there is
// one, the fix; the same repository without the leak, declared at its
// base, passes. A pool made of a leaky image is never handed out: its
// bring-up does not attest, and nothing can be claimed.
func TestIntegrityGitLeaks(t *testing.T) {
	testenv.RequireRoot(t)
	if _, err := exec.LookPath("git"); err != nil {
		testenv.Unavailable(t, "git is not installed: "+err.Error())
	}
	d, cli := realDocker(t)
	from := imageID(t, cli, workbenchImage)
	type variant struct {
		leak, base, fix, img string
		want                 string // in the check's reason
	}
	vs := []*variant{{leak: ""}, {leak: "branch", want: "ref branch refs/heads/fix"}, {leak: "reflog", want: "reflog HEAD logs/HEAD#"},
		{leak: "dangling", want: "object commit "}, {leak: "orig", want: "file patch median.py.orig"}}
	for _, v := range vs {
		dir := filepath.Join(t.TempDir(), "ws-"+cmp.Or(v.leak, "clean"))
		v.base, v.fix = taskRepo(t, filepath.Join(dir, "repo"), v.leak)
		v.img = buildWithWorkspace(t, cli, from, dir)
		if v.fix != "" && v.leak == "dangling" {
			v.want += v.fix
		}
	}
	getenv := func(k string) string {
		if k == campaign.DefaultAPIKeyEnv {
			return "integrity-key-7d3a0c95e1f24b68"
		}
		return ""
	}
	h := drivertest.NewHarness(t, &adapter.Adapter{Driver: d, Getenv: getenv, ReadyTimeout: 90 * time.Second}, "")
	ctx := t.Context()
	id := uniqueCampaign(t)
	t.Cleanup(func() { forceRemove(cli, id) })
	spec := workbenchSpec(id, from, e2eTasks[:1])
	spec.Workspaces = nil
	for i, v := range vs {
		spec.Workspaces = append(spec.Workspaces, campaign.WorkspaceSpec{TaskID: e2eTasks[0], AttemptID: "a" + cmp.Or(v.leak, "clean"), Image: v.img,
			Integrity: campaign.IntegritySpec{Bases: map[string]string{"/workspace/repo": v.base}}})
		if i == 0 {
			spec.Workspaces[i].Integrity = campaign.IntegritySpec{GitRoot: "/workspace/repo", Bases: map[string]string{"/workspace/repo": v.base}}
		}
	}
	if _, err := h.BringUp(ctx, spec); err != nil {
		t.Fatal(err)
	}
	_, _, rep, err := h.Observe(ctx, id, adapter.AttestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var wantFailed []string
	for i, v := range vs {
		name := fmt.Sprintf("workspaces[%d].probe.git_history", i)
		c, ok := rep.Checks()[name]
		switch {
		case !ok:
			t.Errorf("%s: no check", name)
		case v.leak == "" && !c.Pass:
			t.Errorf("the clean image: %s failed: %s", name, c.Reason)
		case v.leak != "" && (c.Pass || !strings.Contains(c.Reason, v.want)):
			t.Errorf("the %s leak: %s pass %v, reason %q, want it to name %q", v.leak, name, c.Pass, c.Reason, v.want)
		}
		if v.leak != "" {
			wantFailed = append(wantFailed, name)
		}
		t.Logf("%s (%s): pass %v %s", name, cmp.Or(v.leak, "clean"), c.Pass, c.Reason)
	}
	if !slices.Equal(rep.FailedChecks, wantFailed) {
		t.Errorf("failed checks %v, want the leaky workspaces' git_history only: %v", rep.FailedChecks, wantFailed)
	}
	// Observed again (nothing written: the audits run again), the clean
	// repository is unchanged: its audit comes from the first, Cached;
	// the leaky ones, never learnt, are audited again and fail again.
	_, _, rep2, err := h.Observe(ctx, id, adapter.AttestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep2.FailedChecks, wantFailed) {
		t.Errorf("observed again: failed checks %v, want %v:\n%s", rep2.FailedChecks, wantFailed, strings.Join(rep2.FailureLines(), "\n"))
	}
	for _, rec := range rep2.Connectivity.Probes {
		if rec.Check != "workspaces[0].probe.git_history" {
			continue
		}
		if len(rec.Git) != 1 || !rec.Git[0].Cached || rec.Git[0].Objects == 0 || rec.Git[0].Base != vs[0].base {
			t.Errorf("observed again, the clean repository's audit: %+v", rec.Git)
		}
	}

	// A pool of the branch image: never handed out.
	pid := uniqueCampaign(t)
	t.Cleanup(func() { forceRemove(cli, pid) })
	ps := workbenchSpec(pid, from, e2eTasks[:1])
	ps.Workspaces[0].Image, ps.Pool = vs[1].img, 1
	_, prep, err := h.BringUpAttested(ctx, ps, adapter.AttestOptions{})
	if prep == nil || prep.OK {
		t.Fatalf("a pool of a leaky image: report %v, error %v; want a report that is not ok", prep, err)
	}
	if !slices.Contains(prep.FailedChecks, "workspaces[1].probe.git_history") {
		t.Errorf("the pooled slot's git_history did not fail: %v", prep.FailedChecks)
	}
	if cl, err := h.Claim(ctx, pid, e2eTasks[0], "c0"); err == nil {
		t.Fatalf("a workspace of a leaky pool was handed out: %+v", cl.Workspace)
	}
}

// TestIntegrityForbiddenPaths: a file the spec forbids that the agent's
// uid (the episode uid, where the workbench serves) can open fails the
// attestation, naming it; one of root's it cannot open, and one that is
// not there, do not. A token in an image's environment fails its
// workspace's env_secrets, named and never its value.
func TestIntegrityForbiddenPaths(t *testing.T) {
	testenv.RequireRoot(t)
	if _, err := exec.LookPath("git"); err != nil {
		testenv.Unavailable(t, "git is not installed: "+err.Error())
	}
	d, cli := realDocker(t)
	from := imageID(t, cli, workbenchImage)
	dir := filepath.Join(t.TempDir(), "ws-answers")
	base, _ := taskRepo(t, filepath.Join(dir, "repo"), "")
	for name, mode := range map[string]os.FileMode{"answer.txt": 0o644, "key.txt": 0o600} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("42\n"), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
	}
	img := buildWithWorkspace(t, cli, from, dir)
	const canary = "ghp_canaryIntegrity0123456789abcdef"
	tokened := buildWithWorkspace(t, cli, from, dir, "ENV GITHUB_TOKEN="+canary)
	getenv := func(k string) string {
		if k == campaign.DefaultAPIKeyEnv {
			return "integrity-key-7d3a0c95e1f24b68"
		}
		return ""
	}
	h := drivertest.NewHarness(t, &adapter.Adapter{Driver: d, Getenv: getenv, ReadyTimeout: 90 * time.Second}, "")
	ctx := t.Context()
	id := uniqueCampaign(t)
	t.Cleanup(func() { forceRemove(cli, id) })
	spec := workbenchSpec(id, from, e2eTasks[:1])
	spec.Workspaces = []campaign.WorkspaceSpec{{TaskID: e2eTasks[0], Image: img, Integrity: campaign.IntegritySpec{
		Bases:          map[string]string{"/workspace/repo": base},
		ForbiddenPaths: []string{"/workspace/answer.txt", "/workspace/key.txt", "/workspace/none.txt"}}},
		{TaskID: e2eTasks[0], AttemptID: "tokened", Image: tokened}}
	if _, err := h.BringUp(ctx, spec); err != nil {
		t.Fatal(err)
	}
	_, _, rep, err := h.Observe(ctx, id, adapter.AttestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"workspaces[0].probe.forbidden_paths", "workspaces[1].env_secrets"}
	if !slices.Equal(rep.FailedChecks, want) {
		t.Fatalf("failed checks %v, want %v:\n%s", rep.FailedChecks, want, strings.Join(rep.FailureLines(), "\n"))
	}
	c := rep.Checks()[want[0]]
	if !strings.Contains(c.Reason, "/workspace/answer.txt as uid ") || !strings.Contains(c.Reason, "readable") ||
		strings.Contains(c.Reason, "key.txt") || strings.Contains(c.Reason, "none.txt") {
		t.Errorf("%s: %s, want answer.txt (readable by all) alone", want[0], c.Reason)
	}
	if c := rep.Checks()[want[1]]; fmt.Sprint(c.Observed) != "[GITHUB_TOKEN]" {
		t.Errorf("%s observed %v, want the token's name", want[1], c.Observed)
	}
	if b, _ := json.Marshal(rep); bytes.Contains(b, []byte(canary)) {
		t.Errorf("the token's value is in the report")
	}
}

// TestIntegrityNetworkCanaries: under nat egress a launcher's own command
// reaches agentpen's stand-ins for a package registry and the launcher on
// a host address: each kind its spec does not allow fails its
// network_canaries check, named, the allowed kind (code_host) not; one
// allowing all but the metadata service fails on that; one allowing every
// kind passes, and a workbench's (agent code in an episode's network
// namespace) is not probed. Under internal egress with a network per
// agent the same commands reach none: the check passes on the stand-ins'
// silence and the route to the metadata address leaving their way.
func TestIntegrityNetworkCanaries(t *testing.T) {
	d, cli := realDocker(t)
	img := imageID(t, cli, workbenchImage)
	getenv := func(k string) string {
		if k == campaign.DefaultAPIKeyEnv {
			return "integrity-key-7d3a0c95e1f24b68"
		}
		return ""
	}
	h := drivertest.NewHarness(t, &adapter.Adapter{Driver: d, Getenv: getenv, ReadyTimeout: 90 * time.Second}, "")
	// A launcher's own command: here a workbench of its own, serving
	// the workspace's socket (as agentpen waits for) without a grader.
	own := []string{"serve", "--listen", "unix://" + campaign.WorkbenchSocket}
	for _, egress := range []campaign.Egress{campaign.EgressNAT, campaign.EgressInternal} {
		t.Run(string(egress), func(t *testing.T) {
			ctx := t.Context()
			id := uniqueCampaign(t)
			t.Cleanup(func() { forceRemove(cli, id) })
			spec := workbenchSpec(id, img, e2eTasks[:1])
			spec.Egress = egress
			spec.Server.AgentReachable = true // a network each (per-agent), as nat has
			spec.Workspaces = []campaign.WorkspaceSpec{
				{TaskID: e2eTasks[0], AttemptID: "some", Image: img, Command: own, Integrity: campaign.IntegritySpec{AllowedEgress: []string{campaign.EgressCodeHost}}},
				{TaskID: e2eTasks[0], AttemptID: "every", Image: img, Command: own, Integrity: campaign.IntegritySpec{AllowedEgress: campaign.EgressClasses}},
				{TaskID: e2eTasks[0], AttemptID: "workbench", Image: img},
				{TaskID: e2eTasks[0], AttemptID: "no-metadata", Image: img, Command: own, Integrity: campaign.IntegritySpec{
					AllowedEgress: []string{campaign.EgressPackageRegistry, campaign.EgressCodeHost, campaign.EgressLauncher}}},
			}
			if _, err := h.BringUp(ctx, spec); err != nil {
				t.Fatal(err)
			}
			_, _, rep, err := h.Observe(ctx, id, adapter.AttestOptions{})
			if err != nil {
				t.Fatal(err)
			}
			checks := rep.Checks()
			for _, i := range []int{0, 1, 3} {
				if _, ok := checks[fmt.Sprintf("workspaces[%d].probe.network_canaries", i)]; !ok {
					t.Errorf("workspaces[%d]: no network_canaries check", i)
				}
			}
			if _, ok := checks["workspaces[2].probe.network_canaries"]; ok {
				t.Errorf("a workbench's workspace was probed for canaries from the container, not its episodes")
			}
			if egress == campaign.EgressInternal {
				if !rep.OK {
					t.Fatalf("internal egress: %v", rep.FailureLines())
				}
				return
			}
			want := []string{"workspaces[0].probe.network_canaries", "workspaces[3].probe.network_canaries"}
			if !slices.Equal(rep.FailedChecks, want) {
				t.Fatalf("failed checks %v, want %v:\n%s", rep.FailedChecks, want, strings.Join(rep.FailureLines(), "\n"))
			}
			why := checks[want[0]].Reason
			if why := checks[want[1]].Reason; !strings.Contains(why, "metadata: egress nat routes") {
				t.Errorf("all but the metadata service allowed: %s", why)
			}
			for _, class := range []string{campaign.EgressPackageRegistry, campaign.EgressLauncher, campaign.EgressMetadata} {
				if !strings.Contains(why, class) {
					t.Errorf("the reason does not name %s: %s", class, why)
				}
			}
			if strings.Contains(why, campaign.EgressCodeHost) {
				t.Errorf("the allowed code_host is named: %s", why)
			}
			reached := 0
			for _, l := range rep.Connectivity.Listeners {
				if l.Kind == attest.ListenerCanary && l.Class == campaign.EgressPackageRegistry {
					reached += l.Accepted
				}
			}
			if reached == 0 {
				t.Errorf("the registry's stand-in counted no connection: %+v", rep.Connectivity.Listeners)
			}
		})
	}
}
