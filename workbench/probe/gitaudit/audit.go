// Package gitaudit finds what a git repository holds past a base commit:
// the ways an agent reads the answer from history instead of solving the
// task (a branch or tag at the fix, a remote-tracking ref, a stash, a
// reflog entry, a dangling commit or blob holding it). Audit reads the
// repository's .git itself, without git: its refs (loose, packed, the
// heads of the repository and its worktrees, an operation in progress),
// its reflogs, and every object of its loose objects, packs and
// alternates; every object must be reachable from the base commit (or be
// an annotated tag of such an object), every ref and reflog entry must
// name an ancestor of the base, and no pack without its index nor file of
// git fsck --lost-found may be there, nor a patch file (Options.Patches)
// in the work tree that is not in the base.
//
// It is a small reader of the repository format (SHA-1 objects, files
// ref storage, pack indexes v1 and v2, packs v2 and v3, offset and
// reference deltas); what it does not know (SHA-256 objects, reftable,
// grafts, a submodule's repository under modules/ unless its caller
// audits it: Find lists them) is ErrUnsupported, and the audit fails
// closed on it. It never writes, never runs git and never follows a
// symbolic link it did not have to (git follows them too).
//
// Find lists the repositories of a tree (work trees, bare repositories,
// linked worktrees, submodules) and the patch files of their work trees.
package gitaudit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Version names the audit's rules: a cached audit of another version is
// not reused.
const Version = "2"

// Options are what an audit checks against.
type Options struct {
	// Base is the commit the task starts from (40 hex); empty or "HEAD":
	// the repository's HEAD as it is now.
	Base string
	// TrackedSuffixes: Result.Tracked lists the base tree's paths that end
	// with one of them (a patch file the task ships is not a leak).
	TrackedSuffixes []string
	// MaxLeaks bounds Result.Leaks (0: 50); Result.LeakCount counts them
	// all.
	MaxLeaks int
	// Patches are the work tree's files named like patches (Repo.Patches,
	// relative to the work tree): each that is not in the base's tree is
	// a leak (a merge's .orig, a .rej, a patch left beside the code).
	Patches []string
	// Submodules says the caller audits the submodules' repositories
	// (modules/) itself, as Find lists them; without it a repository with
	// any is ErrUnsupported.
	Submodules bool
}

// Leak is one thing the repository holds past its base.
type Leak struct {
	// Kind is "ref" (a ref or head naming something past the base),
	// "reflog" (an entry naming something past the base), "object" (an
	// object the base does not reach) or "file" (a file that holds
	// what the audit does not read as objects: a pack without its index,
	// what git fsck --lost-found wrote, a patch file in the work tree).
	Kind string `json:"kind"`
	// Class says which: for a ref, branch, tag, remote, stash, notes,
	// replace, original (a filter-branch backup), head (HEAD, ORIG_HEAD,
	// FETCH_HEAD...), operation (a rebase or cherry-pick in progress) or
	// ref; for a reflog, the ref it logs; for an object, its type; for a
	// file, pack, lost-found or patch.
	Class string `json:"class"`
	// Name is the ref, the reflog entry ("logs/HEAD#3") or the object.
	Name string `json:"name"`
	// Object is the object it names.
	Object string `json:"object,omitempty"`
	// Why says why it is past the base, in words.
	Why string `json:"why"`
}

// Result is one repository's audit.
type Result struct {
	// Base is the commit audited against; BaseFrom says where it came
	// from ("declared" or "HEAD").
	Base     string `json:"base"`
	BaseFrom string `json:"base_from"`
	// Ancestors counts the base and its ancestors; Reachable every object
	// the base reaches; Objects the repository's objects (unique).
	Ancestors int `json:"ancestors"`
	Reachable int `json:"reachable"`
	Objects   int `json:"objects"`
	// Refs and ReflogEntries count what was checked.
	Refs          int `json:"refs"`
	ReflogEntries int `json:"reflog_entries"`
	// Shallow says the repository is shallow (history below its shallow
	// commits is not there to check).
	Shallow bool `json:"shallow,omitempty"`
	// Leaks are the first MaxLeaks leaks; LeakCount counts them all.
	Leaks     []Leak `json:"leaks"`
	LeakCount int    `json:"leak_count"`
	// Tracked are the base tree's paths with one of Options'
	// TrackedSuffixes (and PatchSuffixes, with Options.Patches).
	Tracked []string `json:"-"`
}

