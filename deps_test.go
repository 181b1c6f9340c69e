package agentpen_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/internal/testkit/deptest"
	"github.com/agentpen/agentpen/workbench/sandbox"
)

const module = "github.com/agentpen/agentpen"

// dockerSDK are the Docker client's module paths.
var dockerSDK = []string{"github.com/docker/", "github.com/moby/"}

// purePackages hold the campaign model and the pure deciders: observations
// in, reports out. They never talk to Docker, the network or a subprocess,
// not even through a dependency.
var purePackages = []string{
	module + "/apikey",
	module + "/attest",
	module + "/campaign",
	module + "/cleanup",
	module + "/events",
	module + "/workbench/tasks",
}

// impure is what a pure package must never depend on.
var impure = append([]string{"net", "net/http", "os/exec"}, dockerSDK...)

// TestPurePackages fails when a pure package depends, directly or not, on
// the Docker SDK, net, net/http or os/exec (test files excepted).
func TestPurePackages(t *testing.T) {
	for _, p := range deptest.List(t, purePackages...) {
		for _, dep := range append(p.Imports, p.Deps...) {
			if deptest.Matches(dep, impure) {
				t.Errorf("%s depends on %s; it must stay pure (observations in, reports out)", p.ImportPath, dep)
			}
		}
	}
}

// TestCampaignStandardLibrary: the campaign model uses the standard
// library, for image references the registry's own grammar, and the
// environment variable names' rule (internal/envname, which imports
// nothing) only.
func TestCampaignStandardLibrary(t *testing.T) {
	allowed := []string{"github.com/distribution/reference", "github.com/opencontainers/go-digest", module + "/internal/envname"}
	for _, p := range deptest.List(t, module+"/campaign") {
		for _, dep := range p.Deps {
			first, _, _ := strings.Cut(dep, "/")
			if strings.Contains(first, ".") && !deptest.Matches(dep, allowed) {
				t.Errorf("campaign depends on %s; it uses the standard library and %v only", dep, allowed)
			}
		}
	}
}

// TestWorkbenchWithoutCampaign: the workbench binary does not depend on
// the campaign model (nor on the registry's grammar it brings): their
// start-up cost the idle server about 1.1 MiB of its RSS (issue 40).
func TestWorkbenchWithoutCampaign(t *testing.T) {
	never := []string{module + "/campaign", "github.com/distribution/", "github.com/opencontainers/"}
	for _, p := range deptest.List(t, module+"/cmd/workbench") {
		for _, dep := range append(p.Imports, p.Deps...) {
			if deptest.Matches(dep, never) {
				t.Errorf("cmd/workbench depends on %s", dep)
			}
		}
	}
}

// TestProbeWireStandardLibrary: the probe batch's JSON, which the pure
// attest package and the workbench's probe share, imports the standard
// library alone, and both sides import it.
func TestProbeWireStandardLibrary(t *testing.T) {
	wire := module + "/workbench/probe/wire"
	for _, p := range deptest.List(t, wire) {
		for _, dep := range p.Deps {
			if first, _, _ := strings.Cut(dep, "/"); strings.Contains(first, ".") {
				t.Errorf("probe/wire depends on %s; it uses the standard library only", dep)
			}
		}
	}
	for _, p := range deptest.List(t, module+"/attest", module+"/workbench/probe") {
		if !slices.Contains(p.Imports, wire) {
			t.Errorf("%s does not import %s: the batch's JSON has one definition", p.ImportPath, wire)
		}
	}
}

// dockerDriver is the one package that talks to Docker (and the decoder
// of the daemon's JSON beside it).
const dockerDriver = module + "/adapter/docker"

// TestOnlyAdapterTalksToDocker (its Docker driver) fails when a package outside
// adapter/docker/... imports the Docker SDK, in its code or its tests
// (tests elsewhere use the driver's exported calls or
// internal/testkit/dockerfake).
func TestOnlyAdapterTalksToDocker(t *testing.T) {
	pkgs := deptest.List(t, "./...")
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages; the rule would check nothing", len(pkgs))
	}
	sdk := 0
	for _, p := range pkgs {
		if p.ImportPath == dockerDriver || strings.HasPrefix(p.ImportPath, dockerDriver+"/") {
			if slices.ContainsFunc(p.Imports, func(imp string) bool { return deptest.Matches(imp, dockerSDK) }) {
				sdk++
			}
			continue
		}
		for _, imp := range append(append(p.Imports, p.TestImports...), p.XTestImports...) {
			if deptest.Matches(imp, dockerSDK) {
				t.Errorf("%s imports %s; only %s may talk to Docker", p.ImportPath, imp, dockerDriver)
			}
		}
	}
	if sdk == 0 {
		t.Fatalf("%s imports no Docker SDK package: the rule checks nothing", dockerDriver)
	}
}

