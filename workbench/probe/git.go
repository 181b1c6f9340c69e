package probe

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentpen/agentpen/workbench/probe/gitaudit"
)

// AuditGit finds the git repositories under root and audits each against
// its declared base (bases, by repository path) or its HEAD, as the uid
// as (on a throwaway thread whose filesystem ids are the uid's: the audit
// reads what that uid reads; zero keeps root). The outcome is
// OutcomeClean (no repository, or none holding anything past its base),
// OutcomeLeak (at least one does: its audit names what) or OutcomeError
// (the root or a repository could not be read or audited, or a declared
// repository was not found: no verdict, which the attestation fails).
// A repository whose state key (its files as the filesystem describes
// them, the base, the uid and its patch files) is the one known names
// is not audited again: its audit says Cached. The audits are bounded by
// bound (GitAuditBound when shorter): one still running then is cut
// short, an error naming its repository.
func AuditGit(ctx context.Context, root string, bases, known map[string]string, as int, bound time.Duration) (outcome, msg string, audits []GitAudit) {
	bound = max(bound, GitAuditBound)
	ctx, cancel := context.WithTimeoutCause(ctx, bound, fmt.Errorf("the git audit's bound of %s passed", bound))
	defer cancel()
	run := func() {
		outcome, msg, audits = auditGit(ctx, root, bases, known, as)
	}
	if as <= 0 {
		run()
		return outcome, msg, audits
	}
	if err := asUID(as, run); err != nil {
		return OutcomeError, err.Error(), nil
	}
	return outcome, msg, audits
}

// GitAuditBound is the least time a git probe's audits are given (a
// repository of 10,000 commits takes about a second the first time): the
// probe's own timeout when longer. It is well inside the exec deadline
// the attestation gives a probe's batch (its timeout and 15 s), so an
// audit too slow fails naming its repository rather than as a batch
// with no answer.
const GitAuditBound = 10 * time.Second

func auditGit(ctx context.Context, root string, bases, known map[string]string, as int) (string, string, []GitAudit) {
	repos, err := gitaudit.Find(root, owner(as))
	if err != nil {
		return OutcomeError, "find repositories: " + err.Error(), nil
	}
	var audits []GitAudit
	var errs []string
	found := map[string]bool{}
	leak := false
	for _, r := range repos {
		found[r.Path] = true
		a := GitAudit{Path: r.Path}
		key, err := gitaudit.StateKey(r.GitDir, "base "+bases[r.Path], fmt.Sprint("uid ", as), "patches "+strings.Join(r.Patches, "\x00"))
		if err != nil {
			a.Error = "state key: " + err.Error()
			errs = append(errs, fmt.Sprintf("%s: state key: %v", r.Path, err))
			audits = append(audits, a)
			continue
		}
		a.StateKey = key
		if k, ok := known[r.Path]; ok && k == key {
			a.Cached = true
			audits = append(audits, a)
			continue
		}
		res, err := gitaudit.Audit(ctx, r.GitDir, gitaudit.Options{Base: bases[r.Path], Patches: r.Patches, Submodules: true})
		if err != nil {
			a.Error = err.Error()
			errs = append(errs, fmt.Sprintf("%s: %v", r.Path, err))
			audits = append(audits, a)
			continue
		}
		a.Base, a.BaseFrom = res.Base, res.BaseFrom
		a.Ancestors, a.Reachable, a.Objects = res.Ancestors, res.Reachable, res.Objects
		a.Refs, a.ReflogEntries, a.Shallow = res.Refs, res.ReflogEntries, res.Shallow
		a.LeakCount = res.LeakCount
		for _, l := range res.Leaks {
			a.Leaks = append(a.Leaks, GitLeak{Kind: l.Kind, Class: l.Class, Name: l.Name, Object: l.Object, Why: l.Why})
		}
		leak = leak || res.LeakCount > 0
		audits = append(audits, a)
	}
	for _, p := range sortedKeys(bases) {
		if !found[p] {
			errs = append(errs, fmt.Sprintf("%s: a declared repository that is not there", p))
		}
	}
	switch {
	case len(errs) > 0:
		return OutcomeError, strings.Join(errs, "; "), audits
	case leak:
		return OutcomeLeak, "", audits
	}
	return OutcomeClean, "", audits
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
