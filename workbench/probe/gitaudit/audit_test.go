package gitaudit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentpen/agentpen/internal/testkit/gittest"
	"github.com/agentpen/agentpen/internal/testkit/testenv"
)

// gitRepo is a repository made by the git on this machine, for the audit
// to read and for git to check it against.
type gitRepo struct {
	t   testing.TB
	dir string
	n   int // commits made, for distinct dates
}

// requireGit is git, or the test skips (fails in CI).
func requireGit(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("git")
	if err != nil {
		testenv.Unavailable(t, "git is not installed: "+err.Error())
	}
	return p
}

func newRepo(t testing.TB, args ...string) *gitRepo {
	t.Helper()
	requireGit(t)
	r := &gitRepo{t: t, dir: t.TempDir()}
	r.git(append([]string{"init", "-q", "-b", "main"}, args...)...)
	return r
}

// git runs git in the repository and returns its output, trimmed.
func (r *gitRepo) git(args ...string) string {
	r.t.Helper()
	return gittest.RunInput(r.t, r.dir, "", args...)
}

// commit writes file with content and commits it; it returns the commit.
func (r *gitRepo) commit(file, content string) string {
	r.t.Helper()
	r.n++
	p := filepath.Join(r.dir, file)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
	r.git("add", file)
	r.git("-c", "core.hooksPath=/dev/null", "commit", "-q", "-m", fmt.Sprintf("c%d %s", r.n, file), "--date", strconv.Itoa(1700000000+r.n)+" +0000")
	return r.git("rev-parse", "HEAD")
}

func (r *gitRepo) gitDir() string { return filepath.Join(r.dir, ".git") }

// audit audits the repository against base and fails the test on an
// error.
func (r *gitRepo) audit(base string) *Result {
	r.t.Helper()
	res, err := Audit(r.t.Context(), r.gitDir(), Options{Base: base, MaxLeaks: 1000})
	if err != nil {
		r.t.Fatalf("audit: %v", err)
	}
	return res
}

// leakNames are the leaks as "kind class name", sorted.
func leakNames(res *Result) []string {
	var out []string
	for _, l := range res.Leaks {
		out = append(out, l.Kind+" "+l.Class+" "+l.Name)
	}
	slices.Sort(out)
	return out
}

func hasLeak(res *Result, kind, class, name string) bool {
	return slices.ContainsFunc(res.Leaks, func(l Leak) bool {
		return l.Kind == kind && l.Class == class && (name == "" || l.Name == name)
	})
}

// base makes a small history: three commits on main, in two directories.
func (r *gitRepo) base() string {
	r.commit("src/median.py", "def median(xs):\n    return sorted(xs)[len(xs)//2]\n")
	r.commit("tests/test_median.py", "from src.median import median\n")
	return r.commit("README", "a task\n")
}

// TestCleanRepository: a repository at its base, loose or packed, with
// an annotated tag of an ancestor, has no leak, and the audit counts what
// git counts.
func TestCleanRepository(t *testing.T) {
	for _, packed := range []bool{false, true} {
		t.Run(fmt.Sprintf("packed=%v", packed), func(t *testing.T) {
			r := newRepo(t)
			first := r.commit("a.txt", "one\n")
			base := r.base()
			r.git("tag", "-a", "-m", "first release", "v0.1", first)
			if packed {
				r.git("gc", "-q", "--aggressive", "--prune=now")
			}
			for _, b := range []string{"", "HEAD", base, strings.ToUpper(base)} {
				res := r.audit(b)
				if res.LeakCount != 0 {
					t.Fatalf("base %q: leaks %v", b, leakNames(res))
				}
				if res.Base != base {
					t.Fatalf("base %q resolved to %s, want %s", b, res.Base, base)
				}
			}
			res := r.audit("")
			reach := strings.Count(r.git("rev-list", "--objects", base), "\n") + 1
			if res.Reachable != reach {
				t.Errorf("reachable %d, git rev-list --objects counts %d", res.Reachable, reach)
			}
			all := strings.Count(r.git("cat-file", "--batch-all-objects", "--batch-check"), "\n") + 1
			if res.Objects != all || res.Objects != res.Reachable+1 { // the tag object
				t.Errorf("objects %d, git counts %d, reachable %d (+1 tag)", res.Objects, all, res.Reachable)
			}
			if res.Ancestors != 4 || res.BaseFrom != "HEAD" || res.Refs < 3 {
				t.Errorf("ancestors %d, base from %s, refs %d", res.Ancestors, res.BaseFrom, res.Refs)
			}
		})
	}
}