// runtimeSDKs are every runtime's client packages: Docker's (with the
// error kinds of its containerd lineage) and Kubernetes'.
var runtimeSDKs = append([]string{"github.com/containerd/", "k8s.io/", "sigs.k8s.io/"}, dockerSDK...)

// TestEngineIsRuntimeNeutral: the engine (package adapter), the driver
// contract (adapter/driver) and the conformance suite (adapter/drivertest)
// depend on no runtime's SDK and no HTTP server framework, not even
// through a dependency: a runtime is a driver behind adapter/driver.
func TestEngineIsRuntimeNeutral(t *testing.T) {
	never := append(slices.Clone(runtimeSDKs), "github.com/danielgtaylor/huma", "github.com/go-chi/", "github.com/prometheus/", module+"/launcher")
	pkgs := deptest.List(t, module+"/adapter", module+"/adapter/driver", module+"/adapter/drivertest")
	if len(pkgs) != 3 {
		t.Fatalf("go list found %d packages of the engine", len(pkgs))
	}
	for _, p := range pkgs {
		for _, dep := range append(p.Imports, p.Deps...) {
			if deptest.Matches(dep, never) {
				t.Errorf("%s depends on %s; the engine and the driver contract are runtime-neutral", p.ImportPath, dep)
			}
		}
	}
	for _, p := range deptest.List(t, dockerDriver) {
		if slices.Contains(p.Deps, module+"/adapter") {
			t.Errorf("%s depends on the engine; a driver implements adapter/driver and never imports adapter", p.ImportPath)
		}
	}
}

// TestClientStandsAlone: the launcher API's Go client depends on no
// runtime, no HTTP server framework or metrics package and neither the
// service nor the engine: the API's types are package api's.
func TestClientStandsAlone(t *testing.T) {
	never := append(slices.Clone(runtimeSDKs), "github.com/danielgtaylor/huma", "github.com/go-chi/", "github.com/prometheus/",
		module+"/launcher", module+"/adapter")
	pkgs := deptest.List(t, module+"/launcher/client", module+"/api")
	if len(pkgs) != 2 {
		t.Fatalf("go list found %d packages", len(pkgs))
	}
	for _, p := range pkgs {
		for _, dep := range append(p.Imports, p.Deps...) {
			if dep != p.ImportPath && deptest.Matches(dep, never) {
				t.Errorf("%s depends on %s", p.ImportPath, dep)
			}
		}
		if p.ImportPath == module+"/api" {
			for _, dep := range p.Deps {
				if first, _, _ := strings.Cut(dep, "/"); strings.Contains(first, ".") {
					t.Errorf("api depends on %s; it holds types of the standard library's only", dep)
				}
			}
		}
	}
}

// testkit holds the test-only packages (fakes, oracles, test helpers).
const testkit = module + "/internal/testkit/"

// TestTestkitOnlyInTests fails when code that ships (any package outside
// internal/testkit/, test files excepted) depends on a test-only package,
// directly or not.
func TestTestkitOnlyInTests(t *testing.T) {
	pkgs := deptest.List(t, "./...")
	kit := 0
	for _, p := range pkgs {
		if strings.HasPrefix(p.ImportPath, testkit) {
			kit++
			continue
		}
		for _, dep := range p.Deps {
			if strings.HasPrefix(dep, testkit) {
				t.Errorf("%s depends on %s; internal/testkit/ is for tests only", p.ImportPath, dep)
			}
		}
	}
	if kit == 0 || kit == len(pkgs) {
		t.Fatalf("go list found %d testkit packages of %d; the rule would check nothing", kit, len(pkgs))
	}
}

func TestMatches(t *testing.T) {
	for _, tt := range []struct {
		path string
		want bool
	}{
		{"net", true}, {"net/http", true}, {"net/netip", false}, {"os/exec", true}, {"os", false},
		{"github.com/docker/docker/client", true}, {"github.com/moby/moby/client", true},
		{"github.com/dockerx/y", false}, {"github.com/containerd/errdefs", false},
	} {
		if got := deptest.Matches(tt.path, impure); got != tt.want {
			t.Errorf("Matches(%q) = %v, want %v", tt.path, got, tt.want)
		}
	}
}

