package attest

import (
	"cmp"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/adapter/docker/dockerjson"

	"github.com/agentpen/agentpen/attest/evidence"
	"github.com/agentpen/agentpen/campaign"
)

// catalogueScenarios are the evidence the catalogue test runs Evaluate
// on: between them they make the evaluator emit every check it can. A
// check that only some evidence makes (a failure path, a topology, an
// egress probe) gets a scenario here; a new check gets an entry in
// catalogue.go.
var catalogueScenarios = []struct {
	name    string
	fixture string
	edit    func(t *testing.T, f *fixture)
}{
	{"internal", "internal", nil},
	{"cluster", clusterFixture, nil},
	{"cluster_unplannable", clusterFixture, func(t *testing.T, f *fixture) { f.src.Spec = campaign.CampaignSpec{} }},
	{"cluster_egress_target", clusterFixture, func(t *testing.T, f *fixture) { f.obs.ProbeEnv.EgressTarget = "192.0.2.1:80" }},
	{"cluster_intents_without_labels", clusterFixture, func(t *testing.T, f *fixture) {
		for i := range f.src.Records {
			f.src.Records[i].Labels = nil
		}
	}},
	{"cluster_unread", clusterFixture, func(t *testing.T, f *fixture) {
		f.obs.Runtime.Daemon = evidence.Daemon{Answer: evidence.Answer{Err: "refused"}}
	}},
	{"cluster_own_command", clusterFixture, func(t *testing.T, f *fixture) {
		f.src.Spec.Workspaces[0].Command = []string{"run-agent"}
	}},
	{"nat", "nat", nil},
	{"no_info", "nat", func(t *testing.T, f *fixture) { f.raw.Info = dockerjson.Raw{Err: "the daemon did not answer"} }},
	{"unplannable", "nat", func(t *testing.T, f *fixture) { f.src.Spec = campaign.CampaignSpec{} }},
	{"intents_without_labels", "nat", func(t *testing.T, f *fixture) {
		for i := range f.src.Records {
			f.src.Records[i].Labels = nil
		}
	}},
}

// index and label are the parts of a check's name that vary by campaign.
var (
	index = regexp.MustCompile(`\[[0-9]+\]`)
	label = regexp.MustCompile(`\.label\..*$`)
)

// catalogueID is the catalogue's id of a check's name.
func catalogueID(name string) string {
	return label.ReplaceAllString(index.ReplaceAllString(name, "[i]"), ".label.<key>")
}

// TestCatalogueComplete: the catalogue lists exactly the checks the
// evaluator emits (by catalogueID), so agentpen checks and docs/checks.md
// describe every check a report can hold, and nothing else.
func TestCatalogueComplete(t *testing.T) {
	emitted := map[string]string{}           // id -> the first scenario emitting it
	runtimes := map[string]map[string]bool{} // id -> the runtimes of the scenarios emitting it
	for _, sc := range catalogueScenarios {
		f := loadFixture(t, sc.fixture)
		if sc.edit != nil {
			sc.edit(t, f)
		}
		rt := cmp.Or(f.src.Bringup.Driver, RuntimeDocker)
		rep := Evaluate(f.src, f.observed())
		for _, name := range append(slices.Collect(maps.Keys(rep.Checks())), rep.FailedChecks...) {
			if _, ok := emitted[catalogueID(name)]; !ok {
				emitted[catalogueID(name)] = sc.name
				runtimes[catalogueID(name)] = map[string]bool{}
			}
			runtimes[catalogueID(name)][rt] = true
		}
	}
	// Each entry names exactly the runtimes whose campaigns it is made on.
	for _, c := range Catalogue() {
		if got := slices.Sorted(maps.Keys(runtimes[c.ID])); len(got) > 0 && !slices.Equal(got, c.Runtimes) {
			t.Errorf("%s: the catalogue says it is made on %v, the scenarios make it on %v", c.ID, c.Runtimes, got)
		}
		if len(c.Runtimes) > 1 && c.OnCluster == "" {
			t.Errorf("%s: made on a cluster too, but the catalogue does not say from what there", c.ID)
		}
	}
	listed := map[string]bool{}
	for _, c := range Catalogue() {
		if listed[c.ID] {
			t.Errorf("the catalogue lists %s twice", c.ID)
		}
		listed[c.ID] = true
		if c.Section == "" || c.Proves == "" || c.Evidence == "" || c.CannotProve == "" {
			t.Errorf("%s: every entry says its section, what it proves, from which evidence, and what it cannot prove", c.ID)
		}
	}
	var missing, extra []string
	for _, id := range slices.Sorted(maps.Keys(emitted)) {
		if !listed[id] {
			missing = append(missing, fmt.Sprintf("%s (scenario %s)", id, emitted[id]))
		}
	}
	for _, c := range Catalogue() {
		if _, ok := emitted[c.ID]; !ok {
			extra = append(extra, c.ID)
		}
	}
	if len(missing) > 0 {
		t.Errorf("the evaluator emits checks the catalogue (attest/catalogue.go) does not list:\n  %s", strings.Join(missing, "\n  "))
	}
	if len(extra) > 0 {
		t.Errorf("the catalogue lists checks no scenario makes the evaluator emit (add a scenario to catalogueScenarios, or drop the entry):\n  %s", strings.Join(extra, "\n  "))
	}
}
