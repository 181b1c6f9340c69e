package attest

import (
	"slices"
	"testing"

	"github.com/agentpen/agentpen/attest/evidence"
)

// TestClusterPodArgsArePlanned: a workspace pod whose spec gives the
// workbench other arguments than the plan (here the sandbox turned off)
// is not ok, even when its PID 1 runs exactly those arguments. The
// cluster's process check compares PID 1 with the pod's spec as the API
// server answers it, and nothing compares that spec with the plan (a
// Docker container's .command row does), so the check is circular.
// (Review of 10b6496.)
func TestClusterPodArgsArePlanned(t *testing.T) {
	f := loadFixture(t, clusterFixture)
	var args []string
	f.pod(t, ws0, func(c *evidence.Container) {
		c.Cmd = append(slices.Clone(c.Cmd), "--sandbox", "unsandboxed")
		args = c.Cmd
	})
	f.obs.ProbeEnv.ArgvSuffix[ws0] = len(args)
	f.probe(t, PhaseMain, ws0, ws0+"/process/0", func(m map[string]any) {
		p := m["process"].(map[string]any)
		p["suffix_digest"], p["argc"] = argvDigest(args), len(args)+1
	})
	if rep := Evaluate(f.src, f.observed()); rep.OK {
		t.Fatalf("a workspace pod running unplanned arguments %q attests ok", args)
	}
}

// (Review of fabdeba.)
func TestCompareSameHidesFailedVerdict(t *testing.T) {
	good := loadFixture(t, "internal")
	a := Evaluate(good.src, good.observed())
	bad := loadFixture(t, "internal")
	bad.container(t, ws0, func(m map[string]any) { m["HostConfig"].(map[string]any)["Privileged"] = true })
	b := Evaluate(bad.src, bad.observed())
	if !a.OK || b.OK {
		t.Fatalf("fixtures: ok %v and %v; want true and false", a.OK, b.OK)
	}
	if c := Compare(a, b); c.Same {
		t.Fatalf("a passing attestation and one that failed (%v) compare the same", b.FailedChecks)
	}
}
