package probe

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentpen/agentpen/internal/testkit/gittest"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

// repoAt makes a repository at dir with two commits and returns the
// second, its HEAD.
func repoAt(t *testing.T, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	gittest.Run(t, dir, "init", "-q", "-b", "main")
	for _, c := range []string{"one", "two"} {
		os.WriteFile(filepath.Join(dir, "f"), []byte(c+"\n"), 0o644)
		gittest.Run(t, dir, "add", "f")
		gittest.Run(t, dir, "commit", "-q", "-m", c)
	}
	return gittest.Run(t, dir, "rev-parse", "HEAD")
}

// TestAuditGit (root): a git probe audits every repository under its
// root as the uid it is given: clean, a leak named, what the uid cannot
// read (a pack: no verdict; a directory: not there for it), a declared
// repository missing.
func TestAuditGit(t *testing.T) {
	testenv.RequireRoot(t)
	if _, err := exec.LookPath("git"); err != nil {
		testenv.Unavailable(t, "git is not installed: "+err.Error())
	}
	const uid = 61234 // any uid but root's: nothing runs as it
	root, err := os.MkdirTemp("", "probe-git")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	os.Chmod(root, 0o755)
	clean := filepath.Join(root, "clean")
	cleanBase := repoAt(t, clean)
	leaky := filepath.Join(root, "leaky")
	leakyBase := repoAt(t, leaky)
	gittest.Run(t, leaky, "checkout", "-q", "-b", "fix")
	os.WriteFile(filepath.Join(leaky, "f"), []byte("the fix\n"), 0o644)
	gittest.Run(t, leaky, "commit", "-q", "-am", "fix")
	fix := gittest.Run(t, leaky, "rev-parse", "HEAD")
	gittest.Run(t, leaky, "checkout", "-q", "main")

	run := func(path string, bases map[string]string, as int) Outcome {
		t.Helper()
		res, err := RunBatch(t.Context(), Batch{Probes: []Request{{ID: "g", Kind: KindGit, Path: path, Bases: bases, As: as}}}, os.Getenv)
		if err != nil {
			t.Fatal(err)
		}
		return res.Results[0]
	}

	o := run(clean, map[string]string{clean: cleanBase}, uid)
	if o.Outcome != OutcomeClean || len(o.Git) != 1 || o.Git[0].BaseFrom != "declared" || o.Git[0].Ancestors != 2 || o.Git[0].Objects != 6 {
		t.Fatalf("clean: %s (%s) %+v", o.Outcome, o.Error, o.Git)
	}
	o = run(root, map[string]string{leaky: leakyBase}, uid)
	if o.Outcome != OutcomeLeak || len(o.Git) != 2 || o.Git[0].LeakCount != 0 || o.Git[1].Path != leaky ||
		!slices.ContainsFunc(o.Git[1].Leaks, func(l GitLeak) bool { return l.Kind == "ref" && l.Name == "refs/heads/fix" && l.Object == fix }) {
		t.Fatalf("leaky: %s (%s) %+v", o.Outcome, o.Error, o.Git)
	}
	if o := run(root, map[string]string{filepath.Join(root, "gone"): cleanBase}, uid); o.Outcome != OutcomeError || !strings.Contains(o.Error, "not there") {
		t.Fatalf("a declared repository missing: %s (%s)", o.Outcome, o.Error)
	}
	// A root that is not there holds no repository (a workbench image
	// has no /workspace), unless one is declared there.
	gone := filepath.Join(root, "gone")
	if o := run(gone, nil, uid); o.Outcome != OutcomeClean || len(o.Git) != 0 {
		t.Fatalf("no root: %s (%s) %+v", o.Outcome, o.Error, o.Git)
	}
	if o := run(gone, map[string]string{gone: cleanBase}, uid); o.Outcome != OutcomeError {
		t.Fatalf("no root, a repository declared there: %s (%s) %+v", o.Outcome, o.Error, o.Git)
	}

	// A known state key: the repository is not audited again; any change
	// to it (a new branch) is a new key, audited, and its leak found.
	o = run(clean, map[string]string{clean: cleanBase}, uid)
	key := o.Git[0].StateKey
	if !strings.HasPrefix(key, "sha256:") || o.Git[0].Cached {
		t.Fatalf("state key %q, cached %v", key, o.Git[0].Cached)
	}
	known := func(path, base string, known map[string]string) Outcome {
		t.Helper()
		res, err := RunBatch(t.Context(), Batch{Probes: []Request{{ID: "g", Kind: KindGit, Path: path, Bases: map[string]string{path: base}, GitKnown: known, As: uid}}}, os.Getenv)
		if err != nil {
			t.Fatal(err)
		}
		return res.Results[0]
	}
	if o := known(clean, cleanBase, map[string]string{clean: key}); o.Outcome != OutcomeClean || !o.Git[0].Cached || o.Git[0].Objects != 0 {
		t.Fatalf("a known key: %s %+v", o.Outcome, o.Git)
	}
	if o := known(clean, cleanBase, map[string]string{clean: "sha256:other"}); o.Git[0].Cached || o.Git[0].Objects == 0 {
		t.Fatalf("another key: %s %+v", o.Outcome, o.Git)
	}
	first := gittest.Run(t, clean, "rev-list", "--max-parents=0", "HEAD")
	if o := known(clean, first, map[string]string{clean: key}); o.Git[0].Cached || o.Outcome != OutcomeLeak {
		t.Fatalf("another base, the same files: %s %+v", o.Outcome, o.Git)
	}
	gittest.Run(t, clean, "branch", "later", cleanBase)
	gittest.Run(t, clean, "branch", "-D", "later")
	gittest.Run(t, clean, "checkout", "-q", "-b", "fix2")
	gittest.Run(t, clean, "commit", "-q", "--allow-empty", "-m", "past")
	gittest.Run(t, clean, "checkout", "-q", "main")
	if o := known(clean, cleanBase, map[string]string{clean: key}); o.Git[0].Cached || o.Outcome != OutcomeLeak {
		t.Fatalf("a branch since the key: %s %+v", o.Outcome, o.Git)
	}
	gittest.Run(t, clean, "branch", "-D", "fix2")
	gittest.Run(t, clean, "reflog", "expire", "--expire=now", "--all")
	gittest.Run(t, clean, "prune", "--expire=now")

	// What the uid cannot read: a pack is no verdict (root reads it, and
	// finds the repository clean); a directory hides its repository from
	// the uid (and from the agent), not from root.
	gittest.Run(t, clean, "gc", "-q")
	packs, _ := filepath.Glob(filepath.Join(clean, ".git", "objects", "pack", "*.pack"))
	if len(packs) != 1 {
		t.Fatalf("packs %v", packs)
	}
	os.Chmod(packs[0], 0o400)
	if o := run(clean, nil, uid); o.Outcome != OutcomeError || len(o.Git) != 1 || o.Git[0].Error == "" {
		t.Fatalf("an unreadable pack: %s (%s) %+v", o.Outcome, o.Error, o.Git)
	}
	if o := run(clean, nil, 0); o.Outcome != OutcomeClean {
		t.Fatalf("an unreadable pack, as root: %s (%s) %+v", o.Outcome, o.Error, o.Git)
	}
	os.Chmod(packs[0], 0o444)
	os.Chmod(leaky, 0o700)
	if o := run(root, nil, uid); o.Outcome != OutcomeClean || len(o.Git) != 1 {
		t.Fatalf("a repository the uid cannot reach: %s (%s) %+v", o.Outcome, o.Error, o.Git)
	}
	if o := run(root, nil, 0); o.Outcome != OutcomeLeak || len(o.Git) != 2 {
		t.Fatalf("a repository root reaches: %s (%s) %+v", o.Outcome, o.Error, o.Git)
	}
	// Unless the uid owns that directory: it may open it at will, so the
	// audit has no verdict rather than call it empty. It used to be
	// clean (found by a hostile review).
	os.Chown(leaky, uid, uid)
	os.Chmod(leaky, 0o000)
	if o := run(root, nil, uid); o.Outcome != OutcomeError || !strings.Contains(o.Error, "owns it") {
		t.Fatalf("a repository the uid hides from itself: %s (%s) %+v", o.Outcome, o.Error, o.Git)
	}
	os.Chown(leaky, 0, 0)
	os.Chmod(leaky, 0o755)

	for _, bad := range []Request{
		{ID: "rel", Kind: KindGit, Path: "workspace"},
		{ID: "base_outside", Kind: KindGit, Path: "/workspace", Bases: map[string]string{"/workspace2": cleanBase}},
		{ID: "base_short", Kind: KindGit, Path: "/workspace", Bases: map[string]string{"/workspace/a": "abc"}},
		{ID: "base_upper", Kind: KindGit, Path: "/workspace", Bases: map[string]string{"/workspace/a": strings.ToUpper(cleanBase)}},
		{ID: "bases_not_git", Kind: KindFile, Path: "/workspace", Bases: map[string]string{"/workspace": cleanBase}},
	} {
		if err := Validate(Batch{Probes: []Request{bad}}); err == nil {
			t.Errorf("%s: accepted", bad.ID)
		}
	}
}

// TestAuditGitCutShort: a git probe whose audit runs out of time gives
// no verdict, an error naming the repository it was auditing.
func TestAuditGitCutShort(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		testenv.Unavailable(t, "git is not installed: "+err.Error())
	}
	root := t.TempDir()
	repo := filepath.Join(root, "repo")
	repoAt(t, repo)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	outcome, msg, audits := AuditGit(ctx, root, nil, nil, 0, time.Second)
	if outcome != OutcomeError || !strings.Contains(msg, repo+": ") || !strings.Contains(msg, "cut short") || len(audits) != 1 || audits[0].Error == "" {
		t.Fatalf("a git probe out of time: %s %q %+v; want an error naming %s", outcome, msg, audits, repo)
	}
}