// TestLeaks: each way a repository holds the fix past its base is found,
// loose and packed, and named.
func TestLeaks(t *testing.T) {
	const fix = "def median(xs):\n    s = sorted(xs)\n    n = len(s)\n    return (s[n//2-1] + s[n//2]) / 2 if n % 2 == 0 else s[n//2]\n"
	for _, tt := range []struct {
		name string
		// plant makes the leak after the base (HEAD is at the base); it
		// returns the fix commit's name, or "".
		plant func(t *testing.T, r *gitRepo, base string) string
		// want are leaks (kind, class, name) the audit must report.
		want [][3]string
	}{
		{"branch past the base", func(t *testing.T, r *gitRepo, base string) string {
			r.git("checkout", "-q", "-b", "fix")
			c := r.commit("src/median.py", fix)
			r.git("checkout", "-q", "main")
			return c
		}, [][3]string{{"ref", "branch", "refs/heads/fix"}, {"object", "commit", ""}, {"object", "blob", ""}}},
		{"main moved past the base", func(t *testing.T, r *gitRepo, base string) string {
			c := r.commit("src/median.py", fix)
			r.git("checkout", "-q", "--detach", base)
			return c
		}, [][3]string{{"ref", "branch", "refs/heads/main"}}},
		{"annotated tag of the fix", func(t *testing.T, r *gitRepo, base string) string {
			c := r.commit("src/median.py", fix)
			r.git("tag", "-a", "-m", "fixed", "v1.0", c)
			r.git("reset", "-q", "--hard", base)
			r.git("reflog", "expire", "--expire=now", "--all")
			return c
		}, [][3]string{{"ref", "tag", "refs/tags/v1.0"}, {"object", "tag", ""}}},
		{"reflog entry", func(t *testing.T, r *gitRepo, base string) string {
			c := r.commit("src/median.py", fix)
			r.git("reset", "-q", "--hard", base)
			return c
		}, [][3]string{{"reflog", "HEAD", ""}, {"reflog", "refs/heads/main", ""}, {"ref", "head", "ORIG_HEAD"}}},
		{"dangling commit", func(t *testing.T, r *gitRepo, base string) string {
			c := r.commit("src/median.py", fix)
			r.git("reset", "-q", "--hard", base)
			os.Remove(filepath.Join(r.gitDir(), "ORIG_HEAD"))
			r.git("reflog", "expire", "--expire=now", "--all")
			return c
		}, [][3]string{{"object", "commit", ""}, {"object", "tree", ""}, {"object", "blob", ""}}},
		{"stash", func(t *testing.T, r *gitRepo, base string) string {
			if err := os.WriteFile(filepath.Join(r.dir, "src/median.py"), []byte(fix), 0o644); err != nil {
				t.Fatal(err)
			}
			r.git("stash", "-q")
			return ""
		}, [][3]string{{"ref", "stash", "refs/stash"}, {"reflog", "refs/stash", ""}}},
		{"staged blob", func(t *testing.T, r *gitRepo, base string) string {
			if err := os.WriteFile(filepath.Join(r.dir, "src/median.py"), []byte(fix), 0o644); err != nil {
				t.Fatal(err)
			}
			r.git("add", "src/median.py")
			r.git("reset", "-q", "--hard", base)
			return ""
		}, [][3]string{{"object", "blob", ""}}},
		{"remote-tracking ref", func(t *testing.T, r *gitRepo, base string) string {
			up := &gitRepo{t: t, dir: filepath.Join(t.TempDir(), "up")}
			gittest.RunInput(t, r.dir, "", "clone", "-q", r.dir, up.dir)
			c := up.commit("src/median.py", fix)
			r.git("remote", "add", "origin", up.dir)
			r.git("fetch", "-q", "origin")
			return c
		}, [][3]string{{"ref", "remote", "refs/remotes/origin/main"}, {"object", "commit", ""}}},
		{"notes", func(t *testing.T, r *gitRepo, base string) string {
			r.git("notes", "add", "-m", "the fix is to average the middle two", base)
			return ""
		}, [][3]string{{"ref", "notes", "refs/notes/commits"}}},
		{"worktree past the base", func(t *testing.T, r *gitRepo, base string) string {
			wt := filepath.Join(t.TempDir(), "wt")
			r.git("worktree", "add", "-q", "-b", "wip", wt)
			gittest.RunInput(t, wt, "", "-c", "core.hooksPath=/dev/null", "commit", "-q", "--allow-empty", "-m", "wip")
			return ""
		}, [][3]string{{"ref", "head", "worktrees/wt/HEAD"}, {"ref", "branch", "refs/heads/wip"}}},
	} {
		for _, packed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/packed=%v", tt.name, packed), func(t *testing.T) {
				r := newRepo(t)
				base := r.base()
				fixID := tt.plant(t, r, base)
				if packed {
					// Every object into one pack, reachable or not, with
					// deltas (gc would expire the reflogs: their dates are
					// old).
					r.git("repack", "-q", "-a", "-d", "-f", "--keep-unreachable")
				}
				res := r.audit(base)
				if res.LeakCount == 0 {
					t.Fatalf("no leak found")
				}
				for _, w := range tt.want {
					if !hasLeak(res, w[0], w[1], w[2]) {
						t.Errorf("no leak %v among %v", w, leakNames(res))
					}
				}
				if fixID != "" && !slices.ContainsFunc(res.Leaks, func(l Leak) bool { return l.Object == fixID || l.Name == fixID }) {
					t.Errorf("the fix commit %s is named by no leak: %v", fixID, res.Leaks)
				}
				// git agrees on what the base does not reach.
				unreach := len(strings.Fields(r.git("cat-file", "--batch-all-objects", "--batch-check=%(objectname)"))) -
					len(strings.Split(r.git("rev-list", "--objects", base), "\n"))
				objs := 0
				for _, l := range res.Leaks {
					if l.Kind == "object" {
						objs++
					}
				}
				if objs != unreach {
					t.Errorf("%d objects leak, git finds %d the base does not reach", objs, unreach)
				}
			})
		}
	}
}

