package attest

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestCompare: two records of the same images differ in nothing but
// their ids and times, which are ignored; a workspace whose image was
// another (a tag repointed) differs in its image id and configuration
// digest, and then the ids are differences too; a limit requested and
// not enforced is listed as only requested; a subject one record lacks
// differs.
func TestCompare(t *testing.T) {
	f := loadFixture(t, "internal")
	a := Evaluate(f.src, f.observed())
	clone := func(r *Report) *Report {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var out Report
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		return &out
	}
	fields := func(ds []FieldDiff) []string {
		var out []string
		for _, d := range ds {
			out = append(out, d.Field)
		}
		return out
	}
	again := clone(a)
	again.CampaignID, again.Instance, again.AttestedAt = "another", strings.Repeat("9", 32), a.AttestedAt.Add(time.Hour)
	for i := range again.Fingerprint.Containers {
		again.Fingerprint.Containers[i].ContainerID = strings.Repeat("c", 63) + string(rune('0'+i))
	}
	c := Compare(a, again)
	if !c.Same || len(c.Differs) != 0 {
		t.Errorf("the same images: same %v, differs %v", c.Same, c.Differs)
	}
	wantIgnored := []string{"campaign_id", "instance", "attested_at", "server.container_id", "workspaces[0].container_id", "workspaces[1].container_id", "workspaces[2].container_id"}
	if got := fields(c.Ignored); !slices.Equal(got, wantIgnored) {
		t.Errorf("the same images: ignored %v, want %v", got, wantIgnored)
	}
	// The fixture's daemon has no cgroups: every limit is only requested.
	if got := fields(c.OnlyRequested); !slices.Equal(got, []string{"workspaces[0].limits.memory", "workspaces[0].limits.pids", "workspaces[1].limits.memory", "workspaces[1].limits.pids", "workspaces[2].limits.memory", "workspaces[2].limits.pids"}) {
		t.Errorf("only requested: %v", got)
	}

	other := clone(again)
	other.Fingerprint.Runtime.KernelVersion = "6.1.0-other"
	w := &other.Fingerprint.Containers[1]
	w.Reference, w.ImageID, w.ConfigDigest = "sha256:"+strings.Repeat("e", 64), "sha256:"+strings.Repeat("e", 64), "sha256:"+strings.Repeat("e", 64)
	c = Compare(a, other)
	got := fields(c.Differs)
	for _, want := range []string{"campaign_id", "fingerprint.runtime.kernel_version", "workspaces[0].container_id", "workspaces[0].reference", "workspaces[0].image_id", "workspaces[0].config_digest"} {
		if !slices.Contains(got, want) {
			t.Errorf("another image: differs %v, want %s among them", got, want)
		}
	}
	if c.Same || slices.Contains(got, "server.container_id") || !slices.Contains(fields(c.Ignored), "server.container_id") {
		t.Errorf("another image in one workspace: same %v, differs %v, ignored %v: the server ran the same image", c.Same, got, fields(c.Ignored))
	}

	fewer := clone(a)
	fewer.Fingerprint.Containers = fewer.Fingerprint.Containers[:2]
	if c := Compare(a, fewer); c.Same || !slices.Contains(fields(c.Differs), "workspaces[1]") {
		t.Errorf("a subject missing: %+v", c.Differs)
	}
}