// Audit audits the repository whose git directory is gitDir (a
// repository's .git, a bare repository, or a linked worktree's git
// directory: its common directory is audited with every worktree).
// Its error is a repository that could not be read, or that this reader
// does not support (ErrUnsupported), or an audit ctx cut short (its error
// names gitDir and wraps ctx's cause): no verdict.
func Audit(ctx context.Context, gitDir string, opts Options) (*Result, error) {
	r, err := audit(ctx, gitDir, opts)
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("audit of %s cut short: %w", gitDir, context.Cause(ctx))
	}
	return r, err
}

func audit(ctx context.Context, gitDir string, opts Options) (*Result, error) {
	l, err := openLayout(gitDir)
	if err != nil {
		return nil, err
	}
	if err := checkFormat(l.common, opts.Submodules); err != nil {
		return nil, err
	}
	refs, err := readRefs(l)
	if err != nil {
		return nil, fmt.Errorf("refs: %w", err)
	}
	logs, err := readReflogs(l)
	if err != nil {
		return nil, fmt.Errorf("reflogs: %w", err)
	}
	shallow, err := readShallow(l.common)
	if err != nil {
		return nil, err
	}
	s, err := openStore(filepath.Join(l.common, "objects"))
	if err != nil {
		return nil, fmt.Errorf("objects: %w", err)
	}
	defer s.close()
	// The maps are sized for the packed objects at once: growing them
	// was an eighth of an audit's time.
	n := s.packedCount()
	a := &auditor{s: s, shallow: shallow, max: opts.MaxLeaks, anc: make(map[ID]bool, n/4), reach: make(map[ID]bool, n)}
	if a.max <= 0 {
		a.max = 50
	}
	r := &Result{Shallow: len(shallow) > 0, Refs: len(refs), ReflogEntries: len(logs), Leaks: []Leak{}}
	a.r = r
	base, err := a.base(opts.Base, refs)
	if err != nil {
		return nil, err
	}
	r.Base = base.String()
	if err := a.walk(ctx, base); err != nil {
		return nil, err
	}
	r.Ancestors, r.Reachable = len(a.anc), len(a.reach)
	suffixes := opts.TrackedSuffixes
	if len(opts.Patches) > 0 {
		suffixes = append(slices.Clip(suffixes), PatchSuffixes...)
	}
	if r.Tracked, err = a.tracked(base, suffixes); err != nil {
		return nil, err
	}
	for _, p := range opts.Patches {
		if _, found := slices.BinarySearch(r.Tracked, p); !found {
			a.leak(Leak{Kind: "file", Class: "patch", Name: p, Why: "a patch, or a merge's or patch's leftover, in the work tree and not in the base's tree"})
		}
	}
	for _, ref := range refs {
		if err := a.checkRef(ref); err != nil {
			return nil, err
		}
	}
	for _, e := range logs {
		for _, id := range []ID{e.Old, e.New} {
			if id != zeroID && !a.anc[id] {
				a.leak(Leak{Kind: "reflog", Class: logClass(e.Log), Name: fmt.Sprintf("%s#%d", e.Log, e.N), Object: id.String(),
					Why: "a reflog entry names a commit that is not the base or one of its ancestors"})
				break
			}
		}
	}
	if err := a.checkObjects(ctx); err != nil {
		return nil, err
	}
	for _, f := range s.stray {
		a.leak(Leak{Kind: "file", Class: "pack", Name: relTo(l.common, f),
			Why: "a pack without its index, or a temporary pack: objects this audit does not read (git index-pack recovers them)"})
	}
	if err := a.checkLostFound(l.common); err != nil {
		return nil, err
	}
	return r, nil
}