// TestUIDSpaceAgrees: the daemon-wide uid space the campaign model hands
// blocks out of is the one the workbench's sandbox treats as episode
// code's, and a block is a valid sandbox range.
func TestUIDSpaceAgrees(t *testing.T) {
	end := campaign.UIDBlockFirst + campaign.UIDBlocks*campaign.UIDBlockSize
	if campaign.UIDBlockFirst != sandbox.SpaceFirst || end > sandbox.SpaceLimit || end > campaign.UIDBlockLimit {
		t.Fatalf("campaign blocks %d..%d, sandbox space %d..%d", campaign.UIDBlockFirst, end-1, sandbox.SpaceFirst, sandbox.SpaceLimit-1)
	}
	for _, i := range []int{0, campaign.UIDBlocks - 1} {
		base := campaign.UIDBlockFirst + i*campaign.UIDBlockSize
		env := map[string]string{}
		p := &campaign.Plan{Agents: []campaign.AgentPlan{{Env: env, Labels: map[string]string{}}}}
		p.SetUIDBlock(0, base)
		r, err := sandbox.RangeFromEnv(func(k string) string { return env[k] })
		if err != nil || r.Base != base || r.Count != campaign.UIDBlockSize || r.String() != campaign.UIDBlockLabel(base) {
			t.Fatalf("block %d: sandbox reads %v, %v from %v", i, r, err, env)
		}
	}
}

// TestLauncherGoesThroughAdapter: the launcher API reaches Docker only
// through package adapter: neither its code nor its tests import the
// Docker SDK.
func TestLauncherGoesThroughAdapter(t *testing.T) {
	pkgs := deptest.List(t, module+"/launcher")
	if len(pkgs) != 1 {
		t.Fatalf("go list found %d packages for launcher", len(pkgs))
	}
	p := pkgs[0]
	for _, imp := range append(append(p.Imports, p.TestImports...), p.XTestImports...) {
		if deptest.Matches(imp, dockerSDK) {
			t.Errorf("%s imports %s; it must go through package adapter", p.ImportPath, imp)
		}
	}
	if !slices.Contains(p.Imports, module+"/adapter") {
		t.Errorf("%s does not import package adapter; the rule checks nothing", p.ImportPath)
	}
}

// httpStack is the launcher and the HTTP frameworks it is built on.
var httpStack = []string{module + "/launcher", "github.com/danielgtaylor/huma", "github.com/go-chi/", "github.com/coder/websocket", "github.com/prometheus/", "net/http"}

// TestValidationNeedsNoHTTP: the one validation of a spec (campaign.Validate,
// with the workbench catalogue) and the store depend on neither the
// launcher nor an HTTP framework: agentpen up and spec check validate
// without the service (they used to import it to validate).
func TestValidationNeedsNoHTTP(t *testing.T) {
	for _, p := range deptest.List(t, module+"/campaign", module+"/workbench/tasks", module+"/store") {
		for _, dep := range append(p.Imports, p.Deps...) {
			if deptest.Matches(dep, httpStack) {
				t.Errorf("%s depends on %s; validating a spec and keeping state need no HTTP stack", p.ImportPath, dep)
			}
		}
	}
}

// TestCustodyStandsAlone: signing and verifying reports (package custody,
// behind agentpen verify, key and report schema) need neither the
// launcher nor an HTTP framework, nor Docker or a subprocess: an auditor
// verifies a copied campaign without any of them.
func TestCustodyStandsAlone(t *testing.T) {
	never := append(append([]string{module + "/adapter"}, httpStack...), "os/exec")
	never = append(never, dockerSDK...)
	pkgs := deptest.List(t, module+"/custody")
	if len(pkgs) != 1 {
		t.Fatalf("go list found %d packages for custody", len(pkgs))
	}
	for _, dep := range append(pkgs[0].Imports, pkgs[0].Deps...) {
		if deptest.Matches(dep, never) {
			t.Errorf("custody depends on %s; verifying a report needs no service, HTTP stack, daemon or subprocess", dep)
		}
	}
}

// TestStoreBelowAdapter: the store keeps files only: it never talks to
// Docker, the network or a subprocess, and nothing it imports is above it.
func TestStoreBelowAdapter(t *testing.T) {
	above := append([]string{module + "/adapter", module + "/launcher", module + "/cmd/"}, impure...)
	for _, p := range deptest.List(t, module+"/store") {
		for _, dep := range append(p.Imports, p.Deps...) {
			if deptest.Matches(dep, above) {
				t.Errorf("store depends on %s", dep)
			}
		}
	}
}