// TestHeadPastDeclaredBase: HEAD itself past the declared base is a leak;
// a branch behind it is not.
func TestHeadPastDeclaredBase(t *testing.T) {
	r := newRepo(t)
	first := r.commit("a", "1\n")
	base := r.commit("b", "2\n")
	r.git("branch", "old", first)
	r.commit("c", "3\n")
	res := r.audit(base)
	if !hasLeak(res, "ref", "head", "HEAD") || !hasLeak(res, "ref", "branch", "refs/heads/main") {
		t.Fatalf("HEAD past the base: %v", leakNames(res))
	}
	if hasLeak(res, "ref", "branch", "refs/heads/old") {
		t.Fatalf("a branch at an ancestor is a leak: %v", leakNames(res))
	}
}

// TestShallowClone: a shallow clone at its base has no leak, and says it
// is shallow.
func TestShallowClone(t *testing.T) {
	up := newRepo(t)
	up.base()
	dir := filepath.Join(t.TempDir(), "clone")
	gittest.RunInput(t, up.dir, "", "clone", "-q", "--depth", "1", "file://"+up.dir, dir)
	r := &gitRepo{t: t, dir: dir}
	r.git("remote", "remove", "origin")
	res := r.audit("")
	if res.LeakCount != 0 || !res.Shallow || res.Ancestors != 1 {
		t.Fatalf("shallow clone: leaks %v, shallow %v, ancestors %d", leakNames(res), res.Shallow, res.Ancestors)
	}
}

// TestAlternates: the objects of an alternate count; a commit there past
// the base is a leak.
func TestAlternates(t *testing.T) {
	up := newRepo(t)
	base := up.base()
	fix := up.commit("src/median.py", "fixed\n")
	dir := filepath.Join(t.TempDir(), "clone")
	gittest.RunInput(t, up.dir, "", "clone", "-q", "--shared", "--no-checkout", up.dir, dir)
	r := &gitRepo{t: t, dir: dir}
	r.git("update-ref", "refs/heads/main", base)
	r.git("remote", "remove", "origin")
	res := r.audit(base)
	if !slices.ContainsFunc(res.Leaks, func(l Leak) bool { return l.Kind == "object" && l.Name == fix }) {
		t.Fatalf("the fix in the alternate is no leak: %v", leakNames(res))
	}
}

