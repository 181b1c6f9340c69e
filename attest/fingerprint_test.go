package attest

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestFingerprint: the fingerprint reads each fact from the evidence the
// checks judged: the kernel and daemon from /info, each container's image
// id, seccomp profile (an inline one by its digest, unconfined, or none
// named) and limits from its inspect (enforced only where the daemon
// says it enforces them), and the workbench from the probe output of the
// container it ran in, never from another's.
func TestFingerprint(t *testing.T) {
	f := loadFixture(t, "internal")
	f.info(t, func(m map[string]any) {
		m["KernelVersion"] = "6.1.0-fingerprint"
		m["CgroupDriver"], m["CgroupVersion"], m["MemoryLimit"], m["PidsLimit"] = "systemd", "2", true, false
	})
	f.container(t, ws0, func(m map[string]any) {
		m["HostConfig"].(map[string]any)["SecurityOpt"] = []any{"no-new-privileges", "seccomp=unconfined"}
	})
	wb := map[string]any{"version": "v9.9.9", "commit": "abc", "digest": "sha256:" + strings.Repeat("b", 64)}
	setBinary := func(subject, containerID string, wb map[string]any) {
		for i, r := range f.obs.Runs {
			if r.Subject != subject {
				continue
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(r.Stdout), &m); err != nil {
				t.Fatal(err)
			}
			m["binary"] = wb
			if wb == nil {
				delete(m, "binary")
			}
			if containerID != "" {
				m["container_id"] = containerID
			}
			b, _ := json.Marshal(m)
			f.obs.Runs[i].Stdout = string(b)
		}
	}
	setBinary(ws0, "", wb)
	// The server's output says it ran elsewhere: its binary is not the
	// server's; workspaces[1]'s names none.
	setBinary("server", strings.Repeat("f", 64), wb)
	setBinary("workspaces[1]", "", nil)
	rep := Evaluate(f.src, f.observed())
	fp := rep.Fingerprint
	if fp.Runtime.KernelVersion != "6.1.0-fingerprint" || fp.Runtime.Version == "" || fp.Runtime.ID == "" || !fp.Runtime.Rootless {
		t.Errorf("runtime %+v", fp.Runtime)
	}
	by := map[string]ContainerFingerprint{}
	for _, c := range fp.Containers {
		by[c.Subject] = c
	}
	w, s, w1 := by[ws0], by["server"], by["workspaces[1]"]
	if w.ImageID == "" || w.ImageID != f.observed().Runtime.Containers[f.id(t, ws0)].Image || w.ConfigDigest != w.ImageID {
		t.Errorf("%s: image %q, config %q", ws0, w.ImageID, w.ConfigDigest)
	}
	if w.Seccomp != "unconfined" || s.Seccomp != "runtime default" || !strings.HasPrefix(w1.Seccomp, "sha256:") {
		t.Errorf("seccomp: %s %q, server %q, workspaces[1] %q", ws0, w.Seccomp, s.Seccomp, w1.Seccomp)
	}
	if m := w.Limits.Memory; m.Requested == 0 || m.Recorded != m.Requested || !m.Enforced {
		t.Errorf("%s memory %+v, want requested, recorded and enforced", ws0, m)
	}
	if p := w.Limits.Pids; p.Requested == 0 || p.Enforced {
		t.Errorf("%s pids %+v, want requested and not enforced (the daemon does not enforce pids)", ws0, p)
	}
	if w.Workbench == nil || w.Workbench.Digest != wb["digest"] || w.Workbench.Version != "v9.9.9" {
		t.Errorf("%s workbench %+v", ws0, w.Workbench)
	}
	if s.Workbench != nil || w1.Workbench != nil {
		t.Errorf("a workbench from output of another container, or of none: server %+v, workspaces[1] %+v", s.Workbench, w1.Workbench)
	}
}

// TestFingerprintRequested: a spec naming two tags the bring-up pinned
// to one image records both, in order, in every report (a map's order
// made it one or the other: two records of one campaign differed).
func TestFingerprintRequested(t *testing.T) {
	f := loadFixture(t, "internal")
	id := f.exp.Containers[0].Image
	f.exp.Plan.Images = map[string]string{"example/b:1": id, "example/a:1": id}
	obs := f.observed()
	for range 20 {
		r := &Report{}
		fp := fingerprint(r, f.exp, obs, map[string]*container{})
		if got := fp.Containers[0].Requested; got != "example/a:1 example/b:1" {
			t.Fatalf("requested %q, want both tags in order", got)
		}
	}
}
