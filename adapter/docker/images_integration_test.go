package docker_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"

	"github.com/agentpen/agentpen/adapter"
	"github.com/agentpen/agentpen/adapter/drivertest"
	"github.com/agentpen/agentpen/api"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

// TestLocalTagPinned: a spec that names its images by a local tag comes
// up and attests on the image id the tag named at create time: every
// container runs that id, the spec file keeps the tag, the begin record
// the id; once the tag is moved to another image, the campaign still
// attests (on the pinned id), and the adapter lists the tag where it is
// now, and the workbench image as one that carries the workbench. Before tags were resolved, the spec was refused.
func TestLocalTagPinned(t *testing.T) {
	testenv.RequireRoot(t)
	d, cli := realDocker(t)
	id := imageID(t, cli, workbenchImage)
	ctx := t.Context()
	tag := "agentpen/test-tag:" + strings.ToLower(uniqueCampaign(t)[len(uniqueCampaign(t))-8:])
	if err := cli.ImageTag(ctx, id, tag); err != nil {
		t.Fatal(err)
	}
	// Only the tag this test made is removed (the image keeps its others).
	t.Cleanup(func() { cli.ImageRemove(context.Background(), tag, image.RemoveOptions{}) })
	getenv := func(k string) string {
		if k == campaign.DefaultAPIKeyEnv {
			return "tag-test-key-0123456789abcdef"
		}
		return ""
	}
	h := drivertest.NewHarness(t, &adapter.Adapter{Driver: d, Getenv: getenv, ReadyTimeout: 90 * time.Second}, "")
	cid := uniqueCampaign(t)
	t.Cleanup(func() { forceRemove(cli, cid) })
	spec := workbenchSpec(cid, tag, []string{"software/median@2"})
	res, err := h.Up(ctx, spec, adapter.UpOptions{})
	if err != nil {
		t.Fatalf("up with a local tag: %v", err)
	}
	if !res.Report.OK {
		t.Fatalf("attestation: %v", res.Report.FailureLines())
	}
	c := res.Campaign
	t.Logf("up and attested (%d checks) on %s = %s", len(res.Report.Checks()), tag, id)
	for _, cont := range append([]string{c.ServerID}, c.Workspaces[0].ContainerID) {
		info, err := cli.ContainerInspect(ctx, cont)
		if err != nil {
			t.Fatal(err)
		}
		if info.Image != id {
			t.Errorf("container %s runs %s, want the pinned id %s", info.Name, info.Image, id)
		}
	}
	b, err := os.ReadFile(filepath.Join(c.Dir, "spec-1.json"))
	if err != nil || !strings.Contains(string(b), `"image": "`+tag+`"`) || strings.Contains(string(b), id) {
		t.Errorf("the spec file does not keep the tag as given (%v):\n%s", err, b)
	}
	sc, err := h.Root.Open(cid)
	if err != nil {
		t.Fatal(err)
	}
	st, err := sc.Read()
	sc.Close()
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Latest().Images[tag]; got != id {
		t.Errorf("the begin record pins %s to %q, want %s", tag, got, id)
	}

	// The tag moves to another image: the campaign is what it was.
	other := imageID(t, cli, "agentpen/python-base:bookworm")
	if err := cli.ImageTag(ctx, other, tag); err != nil {
		t.Fatal(err)
	}
	rep, err := h.Attest(ctx, cid, adapter.AttestOptions{})
	if err != nil || !rep.OK {
		t.Fatalf("attest after the tag moved: %v %v", err, rep.FailureLines())
	}
	imgs, err := h.Images(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, img := range imgs {
		if img.ID == id && img.Workbench == "" {
			t.Errorf("the workbench image %s carries no %s label (make images sets it)", id, api.WorkbenchLabel)
		}
		for _, tg := range img.Tags {
			if tg == tag {
				found = true
				if img.ID != other {
					t.Errorf("Images lists %s on %s, want %s", tag, img.ID, other)
				}
			}
		}
	}
	if !found {
		t.Errorf("Images does not list %s: %+v", tag, imgs)
	}
	if err := h.TearDown(ctx, cid); err != nil {
		t.Fatal(err)
	}
}