// TestUnsupported: what this reader does not know fails, never passes.
func TestUnsupported(t *testing.T) {
	r := newRepo(t, "--object-format=sha256")
	r.commit("a", "1\n")
	if _, err := Audit(t.Context(), r.gitDir(), Options{}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("a sha256 repository: %v, want ErrUnsupported", err)
	}
	r = newRepo(t)
	r.commit("a", "1\n")
	if err := os.WriteFile(filepath.Join(r.gitDir(), "info", "grafts"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Audit(t.Context(), r.gitDir(), Options{}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("grafts: %v, want ErrUnsupported", err)
	}
}

// TestMissingBase: a declared base the repository does not hold is an
// error, not a clean verdict.
func TestMissingBase(t *testing.T) {
	r := newRepo(t)
	r.base()
	if _, err := Audit(t.Context(), r.gitDir(), Options{Base: strings.Repeat("ab", 20)}); !errors.Is(err, ErrMissing) {
		t.Fatalf("a missing base: %v, want ErrMissing", err)
	}
}

// TestTracked: the base tree's patch files are listed, so a patch the
// task ships is not taken for a leak.
func TestTracked(t *testing.T) {
	r := newRepo(t)
	r.commit("debian/patches/01-fix.patch", "--- a\n+++ b\n")
	base := r.commit("src/x.py", "x\n")
	res, err := Audit(t.Context(), r.gitDir(), Options{Base: base, TrackedSuffixes: []string{".patch", ".orig"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Tracked, []string{"debian/patches/01-fix.patch"}) {
		t.Fatalf("tracked %v", res.Tracked)
	}
}

// TestStateKey: the key changes when a ref moves or an object is added,
// and not when nothing does.
func TestStateKey(t *testing.T) {
	r := newRepo(t)
	base := r.base()
	k1, err := StateKey(r.gitDir(), "uid 1000")
	if err != nil {
		t.Fatal(err)
	}
	if k2, _ := StateKey(r.gitDir(), "uid 1000"); k2 != k1 {
		t.Fatalf("the same repository has two keys")
	}
	if k2, _ := StateKey(r.gitDir(), "uid 1001"); k2 == k1 {
		t.Fatalf("another user, the same key")
	}
	r.git("branch", "other", base)
	if k2, _ := StateKey(r.gitDir(), "uid 1000"); k2 == k1 {
		t.Fatalf("a new branch, the same key")
	}
}

// TestHiddenOutsideObjects: what git keeps beside its object database
// holds the fix too: a pack without its index (git index-pack rebuilds
// one), the files of `git fsck --lost-found`; each is a leak. A
// submodule's repository (modules/) is another repository: refused,
// not passed.
func TestHiddenOutsideObjects(t *testing.T) {
	t.Run("pack without index", func(t *testing.T) {
		r := newRepo(t)
		base := r.base()
		r.commit("src/median.py", "fixed\n")
		r.git("reset", "-q", "--hard", base)
		r.git("reflog", "expire", "--expire=now", "--all")
		os.Remove(filepath.Join(r.gitDir(), "ORIG_HEAD"))
		r.git("repack", "-q", "-a", "-d", "--keep-unreachable")
		packs, _ := filepath.Glob(filepath.Join(r.gitDir(), "objects", "pack", "*.idx"))
		if len(packs) != 1 {
			t.Fatalf("packs %v", packs)
		}
		// Every object loose again (unpacked from the pack moved aside),
		// and the pack back without its index.
		pk := strings.TrimSuffix(packs[0], ".idx") + ".pack"
		data, err := os.ReadFile(pk)
		if err != nil {
			t.Fatal(err)
		}
		os.Remove(packs[0])
		os.Remove(pk)
		gittest.RunInput(t, r.dir, string(data), "unpack-objects", "-q")
		r.git("prune", "--expire=now") // the fix now only in the pack
		if err := os.WriteFile(pk, data, 0o444); err != nil {
			t.Fatal(err)
		}
		res := r.audit(base)
		if !hasLeak(res, "file", "pack", "objects/pack/"+filepath.Base(pk)) || res.LeakCount != 1 {
			t.Fatalf("a pack without its index is no leak: %v", leakNames(res))
		}
	})
	t.Run("lost-found", func(t *testing.T) {
		r := newRepo(t)
		base := r.base()
		if err := os.WriteFile(filepath.Join(r.dir, "src/median.py"), []byte("fixed\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r.git("add", "src/median.py")
		r.git("reset", "-q", "--hard", base)
		r.git("fsck", "--lost-found")
		r.git("prune", "--expire=now")
		res := r.audit(base)
		if !hasLeak(res, "file", "lost-found", "") {
			t.Fatalf("lost-found is no leak: %v", leakNames(res))
		}
	})
	t.Run("submodule repository", func(t *testing.T) {
		r := newRepo(t)
		r.base()
		if err := os.MkdirAll(filepath.Join(r.gitDir(), "modules", "lib", "objects"), 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := Audit(t.Context(), r.gitDir(), Options{}); !errors.Is(err, ErrUnsupported) {
			t.Fatalf("a submodule's repository: %v, want ErrUnsupported", err)
		}
	})
}

// TestAuditCutShort: an audit whose ctx ends gives no verdict: its error
// names the repository and wraps the ctx's cause.
func TestAuditCutShort(t *testing.T) {
	r := newRepo(t)
	r.commit("a.txt", "a\n")
	bound := errors.New("the audit's bound passed")
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(bound)
	res, err := Audit(ctx, r.gitDir(), Options{})
	if !errors.Is(err, bound) || !strings.Contains(err.Error(), r.gitDir()) {
		t.Fatalf("audit of a cut ctx: %+v, %v; want an error naming %s and wrapping %q", res, err, r.gitDir(), bound)
	}
}

// TestStateKeyCtime: a change that keeps every file's mode, size and
// mtime (a chmod undone; a ref rewritten by a rename over it, its time
// and its directory's put back) still changes the key: the inode's
// change time is in it, and no call sets that back.
func TestStateKeyCtime(t *testing.T) {
	r := newRepo(t)
	base := r.base()
	ref := filepath.Join(r.gitDir(), "refs", "heads", "main")
	ctime := func(p string) int64 {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		return st.Ctim.Nano()
	}
	// again does op until p's change time moved (the kernel's clock for
	// it is coarse).
	again := func(p string, op func()) {
		before := ctime(p)
		for range 1000 {
			op()
			if ctime(p) != before {
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
		t.Fatalf("%s: its change time never moved", p)
	}
	k1, err := StateKey(r.gitDir(), "uid 1000")
	if err != nil {
		t.Fatal(err)
	}
	again(ref, func() {
		os.Chmod(ref, 0o600)
		os.Chmod(ref, 0o644)
	})
	k2, err := StateKey(r.gitDir(), "uid 1000")
	if err != nil || k2 == k1 {
		t.Fatalf("a chmod undone: key %s, %v; want another than %s", k2, err, k1)
	}

	other := r.commit("b.txt", "b\n")
	r.git("update-ref", "refs/heads/main", base)
	dir := filepath.Dir(ref)
	st, err := os.Stat(ref)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	k3, err := StateKey(r.gitDir(), "uid 1000")
	if err != nil {
		t.Fatal(err)
	}
	again(ref, func() {
		tmp := filepath.Join(dir, "tmp")
		if err := os.WriteFile(tmp, []byte(other+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(tmp, st.ModTime(), st.ModTime())
		if err := os.Rename(tmp, ref); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(dir, dst.ModTime(), dst.ModTime())
	})
	if st2, _ := os.Stat(ref); st2.ModTime() != st.ModTime() || st2.Size() != st.Size() || st2.Mode() != st.Mode() {
		t.Fatalf("the rewrite changed the ref's description: %v, was %v", st2, st)
	}
	k4, err := StateKey(r.gitDir(), "uid 1000")
	if err != nil || k4 == k3 {
		t.Fatalf("a ref rewritten to the same size and time: key %s, %v; want another than %s", k4, err, k3)
	}
}
