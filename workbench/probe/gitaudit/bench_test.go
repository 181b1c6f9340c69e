package gitaudit

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/internal/testkit/gittest"
	"github.com/agentpen/agentpen/internal/testkit/testlatency"
)

// benchCommits is the size of the benchmark's repository: issue 44's
// "a repository of 10,000 commits".
const benchCommits = 10000

// benchRepo makes a repository of n commits, each changing one of 200
// files in 10 directories, in one pack with deltas (as a clone has it),
// with a branch at its HEAD and a reflog; it returns its git directory
// and HEAD.
func benchRepo(b *testing.B, n int) (string, string) {
	b.Helper()
	requireGit(b)
	dir := filepath.Join(b.TempDir(), "repo")
	gittest.RunInput(b, b.TempDir(), "", "init", "-q", "-b", "main", dir)
	var s strings.Builder
	for i := range n {
		fmt.Fprintf(&s, "commit refs/heads/main\nmark :%d\ncommitter a <a@example.invalid> %d +0000\ndata 12\ncommit %05d\n", i+1, 1700000000+i, i)
		if i > 0 {
			fmt.Fprintf(&s, "from :%d\n", i)
		}
		body := fmt.Sprintf("def f%d():\n    return %d\n", i%200, i)
		fmt.Fprintf(&s, "M 100644 inline d%d/f%d.py\ndata %d\n%s\n", i%10, i%200, len(body), body)
	}
	gittest.RunInput(b, dir, s.String(), "fast-import", "--quiet")
	gittest.RunInput(b, dir, "", "repack", "-q", "-a", "-d", "-f", "--depth=50", "--window=10")
	head := gittest.RunInput(b, dir, "", "rev-parse", "HEAD")
	gittest.RunInput(b, dir, "", "update-ref", "-m", "bench", "refs/heads/main", head)
	return filepath.Join(dir, ".git"), head
}

// BenchmarkGitAudit: the audit of a repository of 10,000 commits against
// its HEAD (first-: every ref, reflog and object read, nothing cached),
// what a git probe does when the repository's state key is known (key-:
// finding the repository and its StateKey, a walk of the metadata), and,
// as the raw control, C git listing every object the history reaches
// (raw-first-: git rev-list --objects --all, a process of its own).
func BenchmarkGitAudit(b *testing.B) {
	gitDir, head := benchRepo(b, benchCommits)
	var first, key, raw testlatency.Samples
	for i := 0; i < b.N; i++ {
		first.Time(func() {
			res, err := Audit(b.Context(), gitDir, Options{Base: head})
			if err != nil || res.LeakCount != 0 || res.Ancestors != benchCommits {
				b.Fatalf("audit: %v (%+v)", err, res)
			}
		})
		key.Time(func() {
			repos, err := Find(filepath.Dir(gitDir), -1)
			if err != nil || len(repos) != 1 {
				b.Fatalf("find: %v %v", repos, err)
			}
			if _, err := StateKey(repos[0].GitDir, "base "+head, "uid 1000", "patches "); err != nil {
				b.Fatal(err)
			}
		})
		raw.Time(func() {
			cmd := exec.Command("git", "--git-dir", gitDir, "rev-list", "--objects", "--all")
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
		})
	}
	first.Report(b, "first-")
	key.Report(b, "key-")
	raw.Report(b, "raw-first-")
}