// checkLostFound: every file `git fsck --lost-found` left is a leak (a
// dangling blob's content, or a dangling commit's name).
func (a *auditor) checkLostFound(common string) error {
	root := filepath.Join(common, "lost-found")
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == root {
				return nil
			}
			return err
		}
		if !d.IsDir() {
			a.leak(Leak{Kind: "file", Class: "lost-found", Name: relTo(common, p),
				Why: "a file git fsck --lost-found wrote: an object the base does not reach"})
		}
		return nil
	})
}

// relTo names p below root, or p itself when it is not below it (an
// alternate's pack).
func relTo(root, p string) string {
	if rel, err := filepath.Rel(root, p); err == nil && !strings.HasPrefix(rel, "..") {
		return filepath.ToSlash(rel)
	}
	return p
}

type auditor struct {
	s       *store
	shallow map[ID]bool
	anc     map[ID]bool // the base and its ancestors
	reach   map[ID]bool // every object the base reaches
	r       *Result
	max     int
	ticks   int // objects read, for alive
}

// alive is ctx's error, looked at on the first call and every 256th
// after (each call is an object read, far dearer than the look).
func (a *auditor) alive(ctx context.Context) error {
	if a.ticks++; a.ticks%256 == 1 {
		return ctx.Err()
	}
	return nil
}

func (a *auditor) leak(l Leak) {
	a.r.LeakCount++
	if len(a.r.Leaks) < a.max {
		a.r.Leaks = append(a.r.Leaks, l)
	}
}

// base resolves the declared base, or HEAD.
func (a *auditor) base(declared string, refs []Ref) (ID, error) {
	if declared != "" && declared != "HEAD" {
		a.r.BaseFrom = "declared"
		id, err := ParseID(strings.ToLower(declared))
		if err != nil {
			return id, fmt.Errorf("base: %w", err)
		}
		return id, nil
	}
	a.r.BaseFrom = "HEAD"
	for _, r := range refs {
		if r.Name == "HEAD" {
			if r.ID == zeroID {
				return zeroID, fmt.Errorf("base: HEAD names no commit (an unborn branch %s)", r.Target)
			}
			return a.peel(r.ID)
		}
	}
	return zeroID, fmt.Errorf("base: no HEAD: %w", ErrCorrupt)
}

// peel follows annotated tags to the object they name.
func (a *auditor) peel(id ID) (ID, error) {
	for range 16 {
		t, data, err := a.s.read(id)
		if err != nil {
			return id, err
		}
		if t != TypeTag {
			return id, nil
		}
		tag, err := ParseTag(data)
		if err != nil {
			return id, fmt.Errorf("tag %s: %w", id, err)
		}
		id = tag.Object
	}
	return id, corrupt("tag %s: more than 16 tags deep", id)
}

// walk collects the base's ancestors (stopping at shallow commits) and
// every tree and blob their trees reach.
func (a *auditor) walk(ctx context.Context, base ID) error {
	stack := []ID{base}
	for len(stack) > 0 {
		c := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if a.anc[c] {
			continue
		}
		if err := a.alive(ctx); err != nil {
			return err
		}
		t, data, err := a.s.read(c)
		if err != nil {
			return fmt.Errorf("history of the base: %w", err)
		}
		if t != TypeCommit {
			return fmt.Errorf("history of the base: %s is a %s, not a commit: %w", c, t, ErrCorrupt)
		}
		commit, err := ParseCommit(data)
		if err != nil {
			return fmt.Errorf("commit %s: %w", c, err)
		}
		a.anc[c], a.reach[c] = true, true
		if err := a.walkTree(ctx, commit.Tree); err != nil {
			return err
		}
		if !a.shallow[c] {
			for i := len(commit.Parents) - 1; i >= 0; i-- {
				if !a.anc[commit.Parents[i]] {
					stack = append(stack, commit.Parents[i])
				}
			}
		}
	}
	return nil
}

