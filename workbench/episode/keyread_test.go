package episode

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/workbench/tasks"
)

// TestOnlyLocalGraderReadsKeys: in the package's source, a selector .Key
// (tasks.Task's answer key) is read only in methods of localGrader, so an
// environment with another Grader never reads a key. Writes (Reset's
// drop) and the type name tasks.Key are not reads.
func TestOnlyLocalGraderReadsKeys(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	found := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fn, _ := decl.(*ast.FuncDecl)
			allowed := fn != nil && fn.Recv != nil && len(fn.Recv.List) == 1 && types(fn.Recv.List[0].Type) == "localGrader"
			// Writing a key (dropping it) and naming the type tasks.Key
			// are not reads.
			written := map[ast.Node]bool{}
			ast.Inspect(decl, func(n ast.Node) bool {
				if as, ok := n.(*ast.AssignStmt); ok {
					for _, l := range as.Lhs {
						written[l] = true
					}
				}
				return true
			})
			ast.Inspect(decl, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "Key" || written[sel] {
					return true
				}
				if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "tasks" {
					return true
				}
				found++
				if !allowed {
					t.Errorf("%s: .Key read outside localGrader's methods", fset.Position(sel.Pos()))
				}
				return true
			})
		}
	}
	if found == 0 {
		t.Fatal("no .Key selector found at all; the check is looking at the wrong files")
	}
}

func types(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// keyedCatalogue builds from package tasks and remembers the last task it
// handed out, so a test can look at what the environment kept.
type keyedCatalogue struct{ last *tasks.Task }

func (c *keyedCatalogue) IDs() []string { return tasks.IDs() }
func (c *keyedCatalogue) Build(id string) (*tasks.Task, error) {
	t, err := tasks.Build(id)
	c.last = t
	return t, err
}

// TestRemoteGraderDropsKey: with a Grader other than LocalGrader, the
// environment's task carries no key after Reset, and the catalogue's own
// task is left as it was (the key is dropped on a copy).
func TestRemoteGraderDropsKey(t *testing.T) {
	for _, tt := range []struct {
		name   string
		grader Grader
		keyed  bool
	}{
		{name: "local", grader: nil, keyed: true},
		{name: "local_explicit", grader: LocalGrader(nil), keyed: true},
		{name: "remote", grader: LocalGrader(nil).(localGrader).asRemote(), keyed: false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cat := &keyedCatalogue{}
			env := newEnv(t, Config{Catalogue: cat, Grader: tt.grader})
			for _, id := range []string{"software/median", "logs/error_count"} {
				reset(t, env, id)
				env.mu.Lock()
				got := env.task.Key
				env.mu.Unlock()
				empty := got.Answer == "" && got.Items == nil && got.Hidden == nil && got.Tolerance == 0
				if empty == tt.keyed {
					t.Errorf("%s: environment's key empty = %v, want %v", id, empty, !tt.keyed)
				}
				if k := cat.last.Key; k.Answer == "" && k.Items == nil && k.Hidden == nil {
					t.Errorf("%s: the catalogue's own task lost its key", id)
				}
			}
		})
	}
}

// remoteLike is a Grader that is not localGrader, as a remote one is.
type remoteLike struct{ g localGrader }

func (g localGrader) asRemote() Grader { return remoteLike{g} }

func (r remoteLike) ScoreAnswer(ctx context.Context, id, a string) (float64, string, error) {
	return r.g.ScoreAnswer(ctx, id, a)
}
func (r remoteLike) HiddenInputs(ctx context.Context, id string) ([][]any, error) {
	return r.g.HiddenInputs(ctx, id)
}
func (r remoteLike) Judge(ctx context.Context, id string, v []bool, h []Output) (float64, string, error) {
	return r.g.Judge(ctx, id, v, h)
}
