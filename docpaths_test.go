package agentpen_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocPaths: every repository path that README.md, docs/*.md, a
// README of testdata/ or a package doc names exists, so a moved or
// deleted file cannot stay in the docs. A path is a word whose first
// element is an entry at the repository's root (adapter/bringup.go,
// cmd/agentpen, testdata/oracles/, Makefile), a relative link target of
// a Markdown page, or, in a package doc, a bare Go file name (in the
// package's directory) or a path from that directory (testdata/x). Line
// suffixes (:40, :40-43), a trailing /... and a Go name after a package
// path (internal/testkit/testenv.WorkbenchImage) are dropped; a
// placeholder (<domain>, {a,b}, *) must match at least one file. Other
// projects' paths (env_server/http_server.py, tstest/deptest) start with
// no root entry, so they are not read as ours.
func TestDocPaths(t *testing.T) {
	root := rootEntries(t)
	var checked int
	for _, doc := range docPages(t) {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, ref := range pathRefs(string(b), root) {
			checked++
			if !pathExists(ref.path) {
				t.Errorf("%s:%d names %s, which does not exist", doc, ref.line, ref.word)
			}
		}
		for _, ref := range linkRefs(string(b)) {
			checked++
			if p := filepath.Join(filepath.Dir(doc), ref.path); !pathExists(p) {
				t.Errorf("%s:%d links to %s, which does not exist", doc, ref.line, ref.word)
			}
		}
	}
	for dir, doc := range packageDocs(t) {
		for _, ref := range pathRefs(doc.text, root) {
			checked++
			// A package doc names its own testdata/ from its directory.
			if !pathExists(ref.path) && !pathExists(filepath.Join(dir, ref.path)) {
				t.Errorf("%s (package doc, line %d) names %s, which does not exist", doc.file, doc.line+ref.line-1, ref.word)
			}
		}
		for _, ref := range fileRefs(doc.text) {
			checked++
			if !pathExists(filepath.Join(dir, ref.path)) {
				t.Errorf("%s (package doc, line %d) names %s, which is not in %s", doc.file, doc.line+ref.line-1, ref.word, dir)
			}
		}
	}
	if checked < 100 {
		t.Fatalf("only %d paths checked: the rule would check nothing", checked)
	}
}

// TestPathRefs: what counts as a path, and how it is read.
func TestPathRefs(t *testing.T) {
	root := map[string]bool{"adapter": true, "docs": true, "Makefile": true, "testdata": true, "internal": true}
	text := "See adapter/doc.go:17, `adapter/api`, docs/spec.md. and (Makefile)\n" +
		"internal/testkit/testenv.WorkbenchImage, testdata/oracles/<domain>/<name>.py; ./adapter/...\n" +
		"not: tstest/deptest, os/exec, /run/workbench, https://x/adapter/y, agentpen/workbench:dev, adapters/x\n" +
		"testdata/attest/{internal,nat}, `adapter/*.go`"
	var got []string
	for _, r := range pathRefs(text, root) {
		got = append(got, r.path)
	}
	want := []string{"adapter/doc.go", "adapter/api", "docs/spec.md", "Makefile",
		"internal/testkit/testenv.WorkbenchImage", "testdata/oracles/*/*.py", "adapter",
		"testdata/attest/internal", "testdata/attest/nat", "adapter/*.go"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("pathRefs:\n got %q\nwant %q", got, want)
	}
	var links []string
	for _, r := range linkRefs("[a](spec.md) [b](../README.md#x) [c](https://x/y) [d](#here)") {
		links = append(links, r.path)
	}
	if strings.Join(links, " ") != "spec.md ../README.md" {
		t.Errorf("linkRefs: %q", links)
	}
	var files []string
	for _, r := range fileRefs("bringup.go holds it, as gVisor's state_file.go (not ours); x.go.") {
		files = append(files, r.path)
	}
	if strings.Join(files, " ") != "bringup.go state_file.go x.go" {
		t.Errorf("fileRefs: %q", files)
	}
	for _, p := range []string{"pkgdoc_test.go", "internal/testkit/testenv.WorkbenchImage", "testdata/oracles/*/*.py", "docs"} {
		if !pathExists(p) {
			t.Errorf("pathExists(%q) = false", p)
		}
	}
	for _, p := range []string{"adapter/teardown.go", "adapter/spec.go", "testdata/oracles/*/*.rb", "internal/testkit/nothing.WorkbenchImage"} {
		if pathExists(p) {
			t.Errorf("pathExists(%q) = true", p)
		}
	}
}

// ref is a path a doc names: the word as written, the path to check, and
// the line (from 1) it is on.
type ref struct {
	word, path string
	line       int
}

