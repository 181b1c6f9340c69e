package gitaudit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Ref is one name the repository gives an object: a ref (refs/...), a
// head of the repository or of one of its worktrees (HEAD, ORIG_HEAD,
// FETCH_HEAD, ...), or a line of a file of an operation in progress
// (rebase-merge/orig-head).
type Ref struct {
	// Name is the ref's name, a worktree's prefixed
	// ("worktrees/wt/HEAD").
	Name string
	// ID is the object it names; for a symbolic ref, the object its
	// target names (zero when the target does not exist: an unborn
	// branch).
	ID ID
	// Target is a symbolic ref's target ("refs/heads/main").
	Target string
}

// maxRefFile bounds a ref, head or config file; maxLog a reflog.
const (
	maxRefFile = 1 << 20
	maxLog     = 64 << 20
	// maxRefs bounds the refs and reflogs read (a repository with more is
	// refused: the audit fails closed).
	maxRefs = 100000
)

// readLimited reads a file of at most n bytes.
func readLimited(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, n+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > n {
		return nil, fmt.Errorf("%s: more than %d bytes: %w", filepath.Base(path), n, ErrUnsupported)
	}
	return b, nil
}

// layout is where a repository keeps what: gitDir (HEAD and its own
// heads), common (refs, objects, packed-refs, logs/refs, config), the
// worktrees' directories.
type layout struct {
	gitDir, common string
	worktrees      []string // names under common/worktrees
}

// openLayout reads gitDir's commondir file (a linked worktree's) and
// lists the worktrees.
func openLayout(gitDir string) (layout, error) {
	l := layout{gitDir: gitDir, common: gitDir}
	b, err := readLimited(filepath.Join(gitDir, "commondir"), maxRefFile)
	switch {
	case err == nil:
		c := strings.TrimSpace(string(b))
		if !filepath.IsAbs(c) {
			c = filepath.Join(gitDir, c)
		}
		l.common = filepath.Clean(c)
	case !errors.Is(err, fs.ErrNotExist):
		return l, err
	}
	names, err := readDirNames(filepath.Join(l.common, "worktrees"))
	if err != nil {
		return l, err
	}
	slices.Sort(names)
	l.worktrees = names
	return l, nil
}

