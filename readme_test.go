package agentpen_test

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The markers in .ci/run around the README's commands.
const (
	ciBegin = "# >>> the README's quick start"
	ciEnd   = "# <<< the README's quick start"
)

// TestCIRunsTheREADME fails when .ci/run does not run the README's quick
// start as the README writes it: the commands of the ```sh blocks of its
// "Quick start" section, verbatim and in order, first of all CI's steps.
func TestCIRunsTheREADME(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	ci, err := os.ReadFile(".ci/run")
	if err != nil {
		t.Fatal(err)
	}
	if err := ciMatchesREADME(string(readme), string(ci)); err != nil {
		t.Error(err)
	}
}

// TestCIMatchesREADMEFails: the comparison catches each way the two drift.
func TestCIMatchesREADMEFails(t *testing.T) {
	readme := "# x\n\n## Quick start\n\ntext\n\n```sh\nscripts/deps.sh && make run\n```\n\nmore\n\n```sh\nscripts/deps.sh && make test\n```\n\n## Next\n\n```sh\nmake bench\n```\n"
	ci := "#!/usr/bin/env bash\nset -euo pipefail\n" + ciBegin + "\nstep 'scripts/deps.sh && make run'\nstep 'scripts/deps.sh && make test'\n" + ciEnd + "\nstep 'make hostile'\n"
	if err := ciMatchesREADME(readme, ci); err != nil {
		t.Fatalf("the matching pair: %v", err)
	}
	for _, tt := range []struct{ name, readme, ci string }{
		{"readme_command_changed", strings.Replace(readme, "make run", "make demo", 1), ci},
		{"ci_command_changed", readme, strings.Replace(ci, "'scripts/deps.sh && make test'", "'make test'", 1)},
		{"ci_lacks_one", readme, strings.Replace(ci, "step 'scripts/deps.sh && make run'\n", "", 1)},
		{"ci_reordered", readme, strings.Replace(strings.Replace(ci, "make run'", "make X'", 1), "make test'", "make run'", 1)},
		{"ci_extra_inside", readme, strings.Replace(ci, ciEnd, "step 'make lint'\n"+ciEnd, 1)},
		{"ci_runs_something_first", readme, strings.Replace(ci, ciBegin, "make clean\n"+ciBegin, 1)},
		{"ci_not_a_step", readme, strings.Replace(ci, "step 'scripts/deps.sh && make test'", "scripts/deps.sh && make test", 1)},
		{"ci_no_markers", readme, strings.Replace(ci, ciEnd, "", 1)},
		{"readme_extra_block", strings.Replace(readme, "## Next", "```sh\nmake images\n```\n\n## Next", 1), ci},
		{"readme_no_quick_start", strings.Replace(readme, "## Quick start", "## Start", 1), ci},
	} {
		if err := ciMatchesREADME(tt.readme, tt.ci); err == nil {
			t.Errorf("%s: no difference found", tt.name)
		}
	}
}

// ciMatchesREADME compares the README's quick-start commands with the
// steps between .ci/run's markers; before the first marker .ci/run may
// only set up (comments, set, cd, variables, sourcing, checks that die).
func ciMatchesREADME(readme, ci string) error {
	want, err := quickStart(readme)
	if err != nil {
		return err
	}
	lines := strings.Split(ci, "\n")
	begin, end := slices.Index(lines, ciBegin), slices.Index(lines, ciEnd)
	if begin < 0 || end < begin {
		return fmt.Errorf(".ci/run: the markers %q and %q are missing", ciBegin, ciEnd)
	}
	for _, l := range lines[:begin] {
		if strings.HasPrefix(strings.TrimSpace(l), "step ") || runsMake.MatchString(l) {
			return fmt.Errorf(".ci/run runs %q before the README's commands", l)
		}
	}
	var got []string
	for _, l := range lines[begin+1 : end] {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		m := ciStep.FindStringSubmatch(l)
		if m == nil {
			return fmt.Errorf(".ci/run: %q between the markers is not a step 'COMMAND'", l)
		}
		got = append(got, m[1])
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf(".ci/run runs %q between its markers; the README's quick start says %q", got, want)
	}
	return nil
}

var (
	ciStep   = regexp.MustCompile(`^step '([^']+)'$`)
	runsMake = regexp.MustCompile(`(^|[;&|]\s*)(make|scripts/\S+|go)\s`)
	shBlock  = regexp.MustCompile("(?ms)^```sh\n(.*?)^```$")
)

// quickStart returns the commands of the ```sh blocks in the README's
// "## Quick start" section, one per line.
func quickStart(readme string) ([]string, error) {
	_, sec, ok := strings.Cut(readme, "\n## Quick start")
	if !ok {
		return nil, fmt.Errorf("README.md has no ## Quick start section")
	}
	if i := strings.Index(sec, "\n## "); i >= 0 {
		sec = sec[:i]
	}
	var cmds []string
	for _, m := range shBlock.FindAllStringSubmatch(sec, -1) {
		for _, l := range strings.Split(strings.TrimSpace(m[1]), "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				cmds = append(cmds, l)
			}
		}
	}
	if len(cmds) == 0 {
		return nil, fmt.Errorf("README.md's quick start has no ```sh block")
	}
	return cmds, nil
}
