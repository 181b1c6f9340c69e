package docker_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
)

// buildLabelled builds an image from the local image from with one label
// (never pulling: from is an id the daemon holds) and returns its id.
func buildLabelled(t *testing.T, cli *client.Client, from, label string) string {
	t.Helper()
	var ctxTar bytes.Buffer
	tw := tar.NewWriter(&ctxTar)
	df := fmt.Sprintf("FROM %s\nLABEL io.agentpen.test.diff=%q\n", from, label)
	tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(df))})
	tw.Write([]byte(df))
	tw.Close()
	tag := "agentpen/test-diff:" + label
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

// agentpenBinary builds agentpen from this tree and returns its path.
func agentpenBinary(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command builds agentpen here: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "agentpen")
	if out, err := exec.Command(goBin, "build", "-o", bin, "../../cmd/agentpen").CombinedOutput(); err != nil {
		t.Fatalf("build agentpen: %v\n%s", err, out)
	}
	return bin
}

// TestDiffRealDaemon: three campaigns of a spec naming one tag for its
// workspace, the tag repointed to another image (both built here from
// the workbench image, never pulled) before the third. The records'
// fingerprints name the docker driver, the kernel and each container's
// workbench; agentpen diff of the first two (the same image twice) exits
// 0, ignoring only ids and times; of the first and the third it exits 1
// naming the workspace's image id and configuration digest, the two
// images', and still ignores the server's id (it ran the same image).
func TestDiffRealDaemon(t *testing.T) {
	d, cli := realDocker(t)
	from := imageID(t, cli, workbenchImage)
	stamp := strings.ToLower(uniqueCampaign(t))
	stamp = stamp[len(stamp)-8:]
	v1 := buildLabelled(t, cli, from, "v1-"+stamp)
	v2 := buildLabelled(t, cli, from, "v2-"+stamp)
	tag := "agentpen/test-diff:task-" + stamp
	t.Cleanup(func() { cli.ImageRemove(context.Background(), tag, image.RemoveOptions{}) })
	point := func(id string) {
		if err := cli.ImageTag(t.Context(), id, tag); err != nil {
			t.Fatalf("tag %s as %s: %v", id, tag, err)
		}
	}
	getenv := func(k string) string {
		if k == campaign.DefaultAPIKeyEnv {
			return "diff-key-3b8e0f5a91c24d77"
		}
		return ""
	}
	h := drivertest.NewHarness(t, &adapter.Adapter{Driver: d, Getenv: getenv, ReadyTimeout: 90 * time.Second}, "")
	up := func() (string, *attest.Report) {
		t.Helper()
		id := uniqueCampaign(t)
		t.Cleanup(func() { forceRemove(cli, id) })
		spec := workbenchSpec(id, from, e2eTasks[:1])
		spec.Workspaces[0].Image = tag
		_, rep, err := h.BringUpAttested(t.Context(), spec, adapter.AttestOptions{})
		if err != nil || rep == nil || !rep.OK {
			t.Fatalf("bring-up of %s: %v (report ok %v)", id, err, rep != nil && rep.OK)
		}
		return id, rep
	}
	point(v1)
	c1, rep := up()
	c2, _ := up()
	point(v2)
	c3, _ := up()

	fp := rep.Fingerprint
	if fp.Driver != "docker" || fp.Runtime.KernelVersion == "" || fp.Runtime.Version == "" || len(fp.Containers) != 2 {
		t.Errorf("%s: fingerprint %+v", c1, fp)
	}
	for _, c := range fp.Containers {
		if c.Workbench == nil || !strings.HasPrefix(c.Workbench.Digest, "sha256:") || c.ImageID == "" || c.ConfigDigest != c.ImageID {
			t.Errorf("%s: %s: workbench %+v, image %s, config %s", c1, c.Subject, c.Workbench, c.ImageID, c.ConfigDigest)
		}
	}
	if w := fp.Containers[1]; w.Requested != tag || w.Reference != v1 || w.ImageID != v1 || !strings.HasPrefix(w.Seccomp, "sha256:") {
		t.Errorf("%s: workspace requested %s, pinned %s, ran %s, seccomp %s; want %s, %s, %s and a profile's digest", c1, w.Requested, w.Reference, w.ImageID, w.Seccomp, tag, v1, v1)
	}

	bin := agentpenBinary(t)
	diff := func(a, b string) (diffOut, string, int) {
		t.Helper()
		code := 0
		out, err := exec.Command(bin, "diff", "--json", "--state-root", h.StateRoot, a, b).Output()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		var rep diffOut
		if err := json.Unmarshal(out, &rep); err != nil {
			t.Fatalf("diff %s %s: exit %d: %v: %s", a, b, code, err, out)
		}
		text, _ := exec.Command(bin, "diff", "--state-root", h.StateRoot, a, b).Output()
		return rep, string(text), code
	}
	fields := func(ds []attest.FieldDiff) []string {
		var out []string
		for _, d := range ds {
			out = append(out, d.Field)
		}
		return out
	}

	same, text, code := diff(c1, c2)
	if code != 0 || !same.Same || len(same.Differs) != 0 {
		t.Errorf("the same image twice: exit %d, differs %v\n%s", code, same.Differs, text)
	}
	idsAndTimes := []string{"campaign_id", "instance", "attested_at", "server.container_id", "workspaces[0].container_id"}
	for _, want := range idsAndTimes {
		if !slices.Contains(fields(same.Ignored), want) {
			t.Errorf("the same image twice: ignored %v, want %s among them", fields(same.Ignored), want)
		}
	}
	for _, f := range fields(same.Ignored) {
		if !slices.Contains(append(idsAndTimes, "generation"), f) {
			t.Errorf("the same image twice: ignored %s, which is no id or time", f)
		}
	}

	rep3, text, code := diff(c1, c3)
	if code != 1 || rep3.Same {
		t.Fatalf("the tag repointed: exit %d, same %v\n%s", code, rep3.Same, text)
	}
	by := map[string]attest.FieldDiff{}
	for _, f := range rep3.Differs {
		by[f.Field] = f
	}
	for _, f := range []string{"workspaces[0].image_id", "workspaces[0].config_digest"} {
		if got := by[f]; got.A != v1 || got.B != v2 {
			t.Errorf("the tag repointed: %s %+v, want %s then %s\n%s", f, got, v1, v2, text)
		}
	}
	if _, ok := by["workspaces[0].requested"]; ok {
		t.Errorf("the tag repointed: the requested image differs: both name %s\n%s", tag, text)
	}
	if _, ok := by["server.image_id"]; ok || !slices.Contains(fields(rep3.Ignored), "server.container_id") {
		t.Errorf("the server ran the same image: differs %v, ignored %v", fields(rep3.Differs), fields(rep3.Ignored))
	}
	if !strings.Contains(text, "workspaces[0].config_digest") || !strings.Contains(text, "B "+v2) {
		t.Errorf("the text does not name the configuration digest:\n%s", text)
	}
	t.Logf("agentpen diff %s %s:\n%s", c1, c3, text)
}

// diffOut is agentpen diff --json.
type diffOut struct {
	attest.Comparison
}