// word is a run of characters a path is written with.
var word = regexp.MustCompile(`[A-Za-z0-9_.@<>{},*/\-]+(:[0-9][0-9,\-]*)?`)

// pathRefs returns the words of text whose first element is an entry of
// the repository's root, cleaned up to the path they name.
func pathRefs(text string, root map[string]bool) []ref {
	var out []ref
	for i, line := range strings.Split(text, "\n") {
		for _, loc := range word.FindAllStringIndex(line, -1) {
			w := line[loc[0]:loc[1]]
			if loc[0] > 0 && strings.ContainsAny(line[loc[0]-1:loc[0]], ":/~$") {
				continue // part of a URL, an absolute path or a variable
			}
			p := strings.TrimPrefix(strings.TrimSuffix(strings.TrimPrefix(w, "**"), "**"), "./")
			p = regexp.MustCompile(`:[0-9][0-9,\-]*$`).ReplaceAllString(p, "")
			p = strings.TrimSuffix(p, "/...")
			p = strings.TrimRight(p, ".,")
			first, _, _ := strings.Cut(p, "/")
			if !root[first] || first == p && !strings.Contains(w, ".") && !strings.HasPrefix(first, strings.ToUpper(first[:1])) {
				continue // not a root entry, or a bare lower-case word (adapter, docs) that is prose
			}
			p = strings.TrimSuffix(p, "/")
			p = regexp.MustCompile(`<[^>]*>`).ReplaceAllString(p, "*")
			for _, e := range expandBraces(p) {
				out = append(out, ref{word: w, path: e, line: i + 1})
			}
		}
	}
	return out
}

// expandBraces expands one {a,b} group.
func expandBraces(p string) []string {
	i, j := strings.Index(p, "{"), strings.Index(p, "}")
	if i < 0 || j < i {
		return []string{p}
	}
	var out []string
	for _, alt := range strings.Split(p[i+1:j], ",") {
		out = append(out, p[:i]+alt+p[j+1:])
	}
	return out
}

// link is a Markdown link's target.
var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// linkRefs returns the relative targets of text's Markdown links, without
// their #fragment.
func linkRefs(text string) []ref {
	var out []ref
	for i, line := range strings.Split(text, "\n") {
		for _, m := range link.FindAllStringSubmatch(line, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			out = append(out, ref{word: m[1], path: target, line: i + 1})
		}
	}
	return out
}

// goFile is a bare Go file name.
var goFile = regexp.MustCompile(`(^|[\s(\x60"'])([a-z0-9_]+\.go)\b`)

// fileRefs returns the bare Go file names (no directory) text names.
func fileRefs(text string) []ref {
	var out []ref
	for i, line := range strings.Split(text, "\n") {
		for _, m := range goFile.FindAllStringSubmatch(line, -1) {
			out = append(out, ref{word: m[2], path: m[2], line: i + 1})
		}
	}
	return out
}

// pathExists reports whether p (relative to the repository's root) names
// a file or directory: as written, as a glob that matches at least one,
// or, when its last element is pkg.Name, the package directory pkg.
func pathExists(p string) bool {
	if strings.ContainsAny(p, "*?[") {
		m, _ := filepath.Glob(p)
		return len(m) > 0
	}
	if _, err := os.Stat(p); err == nil {
		return true
	}
	dir, last := path.Split(p)
	if pkg, name, ok := strings.Cut(last, "."); ok && name != "" && strings.ToUpper(name[:1]) == name[:1] && name[:1] != "_" {
		if fi, err := os.Stat(path.Join(dir, pkg)); err == nil && fi.IsDir() {
			return true
		}
	}
	return false
}

// rootEntries are the names at the repository's root that git tracks.
func rootEntries(t *testing.T) map[string]bool {
	t.Helper()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, e := range entries {
		switch e.Name() {
		case ".git", "bin", ".cache":
			continue
		}
		out[e.Name()] = true
	}
	return out
}

// docPages are README.md, docs/*.md and the READMEs of testdata/.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("docs/*.md")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no docs/*.md: %v", err)
	}
	readmes, err := filepath.Glob("testdata/*/README.md")
	if err != nil {
		t.Fatal(err)
	}
	return append(append([]string{"README.md"}, pages...), readmes...)
}

// pkgDoc is one package's doc comment: its text, the file it is in and
// the line it starts on.
type pkgDoc struct {
	text, file string
	line       int
}

// packageDocs returns every package's doc comment by directory.
func packageDocs(t *testing.T) map[string]pkgDoc {
	t.Helper()
	out := map[string]pkgDoc{}
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && p != "." || d.Name() == "testdata" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil {
			return err
		}
		if f.Doc != nil {
			out[filepath.Dir(p)] = pkgDoc{text: f.Doc.Text(), file: p, line: fset.Position(f.Doc.Pos()).Line}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