// walkTree marks a tree and everything below it reachable (a submodule's
// commit is another repository's and is not followed).
func (a *auditor) walkTree(ctx context.Context, root ID) error {
	stack := []ID{root}
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if a.reach[id] {
			continue
		}
		if err := a.alive(ctx); err != nil {
			return err
		}
		t, data, err := a.s.read(id)
		if err != nil {
			return fmt.Errorf("a tree of the base's history: %w", err)
		}
		if t != TypeTree {
			return fmt.Errorf("%s is a %s, not a tree: %w", id, t, ErrCorrupt)
		}
		a.reach[id] = true
		err = EachTreeEntry(data, func(e TreeEntry) error {
			switch {
			case e.Gitlink:
			case e.Tree:
				if !a.reach[e.ID] {
					stack = append(stack, e.ID)
				}
			default:
				a.reach[e.ID] = true
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("tree %s: %w", id, err)
		}
	}
	return nil
}

// tracked lists the paths of the base's tree that end with a suffix.
func (a *auditor) tracked(base ID, suffixes []string) ([]string, error) {
	if len(suffixes) == 0 {
		return nil, nil
	}
	_, data, err := a.s.read(base)
	if err != nil {
		return nil, err
	}
	c, err := ParseCommit(data)
	if err != nil {
		return nil, err
	}
	var out []string
	type dir struct {
		id   ID
		path string
	}
	stack := []dir{{c.Tree, ""}}
	for len(stack) > 0 {
		d := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		_, data, err := a.s.read(d.id)
		if err != nil {
			return nil, err
		}
		err = EachTreeEntry(data, func(e TreeEntry) error {
			p := d.path + string(e.Name)
			switch {
			case e.Tree:
				stack = append(stack, dir{e.ID, p + "/"})
			case !e.Gitlink && slices.ContainsFunc(suffixes, func(s string) bool { return strings.HasSuffix(p, s) }):
				out = append(out, p)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	slices.Sort(out)
	return out, nil
}

// checkRef: a ref must name (through its tags) the base or an ancestor,
// or an object the base reaches.
func (a *auditor) checkRef(ref Ref) error {
	if ref.ID == zeroID {
		return nil // an unborn branch names nothing
	}
	class := refClass(ref.Name)
	target, err := a.peel(ref.ID)
	switch {
	case errors.Is(err, ErrMissing):
		a.leak(Leak{Kind: "ref", Class: class, Name: ref.Name, Object: ref.ID.String(), Why: "it names an object the repository does not hold (fetched on demand, or a name to fetch)"})
		return nil
	case err != nil:
		return fmt.Errorf("ref %s: %w", ref.Name, err)
	}
	if a.anc[target] || a.reach[target] {
		return nil
	}
	a.leak(Leak{Kind: "ref", Class: class, Name: ref.Name, Object: target.String(), Why: "it names something that is not the base, an ancestor of it, or in their trees"})
	return nil
}

// checkObjects: every object is one the base reaches, or an annotated
// tag of one.
func (a *auditor) checkObjects(ctx context.Context) error {
	seen := make(map[ID]bool, a.s.packedCount())
	return a.s.each(func(id ID) error {
		if seen[id] {
			return nil
		}
		if err := a.alive(ctx); err != nil {
			return err
		}
		seen[id] = true
		a.r.Objects++
		if a.reach[id] {
			return nil
		}
		t, err := a.s.typeOf(id)
		if err != nil {
			return fmt.Errorf("object %s: %w", id, err)
		}
		if t == TypeTag {
			target, err := a.peel(id)
			if err != nil && !errors.Is(err, ErrMissing) {
				return err
			}
			if err == nil && (a.anc[target] || a.reach[target]) {
				return nil
			}
		}
		why := "an object the base does not reach"
		if t == TypeCommit {
			why = "a commit that is not the base or one of its ancestors (dangling, or on another line of history)"
		}
		a.leak(Leak{Kind: "object", Class: t.String(), Name: id.String(), Why: why})
		return nil
	})
}

// refClass says what kind of ref a name is.
func refClass(name string) string {
	n := name
	if strings.HasPrefix(n, "worktrees/") {
		if _, rest, ok := strings.Cut(strings.TrimPrefix(n, "worktrees/"), "/"); ok {
			n = rest
		}
	}
	switch {
	case strings.HasPrefix(n, "refs/heads/"):
		return "branch"
	case strings.HasPrefix(n, "refs/tags/"):
		return "tag"
	case strings.HasPrefix(n, "refs/remotes/"):
		return "remote"
	case n == "refs/stash":
		return "stash"
	case strings.HasPrefix(n, "refs/notes/"):
		return "notes"
	case strings.HasPrefix(n, "refs/replace/"):
		return "replace"
	case strings.HasPrefix(n, "refs/original/"):
		return "original"
	case strings.HasPrefix(n, "refs/"):
		return "ref"
	case slices.ContainsFunc(operationDirs, func(d string) bool { return strings.HasPrefix(n, d+"/") }):
		return "operation"
	}
	return "head"
}

// logClass is the ref a reflog logs ("HEAD", "refs/heads/main").
func logClass(log string) string {
	if i := strings.Index(log, "logs/"); i >= 0 {
		return log[i+len("logs/"):]
	}
	return log
}

// StateKey is a digest of everything under gitDir's common directory and
// gitDir as the filesystem describes it (each entry's path, type,
// permissions, owner, size, modification time and change time; never the
// content), and of the alternates' objects directories: two repositories
// with the same key are the same files. A file rewritten in place to the
// same size with its modification time put back (a rename over it, a
// chmod undone) still has another change time, which no call sets back.
// extra is folded in (the audit's options and user). A cached audit is
// reused only under the same key.
func StateKey(gitDir string, extra ...string) (string, error) {
	l, err := openLayout(gitDir)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "gitaudit %s\x00", Version)
	for _, e := range extra {
		fmt.Fprintf(h, "%s\x00", e)
	}
	dirs := []string{l.common}
	if l.gitDir != l.common {
		dirs = append(dirs, l.gitDir)
	}
	alts, err := readAlternates(filepath.Join(l.common, "objects"))
	if err != nil {
		return "", err
	}
	dirs = append(dirs, alts...)
	// A symbolic link is a file of the walk, not its target: an objects
	// directory elsewhere is walked as a root of its own.
	if objs := filepath.Join(l.common, "objects"); isSymlink(objs) {
		if target, err := filepath.EvalSymlinks(objs); err == nil {
			dirs = append(dirs, target)
		}
	}
	n := 0
	for _, root := range dirs {
		fmt.Fprintf(h, "root %s\x00", root)
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if n++; n > 1<<20 {
				return fmt.Errorf("more than %d files: %w", 1<<20, ErrUnsupported)
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			var uid, gid uint32
			var mtime, ctime int64
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				uid, gid, mtime, ctime = st.Uid, st.Gid, st.Mtim.Nano(), st.Ctim.Nano()
			}
			rel, _ := filepath.Rel(root, p)
			fmt.Fprintf(h, "%s\x00%o\x00%d\x00%d\x00%d\x00%d\x00%d\x00", rel, uint32(info.Mode()), uid, gid, info.Size(), mtime, ctime)
			return nil
		})
		if err != nil && !(errors.Is(err, fs.ErrNotExist) && root != l.common) {
			return "", err
		}
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// IsGitDir reports whether dir looks like a git directory: a HEAD file
// and an objects directory (a linked worktree's may have only HEAD and
// commondir).
func IsGitDir(dir string) bool {
	if st, err := os.Stat(filepath.Join(dir, "HEAD")); err != nil || !st.Mode().IsRegular() {
		return false
	}
	for _, p := range []string{"objects", "commondir"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err == nil {
			return true
		}
	}
	return false
}

func isSymlink(p string) bool {
	st, err := os.Lstat(p)
	return err == nil && st.Mode()&fs.ModeSymlink != 0
}
