// Package deptest checks what packages import, so the repository's walls
// (which packages may talk to Docker, which must stay pure) are tests
// rather than promises. It asks the go command (go list), the way
// tailscale's tstest/deptest does; it reads no source itself.
package deptest

import (
	"bytes"
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// Package is what go list says of one package.
type Package struct {
	ImportPath   string
	Dir          string
	Imports      []string // non-test imports
	TestImports  []string // imports of its _test.go files in the package
	XTestImports []string // imports of its external _test package
	Deps         []string // every non-test dependency, transitively
}

// List runs "go list -deps=false -json" (with Deps) over patterns.
func List(t testing.TB, patterns ...string) []Package {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-json"}, patterns...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list %v: %v\n%s", patterns, err, errb.String())
	}
	var pkgs []Package
	dec := json.NewDecoder(&out)
	for {
		var p Package
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// Matches reports whether an import path is one of the forbidden entries:
// an exact path ("net"), or a prefix ending in "/" ("github.com/docker/").
func Matches(path string, forbidden []string) bool {
	for _, f := range forbidden {
		if path == f || strings.HasSuffix(f, "/") && strings.HasPrefix(path, f) {
			return true
		}
	}
	return false
}
