package dockerjson

import (
	"testing"

	"github.com/agentpen/agentpen/apikey"
)

// TestDecodeCaptures: every answer of the captured campaigns decodes, and
// what the daemon did not give is missing evidence, never a zero value
// taken for an answer.
func TestDecodeCaptures(t *testing.T) {
	for _, name := range fixtureNames {
		c := loadCapture(t, name)
		rt := c.Decode("AGENTPEN_API_KEY", apikey.Default())
		if p := rt.Daemon.Problem("/info"); p != "" || rt.Daemon.ID == "" || !rt.Daemon.Rootless() {
			t.Errorf("%s: daemon %+v (%s)", name, rt.Daemon, p)
		}
		if len(rt.Containers) == 0 || len(rt.Containers) != len(c.Containers) {
			t.Errorf("%s: %d containers decoded of %d", name, len(rt.Containers), len(c.Containers))
		}
		for id, d := range rt.Containers {
			if p := d.Problem("container"); p != "" || d.ID != id || !d.HasConf || !d.HasHostConfig || !d.HasState {
				t.Errorf("%s: container %s: %q, id %s", name, id, p, d.ID)
			}
		}
		if p := rt.ContainerList.Problem("list"); p != "" || len(rt.ContainerList.Items) == 0 {
			t.Errorf("%s: container list %q %v", name, p, rt.ContainerList.Items)
		}
	}
	for _, tt := range []struct {
		name string
		raw  Raw
		want string
	}{
		{"not_found", Raw{NotFound: true}, "the daemon reports no such container"},
		{"failed", Raw{Err: "status 500"}, "container could not be read: status 500"},
		{"empty", Raw{}, "container: the daemon answered nothing"},
		{"garbage", Raw{JSON: []byte(`[`)}, "container: container inspect: unexpected end of JSON input"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Container(tt.raw, "", apikey.Default()).Problem("container"); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestImageConfigDigest: the classic image store's image id is its
// configuration's digest; the containerd store's (an inspect with a
// Descriptor) is its manifest's, and no configuration digest is given.
func TestImageConfigDigest(t *testing.T) {
	const id = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	if im := Image(Raw{JSON: []byte(`{"Id":"` + id + `","RepoDigests":[]}`)}); im.ConfigDigest != id {
		t.Errorf("classic store: config digest %q, want the id %s", im.ConfigDigest, id)
	}
	if im := Image(Raw{JSON: []byte(`{"Id":"` + id + `","Descriptor":{"digest":"` + id + `"}}`)}); im.ConfigDigest != "" || im.ID != id {
		t.Errorf("containerd store: %+v, want the id and no config digest", im)
	}
	if d := Info(Raw{JSON: []byte(`{"ID":"x","KernelVersion":"6.1.0-test"}`)}); d.KernelVersion != "6.1.0-test" {
		t.Errorf("info: kernel %q, want 6.1.0-test", d.KernelVersion)
	}
}
