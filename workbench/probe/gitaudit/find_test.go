package gitaudit

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/gittest"
)

// TestFind: every repository of a tree is found (a work tree, a bare
// one, a linked worktree, a submodule checked out and one not), each
// once, with the patch files of its own work tree; each audits.
func TestFind(t *testing.T) {
	root := t.TempDir()
	mk := func(rel string) *gitRepo {
		r := &gitRepo{t: t, dir: filepath.Join(root, rel)}
		if err := os.MkdirAll(r.dir, 0o755); err != nil {
			t.Fatal(err)
		}
		r.git("init", "-q", "-b", "main")
		return r
	}
	lib := &gitRepo{t: t, dir: filepath.Join(t.TempDir(), "lib")}
	requireGit(t)
	gittest.RunInput(t, t.TempDir(), "", "init", "-q", "-b", "main", lib.dir)
	lib.commit("lib.py", "x = 1\n")

	a := mk("src/a")
	a.commit("fix.patch", "--- shipped with the task\n")
	a.commit("a.py", "a = 1\n")
	for _, f := range []string{"a.py.orig", "deep/b.rej"} {
		os.MkdirAll(filepath.Dir(filepath.Join(a.dir, f)), 0o755)
		if err := os.WriteFile(filepath.Join(a.dir, f), []byte("left over\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a.git("worktree", "add", "-q", "-b", "wt", filepath.Join(root, "wt"))
	b := mk("b")
	b.commit("b.py", "b = 1\n")
	b.git("-c", "protocol.file.allow=always", "submodule", "add", "-q", lib.dir, "sub")
	b.git("-c", "protocol.file.allow=always", "submodule", "add", "-q", lib.dir, "gone")
	b.git("-c", "core.hooksPath=/dev/null", "commit", "-q", "-m", "submodules")
	b.git("submodule", "deinit", "-q", "gone")
	b.git("prune", "--expire=now") // the first .gitmodules, replaced by the second add
	gittest.RunInput(t, root, "", "clone", "-q", "--bare", lib.dir, filepath.Join(root, "bare.git"))

	repos, err := Find(root, -1)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range repos {
		rel, _ := filepath.Rel(root, r.Path)
		g, _ := filepath.Rel(root, r.GitDir)
		got = append(got, fmt.Sprintf("%s %s %v", rel, g, r.Patches))
		res, err := Audit(t.Context(), r.GitDir, Options{Submodules: true, Patches: r.Patches})
		if err != nil {
			t.Errorf("audit %s: %v", rel, err)
			continue
		}
		leaks := leakNames(res)
		if rel == "src/a" {
			// The leftovers leak; the patch the base ships does not.
			if !slices.Equal(leaks, []string{"file patch a.py.orig", "file patch deep/b.rej"}) {
				t.Errorf("audit %s: leaks %v", rel, leaks)
			}
		} else if len(leaks) != 0 {
			t.Errorf("audit %s: leaks %v", rel, leaks)
		}
	}
	want := []string{
		"b b/.git []",
		"b/.git/modules/gone b/.git/modules/gone []",
		"b/sub b/.git/modules/sub []",
		"bare.git bare.git []",
		"src/a src/a/.git [a.py.orig deep/b.rej fix.patch]",
		"wt src/a/.git/worktrees/wt [fix.patch]",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("found\n%q\nwant\n%q", got, want)
	}
	if _, err := Audit(t.Context(), filepath.Join(root, "b", ".git"), Options{}); err == nil {
		t.Fatal("a repository with submodules audits without Submodules")
	}
}