// checkFormat refuses what this reader cannot audit: another object
// format or ref storage (the config's extensions), reftable, grafts, and
// submodules' repositories unless the caller audits them.
func checkFormat(common string, submodules bool) error {
	b, err := readLimited(filepath.Join(common, "config"), maxRefFile)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("config: %w", err)
	}
	section := ""
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") {
			section = strings.ToLower(strings.Trim(strings.Fields(line + " ")[0], "[]\""))
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || section != "extensions" {
			continue
		}
		k, v = strings.ToLower(strings.TrimSpace(k)), strings.ToLower(strings.TrimSpace(v))
		switch {
		case k == "objectformat" && v != "sha1":
			return fmt.Errorf("object format %s: %w", v, ErrUnsupported)
		case k == "refstorage" && v != "files":
			return fmt.Errorf("ref storage %s: %w", v, ErrUnsupported)
		}
	}
	// A submodule's repository (modules/NAME) is another repository, with
	// its own history: its caller names it to be audited, this audit
	// does not pass it unseen.
	for _, p := range []string{"reftable", filepath.Join("info", "grafts"), "modules"} {
		if p == "modules" && submodules {
			continue
		}
		if _, err := os.Lstat(filepath.Join(common, p)); err == nil {
			return fmt.Errorf("%s: %w", p, ErrUnsupported)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// refValue is what a ref file says: an object name, or a symbolic
// target.
type refValue struct {
	id     ID
	target string
}

func parseRefValue(b []byte) (refValue, error) {
	line, _, _ := bytes.Cut(b, []byte{'\n'})
	line = bytes.TrimRight(line, "\r")
	if t, ok := bytes.CutPrefix(line, []byte("ref:")); ok {
		t = bytes.TrimSpace(t)
		if len(t) == 0 {
			return refValue{}, corrupt("symbolic ref with no target")
		}
		return refValue{target: string(t)}, nil
	}
	if len(line) < 40 {
		return refValue{}, corrupt("ref %q", clip(string(line)))
	}
	id, err := ParseID(string(line[:40]))
	if err != nil {
		return refValue{}, corrupt("ref: %v", err)
	}
	return refValue{id: id}, nil
}

// readRefs reads every ref of the repository: the loose refs under
// refs/, packed-refs (a loose ref wins over a packed one of its name),
// the heads of the repository and of each worktree, and the files of an
// operation in progress. Symbolic refs are resolved.
func readRefs(l layout) ([]Ref, error) {
	values := map[string]refValue{}
	packed, err := readPackedRefs(filepath.Join(l.common, "packed-refs"))
	if err != nil {
		return nil, err
	}
	for name, id := range packed {
		values[name] = refValue{id: id}
	}
	dirs := []struct{ dir, prefix string }{{l.gitDir, ""}}
	for _, w := range l.worktrees {
		dirs = append(dirs, struct{ dir, prefix string }{filepath.Join(l.common, "worktrees", w), "worktrees/" + w + "/"})
	}
	// The refs shared by every worktree, then each worktree's own
	// (refs/bisect, refs/worktree, refs/rewritten).
	if err := readLooseRefs(l.common, "", values); err != nil {
		return nil, err
	}
	for _, d := range dirs[1:] {
		if err := readLooseRefs(d.dir, d.prefix, values); err != nil {
			return nil, err
		}
	}
	var heads []Ref
	for _, d := range dirs {
		hs, err := readHeads(d.dir, d.prefix, values)
		if err != nil {
			return nil, err
		}
		heads = append(heads, hs...)
	}
	var out []Ref
	for _, name := range sortedKeys(values) {
		out = append(out, resolveRef(name, values[name], values))
	}
	return append(out, heads...), nil
}

// readLooseRefs reads the ref files under dir/refs into values, named
// prefix and their path below dir.
func readLooseRefs(dir, prefix string, values map[string]refValue) error {
	root := filepath.Join(dir, "refs")
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == root {
				return nil
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		if len(values) > maxRefs {
			return fmt.Errorf("more than %d refs: %w", maxRefs, ErrUnsupported)
		}
		b, err := readLimited(p, maxRefFile)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		name := prefix + filepath.ToSlash(rel)
		v, err := parseRefValue(b)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		values[name] = v
		return nil
	})
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// resolveRef follows a symbolic ref through values (at most a few hops:
// git's own bound is 5).
func resolveRef(name string, v refValue, values map[string]refValue) Ref {
	r := Ref{Name: name, Target: v.target}
	for hop := 0; v.target != "" && hop < 5; hop++ {
		next, ok := values[v.target]
		if !ok {
			return r // unborn, or a dangling target: names no object
		}
		v = next
	}
	r.ID = v.id
	return r
}

// operationDirs hold the state of an operation in progress; their files
// may name commits (the rebase's original head, the commit it stopped
// at).
var operationDirs = []string{"rebase-merge", "rebase-apply", "sequencer"}

// readHeads reads the heads directly in dir (HEAD, and every other file
// whose name is upper case, digits and underscores: ORIG_HEAD,
// FETCH_HEAD, MERGE_HEAD, AUTO_MERGE...), each line that starts with an
// object name a value, and the files of an operation in progress.
func readHeads(dir, prefix string, values map[string]refValue) ([]Ref, error) {
	names, err := readDirNames(dir)
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	var out []Ref
	for _, n := range names {
		if !isHeadName(n) {
			continue
		}
		p := filepath.Join(dir, n)
		st, err := os.Stat(p)
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		b, err := readLimited(p, maxRefFile)
		if err != nil {
			return nil, err
		}
		if v, err := parseRefValue(b); err == nil && v.target != "" {
			out = append(out, resolveRef(prefix+n, v, values))
			continue
		}
		out = append(out, linesWithIDs(prefix+n, b)...)
	}
	for _, op := range operationDirs {
		files, err := readDirNames(filepath.Join(dir, op))
		if err != nil {
			return nil, err
		}
		slices.Sort(files)
		for _, f := range files {
			p := filepath.Join(dir, op, f)
			st, err := os.Stat(p)
			if err != nil || !st.Mode().IsRegular() {
				continue
			}
			b, err := readLimited(p, maxRefFile)
			if err != nil {
				return nil, err
			}
			out = append(out, linesWithIDs(prefix+op+"/"+f, b)...)
		}
	}
	return out, nil
}

// linesWithIDs is a ref for each line of b that starts with an object
// name (FETCH_HEAD and MERGE_HEAD hold several).
func linesWithIDs(name string, b []byte) []Ref {
	var out []Ref
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, maxRefFile)
	for i := 0; sc.Scan(); i++ {
		line := sc.Text()
		if len(line) < 40 {
			continue
		}
		id, err := ParseID(line[:40])
		if err != nil {
			continue
		}
		n := name
		if i > 0 {
			n = fmt.Sprintf("%s:%d", name, i+1)
		}
		out = append(out, Ref{Name: n, ID: id})
	}
	return out
}

func isHeadName(n string) bool {
	if n == "" {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !(c >= 'A' && c <= 'Z' || c == '_' || c >= '0' && c <= '9') {
			return false
		}
	}
	return n == "HEAD" || strings.HasSuffix(n, "_HEAD") || n == "AUTO_MERGE"
}

// readPackedRefs reads packed-refs: "ID NAME" lines, "^ID" peeled lines
// (the object a tag line's tag names, which the audit reads itself) and a
// "#" header.
func readPackedRefs(path string) (map[string]ID, error) {
	b, err := readLimited(path, maxLog)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return parsePackedRefs(b)
}

func parsePackedRefs(b []byte) (map[string]ID, error) {
	out := map[string]ID{}
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimRight(line, "\r")
		if line == "" || line[0] == '#' || line[0] == '^' {
			continue
		}
		hex, name, ok := strings.Cut(line, " ")
		id, err := ParseID(hex)
		if !ok || err != nil || name == "" {
			return nil, fmt.Errorf("packed-refs line %d: %w", i+1, corrupt("%q", clip(line)))
		}
		out[name] = id
		if len(out) > maxRefs {
			return nil, fmt.Errorf("packed-refs: more than %d refs: %w", maxRefs, ErrUnsupported)
		}
	}
	return out, nil
}

