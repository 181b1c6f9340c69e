package gitaudit

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Repo is a repository Find found.
type Repo struct {
	// Path names it: its work tree (the directory holding .git), or its
	// git directory when it has none (a bare repository, a submodule's
	// repository under modules/).
	Path string
	// GitDir is its git directory.
	GitDir string
	// Patches are the files of its work tree (not of a repository nested
	// in it) whose names end with one of PatchSuffixes, relative to Path.
	Patches []string
}

// PatchSuffixes name the files a leak leaves in a work tree: a merge's or
// patch's leftovers (.orig, .rej) and patches (.patch, .diff).
var PatchSuffixes = []string{".orig", ".rej", ".patch", ".diff"}

// maxFindEntries bounds the entries Find visits: a tree with more is
// refused (ErrUnsupported), not half searched.
const maxFindEntries = 1 << 20

// Find lists the repositories under root (root itself included): a
// directory with a .git directory, or a .git file naming one ("gitdir:
// ...", a linked worktree's or a submodule's), a bare repository, and
// every submodule's repository under a git directory's modules/ (checked
// out or not). It never follows a symbolic link; a directory it cannot
// read is not searched (whoever runs Find cannot list it either), unless
// uid owns it: its owner may open it at will, so Find fails rather than
// call it empty (uid < 0: no one is the owner to fear). A root that is
// not there holds none.
func Find(root string, uid int) ([]Repo, error) {
	var repos []Repo
	at := map[string]int{} // by git directory
	add := func(path, gitDir string) {
		i, ok := at[gitDir]
		switch {
		case !ok:
			at[gitDir] = len(repos)
			repos = append(repos, Repo{Path: path, GitDir: gitDir})
		case path != gitDir:
			repos[i].Path = path // a submodule's work tree, found after its repository
		}
	}
	var patches []string
	n := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrPermission) && p != root && uid >= 0 && ownedBy(p, uid) {
				return fmt.Errorf("%s: %w: uid %d owns it, and may open it", p, err, uid)
			}
			if errors.Is(err, fs.ErrPermission) && p != root || errors.Is(err, fs.ErrNotExist) && p == root {
				return nil // nothing there, or nothing whoever runs Find can list
			}
			return err
		}
		if n++; n > maxFindEntries {
			return fmt.Errorf("more than %d files under %s: %w", maxFindEntries, root, ErrUnsupported)
		}
		if !d.IsDir() {
			if d.Name() == ".git" {
				// A .git file names the git directory; a link to one is
				// followed, as git follows it.
				if g, ok := gitFile(p); ok {
					add(filepath.Dir(p), g)
				} else if d.Type()&fs.ModeSymlink != 0 && IsGitDir(p) {
					if g, err := filepath.EvalSymlinks(p); err == nil {
						add(filepath.Dir(p), g)
						findModules(filepath.Join(g, "modules"), add)
					}
				}
			}
			if slices.ContainsFunc(PatchSuffixes, func(s string) bool { return strings.HasSuffix(d.Name(), s) }) {
				patches = append(patches, p)
			}
			return nil
		}
		switch {
		case d.Name() == ".git" && IsGitDir(p):
			add(filepath.Dir(p), p)
			findModules(filepath.Join(p, "modules"), add)
			return filepath.SkipDir
		case IsGitDir(p):
			add(p, p)
			findModules(filepath.Join(p, "modules"), add)
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Each patch file belongs to the innermost work tree holding it.
	for _, f := range patches {
		best := -1
		for i, r := range repos {
			if r.Path != r.GitDir && strings.HasPrefix(f, r.Path+string(filepath.Separator)) &&
				(best < 0 || len(r.Path) > len(repos[best].Path)) {
				best = i
			}
		}
		if best >= 0 {
			rel, _ := filepath.Rel(repos[best].Path, f)
			repos[best].Patches = append(repos[best].Patches, filepath.ToSlash(rel))
		}
	}
	slices.SortFunc(repos, func(a, b Repo) int { return strings.Compare(a.Path, b.Path) })
	return repos, nil
}

// findModules adds every git directory under dir (a modules/ directory:
// submodules' repositories, nested ones under their own modules/).
func findModules(dir string, add func(path, gitDir string)) {
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if p != dir && IsGitDir(p) {
			add(p, p)
			findModules(filepath.Join(p, "modules"), add)
			return filepath.SkipDir
		}
		return nil
	})
}

// gitFile reads a .git file ("gitdir: PATH", relative to its directory)
// and reports the git directory it names, when it is one.
func gitFile(p string) (string, bool) {
	st, err := os.Lstat(p)
	if err != nil || !st.Mode().IsRegular() {
		return "", false
	}
	b, err := readLimited(p, 4096)
	if err != nil {
		return "", false
	}
	line, _, _ := bytes.Cut(b, []byte{'\n'})
	g, ok := strings.CutPrefix(strings.TrimSpace(string(line)), "gitdir:")
	if !ok {
		return "", false
	}
	g = strings.TrimSpace(g)
	if !filepath.IsAbs(g) {
		g = filepath.Join(filepath.Dir(p), g)
	}
	g = filepath.Clean(g)
	if st, err := os.Stat(g); err != nil || !st.IsDir() || !IsGitDir(g) {
		return "", false
	}
	return g, true
}

// ownedBy reports whether uid owns the file at p (not followed).
func ownedBy(p string, uid int) bool {
	fi, err := os.Lstat(p)
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == uid
}
