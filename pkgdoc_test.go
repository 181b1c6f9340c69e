// Package agentpen_test holds repository-wide rules checked as tests.
package agentpen_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPackageDocs enforces house-style rule 2: every package has exactly one
// package doc comment, and every exported top-level name has a doc comment.
func TestPackageDocs(t *testing.T) {
	dirs := map[string][]string{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != "." || d.Name() == "testdata" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			dirs[filepath.Dir(path)] = append(dirs[filepath.Dir(path)], path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir, files := range dirs {
		var withDoc []string
		for _, f := range files {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			fset := token.NewFileSet()
			af, err := parser.ParseFile(fset, f, src, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			if af.Doc != nil && strings.TrimSpace(af.Doc.Text()) != "" {
				withDoc = append(withDoc, f)
			}
			for _, name := range undocumented(af) {
				t.Errorf("%s: exported %s has no doc comment", f, name)
			}
		}
		switch len(withDoc) {
		case 0:
			t.Errorf("no package doc in %s", dir)
		case 1:
		default:
			t.Errorf("multiple files with a package doc in %s: %v", dir, withDoc)
		}
	}
}

// undocumented lists the exported top-level names of f without a doc
// comment. A name in a documented const or var group counts as documented.
func undocumented(f *ast.File) []string {
	var out []string
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() || d.Doc != nil {
				continue
			}
			if d.Recv != nil && len(d.Recv.List) > 0 && !exportedRecv(d.Recv.List[0].Type) {
				continue
			}
			if d.Recv != nil && isStdMethod(d.Name.Name) {
				continue
			}
			out = append(out, d.Name.Name)
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch sp := spec.(type) {
				case *ast.TypeSpec:
					if sp.Name.IsExported() && sp.Doc == nil && d.Doc == nil {
						out = append(out, sp.Name.Name)
					}
				case *ast.ValueSpec:
					for _, n := range sp.Names {
						if n.IsExported() && sp.Doc == nil && sp.Comment == nil && d.Doc == nil {
							out = append(out, n.Name)
						}
					}
				}
			}
		}
	}
	return out
}

func exportedRecv(e ast.Expr) bool {
	switch x := e.(type) {
	case *ast.StarExpr:
		return exportedRecv(x.X)
	case *ast.IndexExpr:
		return exportedRecv(x.X)
	case *ast.IndexListExpr:
		return exportedRecv(x.X)
	case *ast.Ident:
		return x.IsExported()
	}
	return false
}

// isStdMethod reports methods whose meaning an interface of the standard
// library fixes (error, fmt.Stringer, io.Closer, http.Handler, ...).
func isStdMethod(name string) bool {
	switch name {
	case "Error", "Unwrap", "String", "Close", "ServeHTTP", "MarshalJSON", "UnmarshalJSON", "RoundTrip", "Len", "Less", "Swap":
		return true
	}
	return false
}