// LogEntry is one line of a reflog: the values its ref moved between.
type LogEntry struct {
	// Log is the reflog ("logs/HEAD", "logs/refs/heads/main",
	// "worktrees/wt/logs/HEAD") and N the entry's line, from 1.
	Log      string
	N        int
	Old, New ID
}

// readReflogs reads every reflog: logs/HEAD of the repository and of each
// worktree, and logs/refs/**.
func readReflogs(l layout) ([]LogEntry, error) {
	var files []string
	root := filepath.Join(l.common, "logs", "refs")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == root {
				return nil
			}
			return err
		}
		if !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	files = append(files, filepath.Join(l.gitDir, "logs", "HEAD"))
	for _, w := range l.worktrees {
		files = append(files, filepath.Join(l.common, "worktrees", w, "logs", "HEAD"))
	}
	var out []LogEntry
	for _, f := range files {
		b, err := readLimited(f, maxLog)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(l.common, f)
		es, err := parseReflog(filepath.ToSlash(rel), b)
		if err != nil {
			return nil, err
		}
		out = append(out, es...)
		if len(out) > 16*maxRefs {
			return nil, fmt.Errorf("more than %d reflog entries: %w", 16*maxRefs, ErrUnsupported)
		}
	}
	return out, nil
}

// parseReflog reads a reflog's lines: "OLD NEW who <email> time zone\tmessage".
func parseReflog(name string, b []byte) ([]LogEntry, error) {
	var out []LogEntry
	for i, line := range strings.Split(string(b), "\n") {
		if line == "" {
			continue
		}
		if len(line) < 81 || line[40] != ' ' {
			return nil, fmt.Errorf("%s line %d: %w", name, i+1, corrupt("not a reflog entry"))
		}
		old, err1 := ParseID(line[:40])
		nw, err2 := ParseID(line[41:81])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s line %d: %w", name, i+1, corrupt("not a reflog entry"))
		}
		out = append(out, LogEntry{Log: name, N: i + 1, Old: old, New: nw})
	}
	return out, nil
}

// readShallow reads the shallow file: the commits whose parents the
// repository does not hold.
func readShallow(common string) (map[ID]bool, error) {
	b, err := readLimited(filepath.Join(common, "shallow"), maxLog)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[ID]bool{}
	for i, line := range strings.Fields(string(b)) {
		id, err := ParseID(line)
		if err != nil {
			return nil, fmt.Errorf("shallow line %d: %w", i+1, corrupt("%v", err))
		}
		out[id] = true
	}
	return out, nil
}
